"""scripts/semiring run / shell and the wheel's tags: what runs where, with which files and environment."""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

from semiring_tool import build, buildroot, cli, run, wheel
from semiring_tool.buildroot import HOST_CERTS_INSIDE, REPO_BIND, BuildRoot
from semiring_tool.config import load_pin
from semiring_tool.progress import ToolError

WHEEL = "torch-2.6.0+semiring.1-cp313-cp313-linux_x86_64.whl"
VENV = "/build/semiring/venv"
FAKE = run.Target(BuildRoot(Path("/fake/root")), VENV, "2.6.0+semiring.1")


@pytest.fixture
def called(monkeypatch):
    """What cli.main passes to run_command and shell, instead of running anything."""
    calls = []
    monkeypatch.setattr(run, "run_command", lambda pin, argv, unpatched: calls.append(("run", argv, unpatched)) or 0)
    monkeypatch.setattr(run, "shell", lambda pin, unpatched: calls.append(("shell", unpatched)) or 0)
    return calls


def test_cli_run_takes_the_command_after_a_leading_double_dash(called):
    assert cli.main(["run", "--", "python", "-c", "print(1)"]) == 0
    assert cli.main(["run", "--unpatched", "--", "ls", "--", "-l"]) == 0
    assert cli.main(["run", "python", "x.py", "--unpatched"]) == 0
    assert cli.main(["shell", "--unpatched"]) == 0
    assert called == [("run", ["python", "-c", "print(1)"], False), ("run", ["ls", "--", "-l"], True),
                      ("run", ["python", "x.py", "--unpatched"], False), ("shell", True)]


@pytest.mark.parametrize("argv", [["run"], ["run", "--"], ["run", "--unpatched", "--"]])
def test_cli_run_needs_a_command(called, capsys, argv):
    with pytest.raises(SystemExit) as exit:
        cli.main(argv)
    assert exit.value.code == 2 and not called
    assert "nothing to run" in capsys.readouterr().err


def test_environment_drops_what_would_mix_in_the_hosts_python():
    caller = {"PATH": "/opt/conda/bin:/usr/bin", "PYTHONPATH": "/home/u/lib/python3.11", "HOME": "/home/u",
              "PYTHONHOME": "/opt/py", "PYTHONSTARTUP": "/home/u/.pythonrc", "LD_PRELOAD": "/opt/libx.so",
              "CONDA_PREFIX": "/opt/conda", "CONDA_DEFAULT_ENV": "base", "LD_LIBRARY_PATH": "/opt/conda/lib",
              "LC_ALL": "de_DE.UTF-8", "VIRTUAL_ENV": "/home/u/venv",
              "HF_HOME": "/home/u/hf", "OMP_NUM_THREADS": "2", "TERM": "xterm"}
    env = run.environment(caller, VENV)
    assert env["PATH"] == f"{VENV}/bin:/usr/local/bin:/usr/bin:/bin"
    assert env["VIRTUAL_ENV"] == VENV
    assert env["PYTHONNOUSERSITE"] == "1"  # the host's ~/.local/lib/python3.13 is not the root's
    dropped = {"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "LD_PRELOAD", "CONDA_PREFIX", "CONDA_DEFAULT_ENV",
               "LD_LIBRARY_PATH", "LC_ALL"}
    assert dropped.isdisjoint(env)
    assert {k: env[k] for k in ("HF_HOME", "OMP_NUM_THREADS", "HOME", "TERM")} == \
        {k: caller[k] for k in ("HF_HOME", "OMP_NUM_THREADS", "HOME", "TERM")}


def _under_any(path, binds):
    return any(path == b or b in path.parents for b in binds)


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
    elsewhere = Path("/srv/x/project")
    assert run.same_path_binds(elsewhere, "/nonexistent-home", repo=Path("/work/repo")) == \
        {Path("/tmp"): "/tmp", Path("/srv/x/project"): "/srv/x/project", Path("/work/repo"): "/work/repo"}
    # A system directory of the root is refused, the repository is not, whatever holds it.
    for refused in (Path("/"), Path("/usr/local/src"), Path("/etc"), Path("/var/tmp/x"), Path("/lib64")):
        with pytest.raises(ToolError, match="system directory of the build root.*cd to your project"):
            run.same_path_binds(refused, str(home), repo=REPO)
    assert run.same_path_binds(Path("/var/cache/x/repo/sub"), None, repo=Path("/var/cache/x/repo"))
    # A $HOME that is a system directory, or /, is not bound (it would hide the root's own).
    assert Path("/etc") not in run.same_path_binds(project, "/etc", repo=REPO)
    assert Path("/") not in run.same_path_binds(project, "/", repo=REPO)


