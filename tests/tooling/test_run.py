"""scripts/semiring run / shell and the wheel's tags: what runs where, with which files and environment."""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

from semiring_tool import cli, run, wheel
from semiring_tool.buildroot import REPO_BIND, BuildRoot
from semiring_tool.config import load_pin
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
    py311 = wheel.Interpreter("cpython", (3, 11), "x86_64")
    py313 = wheel.Interpreter("cpython", (3, 13), "x86_64")
    assert wheel.wheel_tags(WHEEL) == ("cp313", "cp313", "linux_x86_64")
    assert wheel.wheel_tags("tool-1.0-py3-none-any.whl") == ("py3", "none", "any")
    with pytest.raises(ValueError):
        wheel.wheel_tags("torch.whl")
    assert wheel.host_can_install(WHEEL, "trixie", host=py311, on_suite=False) == \
        (False, "this host's python3 is CPython 3.11; the wheel is cp313")
    assert wheel.host_can_install(WHEEL, "trixie", host=py311, on_suite=True)[0] is False
    ok, why = wheel.host_can_install(WHEEL, "trixie", host=wheel.Interpreter("cpython", (3, 13), "aarch64"),
                                     on_suite=True)
    assert not ok and "linux_x86_64" in why
    free_threaded = wheel.Interpreter("cpython", (3, 13), "x86_64", abiflags="t")
    ok, why = wheel.host_can_install(WHEEL, "trixie", host=free_threaded, on_suite=True)
    assert not ok and "ABI cp313t" in why
    ok, why = wheel.host_can_install(WHEEL, "trixie", host=py313, on_suite=False)
    assert not ok and "not Debian trixie" in why
    assert wheel.host_can_install(WHEEL, "trixie", host=py313, on_suite=True)[0]
    assert wheel.host_can_install("tool-1.0-py3-none-any.whl", "trixie", host=py311, on_suite=False)[0]
    # What pip accepts (packaging's tags), when the host's python3 says, decides.
    tagged = wheel.Interpreter("cpython", (3, 13), "x86_64", tags=frozenset({"cp313-cp313-manylinux_2_17_x86_64"}))
    assert not wheel.host_can_install(WHEEL, "trixie", host=tagged, on_suite=True)[0]


def test_a_trixie_host_needs_the_packages_the_wheel_links(monkeypatch):
    libs = wheel.Linked("2.41", ("libc6", "libopenblas0-openmp", "libsleef3"))
    monkeypatch.setattr(wheel, "missing_packages", lambda packages: ["libsleef3"])
    ok, why = wheel.host_can_install(WHEEL, "trixie", host=wheel.Interpreter("cpython", (3, 13), "x86_64"),
                                     on_suite=True, libs=libs)
    assert not ok and why.endswith("apt-get install libsleef3")


def test_the_hosts_python3_is_asked():
    host = wheel.host_python(sys.executable)
    assert host is not None and host.version == sys.version_info[:2] and host.implementation == "cpython"
    assert host.tags is None or f"cp3{sys.version_info[1]}-cp3{sys.version_info[1]}-linux_{host.machine}" in host.tags
    assert wheel.host_python("no-such-python-here") is None


def test_the_packages_the_wheel_links_are_read_with_ldd_and_dpkg(tmp_path):
    assert wheel.packages_of("libc6:amd64: /usr/lib/x86_64-linux-gnu/libc.so.6\n"
                             "libgomp1:amd64, libgomp1-dbg: /usr/lib/x86_64-linux-gnu/libgomp.so.1\n"
                             "diversion by x from: /usr/lib/y\n") == ["libc6", "libgomp1", "libgomp1-dbg"]
    if shutil.which("dpkg") is None or shutil.which("ldd") is None:
        pytest.skip("not a Debian host")
    # A venv whose torch/lib holds a library of this host: it links glibc, from libc6.
    lib = next(p for p in (Path("/usr/lib/x86_64-linux-gnu/libz.so.1"), Path("/lib/x86_64-linux-gnu/libz.so.1"))
               if p.exists())
    torch_lib = tmp_path / "venv" / "lib" / "python3.13" / "site-packages" / "torch" / "lib"
    torch_lib.mkdir(parents=True)
    shutil.copy(lib, torch_lib / "libtorch_cpu.so")
    libs = wheel.linked(BuildRoot(None), str(tmp_path / "venv"))
    glibc = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "libc6"], capture_output=True, text=True).stdout
    assert libs is not None and glibc.startswith(libs.glibc) and "libc6" in libs.packages
    assert wheel.linked(BuildRoot(None), str(tmp_path / "empty")) is None


def test_build_ends_by_saying_how_to_use_the_wheel(monkeypatch):
    monkeypatch.chdir(REPO)
    libs = wheel.Linked("2.41", ("libc6", "libopenblas0-openmp", "libsleef3"))
    lines = wheel.usage(load_pin(), REPO / "dist" / WHEEL, libs)
    text = "\n".join(lines)
    assert f"the wheel: {REPO}/dist/{WHEEL}" in text
    assert "CPython 3.13 on x86-64 Linux" in text and "glibc 2.41; packages: libc6 libopenblas0-openmp" in text
    assert "python3 scripts/semiring run -- python examples/top_gradient_path.py" in text
    assert "python3 scripts/semiring shell" in text
    assert re.search(r"^this host (cannot pip install it \(.+\): use run or shell|can pip install it .*"
                     rf"VENV/bin/pip install {re.escape(str(REPO))}/dist/{re.escape(WHEEL)})$", lines[-1])
    monkeypatch.chdir("/tmp")
    text = "\n".join(wheel.usage(load_pin(), REPO / "dist" / WHEEL, runnable=False))
    assert "scripts/semiring run" not in text and "buildroot.PACKAGES" in text
