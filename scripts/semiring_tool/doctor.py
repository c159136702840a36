"""scripts/semiring doctor: the host's prerequisites, checked in seconds before hours of build.

`build` runs these checks first; each prints one line, and a missing one stops it.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import urllib.error
import urllib.request
from pathlib import Path

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

Check = tuple[bool, str]


def _tool(name: str, package: str) -> Check:
    path = shutil.which(name)
    return (True, f"{name}: {path}") if path else (False, f"{name}: not found; apt-get install {package}")


def _file(what: str, path: Path, fix: str) -> Check:
    return (True, f"{what}: {path}") if path.exists() else (False, f"{what}: {path} is missing; {fix}")


def _root(trixie: bool) -> Check:
    if os.geteuid() == 0:
        return True, "running as root"
    if trixie:
        return True, "not root: fine on a trixie host, which is the build root itself"
    return False, "not running as root: making and entering the build root (debootstrap, chroot) needs root"


def _python() -> Check:
    version = ".".join(map(str, sys.version_info[:3]))
    return sys.version_info >= MIN_PYTHON, f"python {version} (needs {'.'.join(map(str, MIN_PYTHON))} or newer)"


def _venv() -> Check:
    # Debian splits ensurepip off the interpreter: without it `python3 -m venv` fails.
    if importlib.util.find_spec("venv") and importlib.util.find_spec("ensurepip"):
        return True, "python3 -m venv: available"
    return False, "python3 -m venv: ensurepip is missing; apt-get install python3-venv"


def _disk() -> Check:
    where = state_dir()
    existing = next(p for p in (where, *where.parents) if p.exists())
    if not os.access(existing, os.W_OK):
        return False, f"state dir {where}: {existing} is not writable (set TORCH_SEMIRING_STATE elsewhere)"
    free = shutil.disk_usage(existing).free / 1e9
    return free >= DISK_GB, f"free disk for {where}: {free:.0f} GB (needs {DISK_GB} GB)"


def _ram() -> Check:
    jobs = int(os.environ.get("MAX_JOBS", os.cpu_count() or 2))
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    need = RAM_GB_PER_JOB * jobs
    return total >= need, (f"RAM: {total:.1f} GB for {jobs} parallel compile jobs (needs {need} GB; "
                           f"MAX_JOBS=N sets fewer jobs)")


def _reachable(what: str, url: str) -> Check:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=NET_TIMEOUT) as resp:
            return True, f"{what}: {url} answers (HTTP {resp.status})"
    except urllib.error.HTTPError as e:
        return False, f"{what}: {url} answers HTTP {e.code}"
    except OSError as e:
        return False, f"{what}: cannot reach {url}: {getattr(e, 'reason', e)}"


def checks(pin: Pin) -> list[Check]:
    trixie = host_is(pin.suite)
    found = [_root(trixie), _python(), _venv(), _tool("git", "git"), _tool("patch", "patch")]
    if trixie:
        found.append((True, f"debootstrap, unshare, chroot: not needed on a Debian {pin.suite} host"))
    else:
        found += [_tool("debootstrap", "debootstrap"),
                  _file(f"debootstrap script for {pin.suite}", DEBOOTSTRAP_SCRIPTS / pin.suite,
                        "install a newer debootstrap"),
                  _file("Debian archive keyring", DEBIAN_KEYRING, "apt-get install debian-archive-keyring"),
                  _tool("unshare", "util-linux"), _tool("chroot", "coreutils")]
    return found + [
        _disk(), _ram(),
        _reachable("Debian mirror", f"{pin.mirror.rstrip('/')}/dists/{pin.suite}/Release"),
        _reachable("PyPI", PYPI),
    ]


def report(pin: Pin) -> bool:
    """Print one line per prerequisite; True when nothing is missing."""
    results = checks(pin)
    for ok, line in results:
        say(f"doctor: {'ok     ' if ok else 'MISSING'} {line}")
    return all(ok for ok, _ in results)


def require(pin: Pin) -> None:
    if not report(pin):
        raise ToolError("the host lacks what the build needs (the MISSING lines above); "
                        "'python3 scripts/semiring doctor' checks again")
