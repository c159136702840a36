"""scripts/semiring doctor: one line per prerequisite, and a refusal when one is missing."""
import socket
from dataclasses import replace

import pytest

from semiring_tool import doctor
from semiring_tool.config import load_pin
from semiring_tool.progress import ToolError


def closed_port_url():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/simple/pip/"


def test_each_check_prints_a_line_and_a_missing_one_fails(tmp_path, monkeypatch, capsys, gone_mirror):
    monkeypatch.setenv("TORCH_SEMIRING_STATE", str(tmp_path / "state"))
    monkeypatch.setenv("MAX_JOBS", "100000")
    monkeypatch.setattr(doctor, "PYPI", closed_port_url())
    pin = replace(load_pin(), mirror=gone_mirror)
    assert doctor.report(pin) is False
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(doctor.checks(pin))
    missing = [ln for ln in lines if " MISSING " in ln]
    assert any("RAM:" in ln and "100000 parallel compile jobs" in ln for ln in missing)
    assert any(f"Debian mirror: {gone_mirror}/dists/{pin.suite}/Release answers HTTP 404" in ln for ln in missing)
    assert any("PyPI: cannot reach" in ln for ln in missing)
    assert any(" ok " in ln and "git: " in ln for ln in lines)
    assert any(" ok " in ln and f"free disk for {tmp_path / 'state'}" in ln for ln in lines)
    with pytest.raises(ToolError, match="scripts/semiring doctor"):
        doctor.require(pin)


def _host_missing(monkeypatch, missing: list[doctor.Check]):
    """A host where the given checks fail until apt-get has run; returns the argv lists run."""
    ran: list[list[str]] = []
    monkeypatch.setattr(doctor, "checks", lambda _pin: [doctor.Check(True, "git: /usr/bin/git")]
                        + ([] if ran else missing))
    monkeypatch.setattr(doctor.subprocess, "run",
                        lambda argv, env: ran.append(argv) or type("Done", (), {"returncode": 0}))
    monkeypatch.setattr(doctor.shutil, "which", lambda name: f"/usr/bin/{name}")
    return ran


def test_install_installs_the_named_packages_then_checks_again(monkeypatch, capsys):
    pin = load_pin()
    ran = _host_missing(monkeypatch, [
        doctor.Check(False, "debootstrap: not found; apt-get install debootstrap", "debootstrap"),
        doctor.Check(False, "debootstrap script for trixie: missing", "debootstrap"),
        doctor.Check(False, "Debian archive keyring: missing", "debian-archive-keyring")])
    monkeypatch.setattr(doctor.os, "geteuid", lambda: 0)
    assert doctor.install(pin) is True
    assert ran == [["apt-get", "update", "-q"],
                   ["apt-get", "install", "-y", "-q", "debian-archive-keyring", "debootstrap"]]
    assert "MISSING" not in capsys.readouterr().out


def test_install_refuses_without_root_and_leaves_what_no_package_fixes(monkeypatch):
    pin = load_pin()
    ran = _host_missing(monkeypatch, [doctor.Check(False, "debootstrap: not found", "debootstrap")])
    monkeypatch.setattr(doctor.os, "geteuid", lambda: 1000)
    with pytest.raises(ToolError, match=r"installing \['debootstrap'\] needs root"):
        doctor.install(pin)
    assert ran == []
    # RAM or a mirror that does not answer names no package: nothing to install, and still missing.
    ran = _host_missing(monkeypatch, [doctor.Check(False, "RAM: 1.0 GB")])
    assert doctor.install(pin) is False
    assert ran == []
