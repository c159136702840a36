"""scripts/semiring doctor: the host's prerequisites, checked in seconds before hours of build.

`build` runs these checks first; each prints one line, and a missing one stops it. A missing
host tool that Debian packages names its package; `doctor --install` installs those with apt-get
(as root), since a new machine has none of them.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import NamedTuple

from .buildroot import host_is
from .config import Pin, state_dir
from .progress import ToolError, say

MIN_PYTHON = (3, 11)  # tomllib; scripts/semiring refuses older ones before importing anything
# A cold build fills about 7 GB (the build root with its build tree, work trees, downloads);
# 10 GB leaves room for the wheel, its install and ccache's growth.
DISK_GB = 10
# An allowance per compile job, with margin: measured, the jobs of a cold build's first few
# hundred steps took up to 0.6 GB each; the generated operator and autograd sources compiled
# later are larger. ninja runs MAX_JOBS jobs at once (default: one per core).
RAM_GB_PER_JOB = 2
NET_TIMEOUT = 10
# Made on another release (Ubuntu, an older Debian), debootstrap needs a script for the suite
# and Debian's archive key to check what it downloads.
DEBOOTSTRAP_SCRIPTS = Path("/usr/share/debootstrap/scripts")
DEBIAN_KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
PYPI = "https://pypi.org/simple/pip/"  # build installs torch's pinned requirements, test pytest


class Check(NamedTuple):
    ok: bool
    line: str
    package: str | None = None  # the Debian package that provides what is missing


def _tool(name: str, package: str) -> Check:
    path = shutil.which(name)
    if path:
        return Check(True, f"{name}: {path}")
    return Check(False, f"{name}: not found; apt-get install {package}", package)


def _file(what: str, path: Path, fix: str, package: str | None = None) -> Check:
    if path.exists():
        return Check(True, f"{what}: {path}")
    return Check(False, f"{what}: {path} is missing; {fix}", package)


def _root(trixie: bool) -> Check:
    if os.geteuid() == 0:
        return Check(True, "running as root")
    if trixie:
        return Check(True, "not root: fine on a trixie host, which is the build root itself")
    return Check(False, "not running as root: making and entering the build root (debootstrap, chroot) needs root")


def _python() -> Check:
    version = ".".join(map(str, sys.version_info[:3]))
    return Check(sys.version_info >= MIN_PYTHON, f"python {version} (needs {'.'.join(map(str, MIN_PYTHON))} or newer)")


def _venv() -> Check:
    # Debian splits ensurepip off the interpreter: without it `python3 -m venv` fails.
    if importlib.util.find_spec("venv") and importlib.util.find_spec("ensurepip"):
        return Check(True, "python3 -m venv: available")
    return Check(False, "python3 -m venv: ensurepip is missing; apt-get install python3-venv", "python3-venv")


def _disk() -> Check:
    where = state_dir()
    existing = next(p for p in (where, *where.parents) if p.exists())
    if not os.access(existing, os.W_OK):
        return Check(False, f"state dir {where}: {existing} is not writable (set TORCH_SEMIRING_STATE elsewhere)")
    free = shutil.disk_usage(existing).free / 1e9
    return Check(free >= DISK_GB, f"free disk for {where}: {free:.0f} GB (needs {DISK_GB} GB)")


def _ram() -> Check:
    jobs = int(os.environ.get("MAX_JOBS", os.cpu_count() or 2))
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    need = RAM_GB_PER_JOB * jobs
    return Check(total >= need, f"RAM: {total:.1f} GB for {jobs} parallel compile jobs (needs {need} GB; "
                                f"MAX_JOBS=N sets fewer jobs)")


def _reachable(what: str, url: str) -> Check:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=NET_TIMEOUT) as resp:
            return Check(True, f"{what}: {url} answers (HTTP {resp.status})")
    except urllib.error.HTTPError as e:
        return Check(False, f"{what}: {url} answers HTTP {e.code}")
    except OSError as e:
        return Check(False, f"{what}: cannot reach {url}: {getattr(e, 'reason', e)}")


def checks(pin: Pin) -> list[Check]:
    trixie = host_is(pin.suite)
    found = [_root(trixie), _python(), _venv(), _tool("git", "git"), _tool("patch", "patch")]
    if trixie:
        found.append(Check(True, f"debootstrap, unshare, chroot: not needed on a Debian {pin.suite} host"))
    else:
        found += [_tool("debootstrap", "debootstrap"),
                  _file(f"debootstrap script for {pin.suite}", DEBOOTSTRAP_SCRIPTS / pin.suite,
                        "install a newer debootstrap", "debootstrap"),
                  _file("Debian archive keyring", DEBIAN_KEYRING, "apt-get install debian-archive-keyring",
                        "debian-archive-keyring"),
                  _tool("unshare", "util-linux"), _tool("chroot", "coreutils")]
    return found + [
        _disk(), _ram(),
        _reachable("Debian mirror", f"{pin.mirror.rstrip('/')}/dists/{pin.suite}/Release"),
        _reachable("PyPI", PYPI),
    ]


def report(pin: Pin, results: list[Check] | None = None) -> bool:
    """Print one line per prerequisite; True when nothing is missing."""
    results = checks(pin) if results is None else results
    for ok, line, _ in results:
        say(f"doctor: {'ok     ' if ok else 'MISSING'} {line}")
    return all(c.ok for c in results)


def install(pin: Pin) -> bool:
    """Install the Debian packages of the missing host tools, then check again."""
    results = checks(pin)
    packages = sorted({c.package for c in results if not c.ok and c.package})
    if not packages:
        return report(pin, results)
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise ToolError(f"installing {packages} needs root and apt-get; install them by hand")
    say(f"doctor: apt-get install {' '.join(packages)}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", *packages]):
        if subprocess.run(argv, env=env).returncode != 0:
            raise ToolError(f"'{' '.join(argv)}' failed (its output is above)")
    return report(pin)


def require(pin: Pin) -> None:
    if not report(pin):
        raise ToolError("the host lacks what the build needs (the MISSING lines above); "
                        "'python3 scripts/semiring doctor' checks again, and "
                        "'python3 scripts/semiring doctor --install' installs the Debian packages named")
