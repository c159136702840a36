"""scripts/semiring run / shell: a command, or an interactive shell, on the patched build.

The build's venv lives in the build root (a Debian trixie tree entered with chroot), whose
Python is not the host's. These commands run there with the caller's current directory, the
repository, $HOME and /tmp bind-mounted at their own paths, so that relative paths work,
outputs land where the caller expects, and the paths of the caller's files printed inside are
the host's (the venv's own files show their path in the root). On a trixie host the host is the
build root: the command runs directly, with the same filtered environment.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from . import build
from .buildroot import BuildRoot, pip_access, root_for
from .config import REPO, Pin
from .progress import ToolError, say
from .wheel import tool_command

# Directories of the root that a bind mount at the same path would hide: a working directory
# there cannot be shown inside without breaking the root's own system.
SYSTEM_DIRS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/var", "/boot", "/proc",
               "/sys", "/dev", "/run")

# The caller's variables that would point the root's Python 3.13 or its dynamic loader at the
# host's interpreter, packages or libraries: those are built for another Python and against other
# libraries, and importing them in the root fails or, worse, half works. PATH is replaced by the
# venv's; the locale variables go because the minbase root has only C.UTF-8 (which every command
# in the root gets) and would warn about any other; PS1 because `shell` sets its own.
DROPPED_ENV = {"PATH", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "PYTHONEXECUTABLE",
               "PYTHONPLATLIBDIR", "VIRTUAL_ENV", "LD_LIBRARY_PATH", "LD_PRELOAD", "LD_AUDIT", "LANG",
               "LANGUAGE", "PS1"}
DROPPED_PREFIXES = ("CONDA_", "LC_", "PYENV_")
# Where Python's ssl, requests (so pip and huggingface_hub) and curl look for CA certificates.
CA_BUNDLE_ENV = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")
# $HOME is the host's at its own path and the venv sees the system's site-packages, so Python
# would also read the host's ~/.local/lib/python3.13 (user site-packages, the host's builds).
ADDED_ENV = {"PYTHONNOUSERSITE": "1"}


def environment(caller: Mapping[str, str], venv: str) -> dict[str, str]:
    """The caller's environment, less what would mix the host's Python in, with the venv first."""
    env = {k: v for k, v in caller.items()
           if k not in DROPPED_ENV and not k.startswith(DROPPED_PREFIXES)}
    env.update(ADDED_ENV)
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


@dataclass(frozen=True)
class Target:
    """The build a command runs on."""
    br: BuildRoot
    venv: str   # as seen from inside the root
    label: str  # torch's version, e.g. 2.6.0+semiring.1


def installed_version(br: BuildRoot, venv: str) -> str | None:
    """torch's version in the venv (a build of a prefix of the series has its own label)."""
    for f in br.path(venv).glob("lib/python3*/site-packages/torch/version.py"):
        m = re.search(r"^__version__ = '([^']+)'", f.read_text(), re.M)
        if m:
            return m.group(1)
    return None


def target(pin: Pin, unpatched: bool = False) -> Target:
    """The installed build; refuses when there is none, and says so when it is of an older series."""
    v = build.variant(pin, unpatched=unpatched, cuda=False)
    br = root_for(pin)
    venv = build.venv_python(br, v).rsplit("/bin/", 1)[0]
    label = installed_version(br, venv) or f"{pin.version}+{v.local_version}"
    rebuild = tool_command(v.build_command)
    if not build.stamp_path(br, v).exists() or not br.path(f"{venv}/bin/python").exists():
        raise ToolError(f"there is no build of torch {label} to run on; build it first: {rebuild}")
    have, _ = build.build_state(pin, unpatched=unpatched)
    if not have:
        say(f"the installed build is not of the current series (the patches, configuration or pins "
            f"changed since it was built): running on it anyway; {rebuild} rebuilds it")
    return Target(br, venv, label)


def prepare(t: Target, argv: list[str], cwd: Path, caller: Mapping[str, str],
            extra_env: Mapping[str, str] | None = None) -> list[str]:
    """The command line that runs argv on the build in cwd; refuses a cwd the root cannot show."""
    pip_env, pip_binds = pip_access(t.br)  # so that `run -- pip install ...` reaches PyPI as build does
    env = {**environment(caller, t.venv), **pip_env, **(extra_env or {})}
    packages = build.demo_packages(t.venv)
    if t.br.path(packages).is_dir():
        # The demo's model packages (installed beside the venv by `demo` and `test`): a user's
        # script loads the same pretrained models as the demo (examples/decoder/smollm2.py).
        env.setdefault("PYTHONPATH", packages)
    if "PIP_CERT" in pip_env:
        # The host's CA bundle for every client, not only pip: at the path a caller's SSL_CERT_FILE
        # names, the root has Debian's bundle, without the CAs the host adds (a TLS-inspecting
        # proxy's), and pip, requests and Python's ssl would read that one.
        env.update(dict.fromkeys(CA_BUNDLE_ENV, pip_env["PIP_CERT"]))
    if t.br.root is None:
        return t.br.command(argv, cwd=str(cwd), env=env)
    binds = same_path_binds(cwd, caller.get("HOME"))
    if Path("/dev/pts").is_dir():
        binds[Path("/dev/pts")] = "/dev/pts"  # the terminals: /dev's bind does not carry this mount
    return t.br.command(argv, cwd=str(cwd), env=env, binds={**binds, **pip_binds})


def _can_enter(t: Target) -> None:
    if t.br.root is not None and os.geteuid() != 0:
        raise ToolError(f"entering the build root {t.br.root} (unshare --mount, chroot) needs root, as "
                        f"build did; run this command as root")


def wait(cmd: list[str]) -> int:
    """Runs cmd and returns its exit status, as a shell reports it (128 + N for signal N)."""
    proc = subprocess.Popen(cmd)
    # Ctrl-C reaches the whole foreground process group: the command decides what it means
    # (python stops with KeyboardInterrupt, an interactive shell ignores it), and this process
    # stays to report the command's exit status instead of dying with a traceback.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        rc = proc.wait()
    finally:
        signal.signal(signal.SIGINT, previous)
    return 128 - rc if rc < 0 else rc


def run_command(pin: Pin, argv: list[str], unpatched: bool = False) -> int:
    """Runs argv on the build, in the caller's directory; returns its exit status."""
    if not argv:
        raise ToolError("nothing to run: give a command, e.g. scripts/semiring run -- python my_script.py")
    t = target(pin, unpatched)
    _can_enter(t)
    return wait(prepare(t, argv, Path.cwd(), os.environ))


# The host's ~/.bashrc is inside at its own path; read there, a conda or pyenv set-up in it would
# put the host's Python first on PATH again.
SHELL = ["bash", "--norc", "-i"]
PROMPT = r"(torch-semiring) \w\$ "


def shell(pin: Pin, unpatched: bool = False) -> int:
    """An interactive bash on the build, its prompt saying where it is."""
    t = target(pin, unpatched)
    _can_enter(t)
    cwd = Path.cwd()
    cmd = prepare(t, SHELL, cwd, os.environ, extra_env={"PS1": PROMPT})
    home = os.environ.get("HOME", "$HOME")
    say(f"a shell on torch {t.label}, the venv {t.br.path(t.venv)} first on PATH (python, pip); "
        f"{cwd} and {home} are at their own paths, as are /tmp and the repository; 'exit' leaves it")
    return wait(cmd)
