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