def test_the_command_enters_the_root_with_the_binds_and_the_venv_first(tmp_path, monkeypatch):
    monkeypatch.delenv("PIP_CERT", raising=False)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    project = Path("/srv/someone/project")  # the working directory need not exist on this host
    caller = {"HOME": str(tmp_path), "PYTHONPATH": "/host/site-packages", "PATH": "/host/bin", "HF_HOME": "/hf"}
    cmd = run.prepare(FAKE, ["python", "my script.py"], project, caller)
    assert cmd[:3] == ["unshare", "--mount", "--fork"]
    script = cmd[-1]
    # Each at its own path, directly or through a bound directory that holds it (the
    # repository of a clone under /tmp is visible through /tmp; $HOME here is under /tmp).
    bound = [Path(d) for d in re.findall(r"mount --bind (\S+) /fake/root\1 ", script)]
    for host in (project, REPO, Path("/tmp"), tmp_path):
        assert any(host == d or d in host.parents for d in bound), host
    assert "exec chroot /fake/root sh -c" in script
    assert f"cd {project} &&" in script
    assert f"PATH={VENV}/bin:/usr/local/bin:/usr/bin:/bin" in script
    assert f"VIRTUAL_ENV={VENV}" in script and "HF_HOME=/hf" in script
    assert "/host/" not in script
    assert "python '\"'\"'my script.py'\"'\"'" in script  # the argument, quoted twice (two sh -c)
    with pytest.raises(ToolError, match="system directory"):
        run.prepare(FAKE, ["python"], Path("/usr/src"), caller)


def test_the_demos_model_packages_are_on_the_path_once_installed(tmp_path, monkeypatch):
    # The caller's PYTHONPATH never goes in; the demo's model packages (SmolLM2, MiniLM) do,
    # once `demo` or `test` has installed them beside the venv.
    monkeypatch.delenv("PIP_CERT", raising=False)
    root = tmp_path / "root"
    target = run.Target(BuildRoot(root), VENV, "2.6.0+semiring.1")
    caller = {"HOME": "/root", "PYTHONPATH": "/host/site-packages"}
    packages = f"/build/semiring/{build.DEMO_PACKAGES}"
    assert "PYTHONPATH" not in run.prepare(target, ["python"], REPO, caller)[-1]
    (root / packages.lstrip("/")).mkdir(parents=True)
    script = run.prepare(target, ["python"], REPO, caller)[-1]
    assert f"PYTHONPATH={packages}" in script and "/host/" not in script


