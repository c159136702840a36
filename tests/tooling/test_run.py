"""scripts/semiring run / shell and the wheel's tags: what runs where, with which files and environment."""
import re
from pathlib import Path

import pytest

from conftest import REPO

from semiring_tool import cli, run, wheel
from semiring_tool.buildroot import REPO_BIND, BuildRoot
from semiring_tool.progress import ToolError

WHEEL = "torch-2.6.0+semiring.1-cp313-cp313-linux_x86_64.whl"


def test_environment_drops_what_would_mix_in_the_hosts_python():
    caller = {"PATH": "/opt/conda/bin:/usr/bin", "PYTHONPATH": "/home/u/lib/python3.11", "HOME": "/home/u",
              "CONDA_PREFIX": "/opt/conda", "LD_LIBRARY_PATH": "/opt/conda/lib", "LC_ALL": "de_DE.UTF-8",
              "HF_HOME": "/home/u/hf", "OMP_NUM_THREADS": "2", "VIRTUAL_ENV": "/home/u/venv"}
    env = run.environment(caller, "/build/semiring/venv")
    assert env["PATH"].split(":")[0] == "/build/semiring/venv/bin"
    assert env["VIRTUAL_ENV"] == "/build/semiring/venv"
    assert {"PYTHONPATH", "CONDA_PREFIX", "LD_LIBRARY_PATH", "LC_ALL"}.isdisjoint(env)
    assert env["HF_HOME"] == "/home/u/hf" and env["OMP_NUM_THREADS"] == "2" and env["HOME"] == "/home/u"


def test_binds_show_the_callers_files_at_their_own_paths(tmp_path):
    home = tmp_path / "home"
    project = home / "project"
    project.mkdir(parents=True)
    binds = run.same_path_binds(project, str(home), repo=REPO)
    # Each at the host's own path; none inside another (it is visible through it).
    assert binds == {p: str(p) for p in binds}
    for wanted in (project, home, REPO, Path("/tmp")):
        assert _under_any(wanted, binds), wanted
    assert not any(_under_any(b, {o: 0 for o in binds if o != b}) for b in binds)
    # A system directory of the root is refused, the repository is not, whatever holds it.
    for refused in (Path("/"), Path("/usr/local/src"), Path("/etc")):
        with pytest.raises(ToolError, match="system directory of the build root"):
            run.same_path_binds(refused, str(home), repo=REPO)
    assert run.same_path_binds(Path("/var/cache/x/repo/sub"), None, repo=Path("/var/cache/x/repo"))
    # A $HOME that is a system directory is not bound (it would hide the root's own).
    assert Path("/var/lib/nobody") not in run.same_path_binds(project, "/var/lib/nobody", repo=REPO)


def _under_any(path, binds):
    return any(path == b or b in path.parents for b in binds)


def test_the_command_enters_the_root_with_the_binds_and_the_venv_first():
    binds = run.same_path_binds(REPO, None, repo=REPO)
    env = run.environment({"HOME": "/root"}, "/build/semiring/venv")
    cmd = BuildRoot(Path("/fake/root")).command(["python", "x.py"], cwd=str(REPO), env=env, binds=binds)
    script = cmd[-1]
    assert cmd[:2] == ["unshare", "--mount"]
    assert f"mount --bind {REPO} /fake/root{REPO}" in script
    assert "mount --bind /tmp /fake/root/tmp" in script
    assert f"cd {REPO}" in script and "PATH=/build/semiring/venv/bin:" in script


def test_cli_run_needs_a_command(capsys):
    assert cli.main(["run"]) == 1
    assert "nothing to run" in capsys.readouterr().out


def test_no_tool_module_binds_the_repository_elsewhere():
    for module in (REPO / "scripts" / "semiring_tool").glob("*.py"):
        assert '"/repo' not in module.read_text(), module.name
    assert REPO_BIND == {REPO: str(REPO)}


def test_wheel_tags_and_which_hosts_can_install():
    assert wheel.wheel_tags(WHEEL) == ("cp313", "cp313", "linux_x86_64")
    with pytest.raises(ValueError):
        wheel.wheel_tags("torch.whl")
    ok, why = wheel.host_can_install(WHEEL, "trixie", version=(3, 11), implementation="cpython",
                                     machine="x86_64", on_suite=False)
    assert not ok and why == "this host's python3 is cpython 3.11; the wheel is for cp313 (CPython 3.13)"
    ok, why = wheel.host_can_install(WHEEL, "trixie", version=(3, 13), implementation="cpython",
                                     machine="aarch64", on_suite=True)
    assert not ok and "linux_x86_64" in why
    ok, why = wheel.host_can_install(WHEEL, "trixie", version=(3, 13), implementation="cpython",
                                     machine="x86_64", on_suite=False)
    assert not ok and "not Debian trixie" in why
    assert wheel.host_can_install(WHEEL, "trixie", version=(3, 13), implementation="cpython",
                                  machine="x86_64", on_suite=True)[0]
    assert wheel.host_can_install("tool-1.0-py3-none-any.whl", "trixie", version=(3, 11),
                                  implementation="cpython", machine="x86_64", on_suite=False)[0]


def test_build_ends_by_saying_how_to_use_the_wheel():
    from semiring_tool.config import load_pin

    lines = wheel.usage(load_pin(), REPO / "dist" / WHEEL)
    text = "\n".join(lines)
    assert f"the wheel: {REPO}/dist/{WHEEL}" in text
    assert "scripts/semiring run -- python" in text and "scripts/semiring shell" in text
    assert re.search(r"pip install (of the wheel on this host: no|.*\.whl)", text)
