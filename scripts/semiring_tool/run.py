"""scripts/semiring run / shell: a command, or an interactive shell, on the patched build.

The build's venv lives in the build root (a Debian trixie tree entered with chroot), whose
Python is not the host's. These commands run there with the caller's current directory, the
repository, $HOME and /tmp bind-mounted at their own paths, so that relative paths work,
outputs land where the caller expects, and every path printed inside is the host's.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Mapping

from . import build
from .buildroot import BuildRoot, ensure_root, pip_access
from .config import REPO, Pin
from .progress import ToolError, say

# Directories of the root that a bind mount at the same path would hide: a working directory
# there cannot be shown inside without breaking the root's own system.
SYSTEM_DIRS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/var", "/boot", "/proc",
               "/sys", "/dev", "/run")

# The caller's variables that would point the root's Python 3.13 or its loader at the host's
# interpreter, packages or libraries (built for another Python and other libraries), or at a
# locale the root lacks. PATH is set to the venv's; the root's C.UTF-8 locale stays.
DROPPED_ENV = {"PATH", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "PYTHONEXECUTABLE",
               "VIRTUAL_ENV", "LD_LIBRARY_PATH", "LD_PRELOAD", "LANG", "LANGUAGE", "PS1"}
DROPPED_PREFIXES = ("CONDA_", "LC_", "PYENV_")


def environment(caller: Mapping[str, str], venv: str) -> dict[str, str]:
    """The caller's environment, less what would mix the host's Python in, with the venv first."""
    env = {k: v for k, v in caller.items()
           if k not in DROPPED_ENV and not k.startswith(DROPPED_PREFIXES)}
    env["PATH"] = f"{venv}/bin:/usr/local/bin:/usr/bin:/bin"
    env["VIRTUAL_ENV"] = venv
    return env


def _under(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def _system(path: Path) -> bool:
    return any(_under(path, Path(d)) for d in SYSTEM_DIRS)


def same_path_binds(cwd: Path, home: str | None, repo: Path = REPO) -> dict[Path, str]:
    """Host directories to show inside at their own paths: cwd, the repository, $HOME, /tmp.

    A directory inside another one of the list is visible through it and is left out.
    """
    if cwd == Path("/") or (_system(cwd) and not _under(cwd, repo)):
        raise ToolError(f"the current directory {cwd} is a system directory of the build root, which "
                        f"cannot be shown inside at the same path; cd to your project (under $HOME, "
                        f"/srv, /work, /tmp, ...) and run this again")
    wanted = [cwd, repo, Path("/tmp")]
    if home and Path(home).is_dir() and Path(home) != Path("/") and not _system(Path(home)):
        wanted.append(Path(home))
    binds: dict[Path, str] = {}
    for d in sorted(set(wanted), key=lambda p: len(p.parts)):
        if not any(_under(d, b) for b in binds):
            binds[d] = str(d)
    return binds


def _build_venv(pin: Pin, unpatched: bool) -> tuple[BuildRoot, str]:
    """The build root and the build's venv (as seen inside); refuses when there is no build."""
    v = build.variant(pin, unpatched=unpatched, cuda=False)
    have, why = build.build_state(pin, unpatched=unpatched)
    if not have and "no build of" in why:
        raise ToolError(f"{why}: there is nothing to run on yet")
    br = ensure_root(pin)
    py = build.venv_python(br, v)
    if not br.path(py).exists():
        raise ToolError(f"the build's venv {br.path(py.rsplit('/bin/', 1)[0])} is missing; run "
                        f"'{v.build_command}'")
    if not have:
        say(f"note: {why}; running on the build that is there")
    return br, py.rsplit("/bin/", 1)[0]


def run_command(pin: Pin, argv: list[str], unpatched: bool = False, interactive: bool = False,
                extra_env: Mapping[str, str] | None = None) -> int:
    """Runs argv on the build, in the caller's directory; returns its exit status."""
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        raise ToolError("nothing to run: give a command, e.g. scripts/semiring run -- python my_script.py")
    br, venv = _build_venv(pin, unpatched)
    cwd = Path.cwd()
    binds = same_path_binds(cwd, os.environ.get("HOME"))
    pip_env, pip_binds = pip_access(br)  # so that `run -- pip install ...` reaches PyPI as build does
    env = {**environment(os.environ, venv), **pip_env, **(extra_env or {})}
    if interactive and Path("/dev/pts").is_dir():
        binds[Path("/dev/pts")] = "/dev/pts"  # a terminal for the shell's job control
    cmd = br.command(argv, cwd=str(cwd), env=env,
                     binds=None if br.root is None else {**binds, **pip_binds})
    return subprocess.run(cmd).returncode


def shell(pin: Pin, unpatched: bool = False) -> int:
    """An interactive bash on the build, its prompt saying where it is."""
    v = build.variant(pin, unpatched=unpatched, cuda=False)
    say(f"a shell on the build {v.local_version} (Debian {pin.suite}, Python 3.13, the build's venv "
        f"first on PATH); {Path.cwd()}, $HOME, /tmp and the repository are at their own paths; "
        f"'exit' leaves it")
    return run_command(pin, ["bash", "--norc", "-i"], unpatched=unpatched, interactive=True,
                       extra_env={"PS1": r"(torch-semiring) \w\$ "})