def test_every_client_in_the_root_trusts_the_hosts_certificates(tmp_path, monkeypatch):
    # The caller's SSL_CERT_FILE names a host file; at that path the root has Debian's bundle.
    bundle = tmp_path / "certs" / "host-bundle.crt"
    bundle.parent.mkdir()
    bundle.write_text("host CAs")
    monkeypatch.setenv("PIP_CERT", str(bundle))
    caller = {"HOME": "/root", "SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt"}
    script = run.prepare(FAKE, ["python"], REPO, caller)[-1]
    inside = f"{HOST_CERTS_INSIDE}/host-bundle.crt"
    assert f"mount --bind {bundle.parent} /fake/root{HOST_CERTS_INSIDE}" in script
    for var in ("PIP_CERT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        assert f"{var}={inside}" in script, var
    assert "SSL_CERT_FILE=/etc/ssl" not in script


def test_on_a_trixie_host_the_command_runs_directly():
    host = run.Target(BuildRoot(None), "/state/build/semiring/venv", "2.6.0+semiring.1")
    cmd = run.prepare(host, ["python", "x.py"], Path("/usr/src/anywhere"), {"HOME": "/root"})
    assert cmd[:2] == ["sh", "-c"] and "chroot" not in cmd[-1] and "mount" not in cmd[-1]
    assert "cd /usr/src/anywhere && exec env -i" in cmd[-1]
    assert "PATH=/state/build/semiring/venv/bin:" in cmd[-1]


def _state(tmp_path, monkeypatch, stamp=None):
    """A state directory on a host that is the build root, with a build whose python is a script
    that prints what it sees; stamp: the build's stamp (None: of the current series)."""
    monkeypatch.setenv("TORCH_SEMIRING_STATE", str(tmp_path / "state"))
    monkeypatch.setattr(buildroot, "host_is", lambda suite: True)
    monkeypatch.delenv("TORCH_SEMIRING_FORCE_CHROOT", raising=False)
    pin = load_pin()
    br = buildroot.root_for(pin)
    v = build.variant(pin, unpatched=False, cuda=False)
    python = br.path(build.venv_python(br, v))
    python.parent.mkdir(parents=True)
    python.write_text('#!/bin/sh\necho "cwd=$PWD venv=$VIRTUAL_ENV pythonpath=${PYTHONPATH-unset} args=$*"\n'
                      'exit "${EXIT:-0}"\n')
    python.chmod(0o755)
    build.stamp_path(br, v).write_text(f"{stamp or build.build_stamp(pin, v)} abc123\n")
    return pin, python.parent.parent


def test_run_runs_in_the_callers_directory_and_returns_its_exit_status(tmp_path, monkeypatch, capfd):
    pin, venv = _state(tmp_path, monkeypatch)
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    monkeypatch.setenv("PYTHONPATH", "/host/site-packages")
    monkeypatch.setenv("EXIT", "3")
    assert run.run_command(pin, ["python", "a b"]) == 3
    out = capfd.readouterr().out
    assert out == f"cwd={project} venv={venv} pythonpath=unset args=a b\n"  # no [semiring] line: current


def test_run_on_a_build_of_an_older_series_says_so_once(tmp_path, monkeypatch, capfd):
    pin, _ = _state(tmp_path, monkeypatch, stamp="0123456789abcdef")
    monkeypatch.chdir(REPO)
    assert run.run_command(pin, ["python"]) == 0
    notes = [ln for ln in capfd.readouterr().out.splitlines() if ln.startswith("[semiring]")]
    assert len(notes) == 1
    assert "not of the current series" in notes[0] and "python3 scripts/semiring build rebuilds it" in notes[0]


def test_run_without_a_build_says_which_command_builds_it(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_SEMIRING_STATE", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ToolError, match=rf"no build of torch 2\.6\.0\+unpatched .*build it first: "
                                        rf"python3 {re.escape(str(REPO))}/scripts/semiring build --unpatched"):
        run.run_command(load_pin(), ["python"], unpatched=True)
    with pytest.raises(ToolError, match="build it first"):
        run.shell(load_pin())


def test_no_tool_module_binds_the_repository_elsewhere():
    for module in (REPO / "scripts" / "semiring_tool").glob("*.py"):
        assert not re.search(r"""["'{]/repo\b""", module.read_text()), module.name
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


def _tiny_root(root: Path) -> None:
    """A root with this host's sh and env (and their libraries): enough for run's command line."""
    for tool in ("sh", "env"):
        binary = Path(shutil.which(tool)).resolve()
        needed = subprocess.run(["ldd", str(binary)], capture_output=True, text=True).stdout
        for f in [binary, *map(Path, re.findall(r"(/\S+) \(0x", needed))]:
            dst = root / str(f).lstrip("/")
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(f, dst)
    (root / "bin").mkdir(exist_ok=True)
    shutil.copy(Path(shutil.which("sh")).resolve(), root / "bin" / "sh")
    (root / "usr" / "bin").mkdir(parents=True, exist_ok=True)
    shutil.copy(Path(shutil.which("env")).resolve(), root / "usr" / "bin" / "env")


def test_in_a_root_the_callers_files_are_at_their_own_paths(tmp_path, monkeypatch, capfd):
    # The real unshare + bind mounts + chroot, into a root made of this host's sh and env.
    if not (shutil.which("unshare") and shutil.which("chroot") and shutil.which("ldd")) or \
            subprocess.run(["unshare", "--mount", "--fork", "true"], capture_output=True).returncode != 0:
        pytest.skip("needs root, unshare --mount and chroot")
    root = tmp_path / "root"
    _tiny_root(root)
    python = root / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text('#!/bin/sh\necho "cwd=$PWD venv=$VIRTUAL_ENV args=$*"; [ -f input.txt ] && echo seen input\n'
                      'echo written > output.txt; exit 7\n')
    python.chmod(0o755)
    project = tmp_path / "project"
    project.mkdir()
    (project / "input.txt").write_text("x")
    cmd = run.prepare(run.Target(BuildRoot(root), "/venv", "2.6.0+semiring.1"), ["python", "a"], project,
                      {"HOME": str(tmp_path)})
    assert run.wait(cmd) == 7
    assert capfd.readouterr().out == f"cwd={project} venv=/venv args=a\nseen input\n"
    assert (project / "output.txt").read_text() == "written\n"  # on the host, where the caller is
    assert not (root / str(project).lstrip("/") / "output.txt").exists()


def test_shell_says_what_it_is_then_runs_bash_with_its_prompt(tmp_path, monkeypatch, capsys):
    pin, venv = _state(tmp_path, monkeypatch)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    ran = []
    monkeypatch.setattr(run, "wait", lambda cmd: ran.append(cmd) or 0)
    assert run.shell(pin) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 and out[0].startswith("[semiring] a shell on torch 2.6.0+semiring.1")
    assert str(venv) in out[0] and f"{tmp_path} and {tmp_path} are at their own paths" in out[0]
    assert "'exit' leaves it" in out[0]
    assert "bash --norc -i" in ran[0][-1] and "'PS1=(torch-semiring) " in ran[0][-1]
