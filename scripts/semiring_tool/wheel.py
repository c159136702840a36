"""Which hosts can pip install the built wheel, and what `build` tells the user at its end."""
from __future__ import annotations

import platform
import sys
from pathlib import Path

from .buildroot import host_is
from .config import REPO, Pin


def wheel_tags(name: str) -> tuple[str, str, str]:
    """(python, abi, platform) tags of a wheel's file name (PEP 427: the last three fields)."""
    stem = name[:-len(".whl")] if name.endswith(".whl") else name
    parts = stem.split("-")
    if len(parts) < 5:
        raise ValueError(f"not a wheel file name: {name}")
    return parts[-3], parts[-2], parts[-1]


def host_can_install(name: str, suite: str, version: tuple[int, int] | None = None,
                     implementation: str | None = None, machine: str | None = None,
                     on_suite: bool | None = None) -> tuple[bool, str]:
    """Whether this host's python3 can pip install the wheel and import it, and why (not).

    The tags say which interpreter and platform; a linux_x86_64 wheel built with
    USE_SYSTEM_LIBS also needs the Debian release's shared libraries it was linked against.
    """
    py, _, plat = wheel_tags(name)
    version = version or (sys.version_info[0], sys.version_info[1])
    implementation = implementation or sys.implementation.name
    machine = machine or platform.machine()
    host_py = f"{'cp' if implementation == 'cpython' else implementation}{version[0]}{version[1]}"
    if py not in ("py3", f"py{version[0]}") and py != host_py:
        return False, (f"this host's python3 is {implementation} {version[0]}.{version[1]}; the wheel is "
                       f"for {py} (CPython {py[2]}.{py[3:]})" if py.startswith("cp") else
                       f"this host's python3 is {host_py}; the wheel is for {py}")
    if plat != "any" and plat != f"linux_{machine}":
        return False, f"the wheel is for {plat}; this host is {sys.platform} {machine}"
    if plat != "any" and not (host_is(suite) if on_suite is None else on_suite):
        return False, (f"the wheel links Debian {suite}'s shared libraries (glibc, OpenBLAS, Sleef, "
                       f"protobuf, gloo, TensorPipe); this host is not Debian {suite}")
    return True, f"this host's python3 ({host_py}, {sys.platform} {machine}, Debian {suite}) can install it"


def usage(pin: Pin, wheel: Path) -> list[str]:
    """What `build` prints at its end: where the wheel is and how to use it."""
    ok, why = host_can_install(wheel.name, pin.suite)
    lines = [
        f"the wheel: {wheel}",
        f"  (tags {'-'.join(wheel_tags(wheel.name))}: CPython 3.13, x86-64 Linux, Debian {pin.suite}'s "
        f"shared libraries)",
        "use it from your own directory:",
        f"  python3 {REPO}/scripts/semiring run -- python your_script.py   # a command on the build",
        f"  python3 {REPO}/scripts/semiring shell                          # an interactive shell on it",
    ]
    if ok:
        lines.append(f"or install it here ({why}): pip install {wheel} (then the pins of "
                     f"{REPO}/upstream.toml [runtime], or let pip resolve them)")
    else:
        lines.append(f"pip install of the wheel on this host: no ({why}); use run or shell")
    return lines
