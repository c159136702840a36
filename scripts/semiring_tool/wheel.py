"""Which hosts can pip install the built wheel, and what `build` tells the user at its end."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .buildroot import BuildRoot, host_is
from .config import REPO, Pin


def tool_command(args: str, cwd: Path | None = None) -> str:
    """How the user types this tool's `args` ("scripts/semiring build") from where they are."""
    return f"python3 {args}" if (cwd or Path.cwd()) == REPO else f"python3 {REPO}/{args}"


def wheel_tags(name: str) -> tuple[str, str, str]:
    """(python, abi, platform) tags of a wheel's file name (PEP 427: the last three fields)."""
    stem = name[:-len(".whl")] if name.endswith(".whl") else name
    parts = stem.split("-")
    if len(parts) < 5:
        raise ValueError(f"not a wheel file name: {name}")
    return parts[-3], parts[-2], parts[-1]


@dataclass(frozen=True)
class Interpreter:
    """What decides which wheels a Python installs."""
    implementation: str      # sys.implementation.name: "cpython", "pypy"
    version: tuple[int, int]
    machine: str             # platform.machine(): "x86_64"
    system: str = "linux"    # sys.platform
    abiflags: str = ""       # sys.abiflags: "t" for a free-threaded build
    tags: frozenset[str] | None = None  # what its pip accepts (packaging.tags.sys_tags), when known

    @property
    def tag(self) -> str:
        short = {"cpython": "cp", "pypy": "pp"}.get(self.implementation, self.implementation)
        return f"{short}{self.version[0]}{self.version[1]}"

    def __str__(self) -> str:
        name = {"cpython": "CPython", "pypy": "PyPy"}.get(self.implementation, self.implementation)
        return f"{name} {self.version[0]}.{self.version[1]}{self.abiflags}"


# Run by the host's python3: its facts, and the tags its pip accepts (pip's own copy of
# packaging when packaging itself is not installed).
PROBE = """
import json, platform, sys
tags = None
for module in ("packaging.tags", "pip._vendor.packaging.tags"):
    try:
        tags = sorted(str(t) for t in __import__(module, fromlist=["sys_tags"]).sys_tags())
        break
    except Exception:
        pass
print(json.dumps({"implementation": sys.implementation.name, "version": list(sys.version_info[:2]),
                  "machine": platform.machine(), "system": sys.platform,
                  "abiflags": getattr(sys, "abiflags", ""), "tags": tags}))
"""


def host_python(python: str = "python3") -> Interpreter | None:
    """The facts of the host's `python` (the one `pip install` would use); None if there is none."""
    path = shutil.which(python)
    if path is None:
        return None
    try:
        out = subprocess.run([path, "-c", PROBE], capture_output=True, text=True, timeout=60).stdout
        facts = json.loads(out)
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None
    tags = facts.pop("tags")
    return Interpreter(**{**facts, "version": tuple(facts["version"])},
                       tags=frozenset(tags) if tags is not None else None)


def _accepts(host: Interpreter, name: str) -> tuple[bool, str]:
    """Whether the host's pip takes the wheel's tags, and which of them it does not."""
    py, abi, plat = wheel_tags(name)
    major, minor = host.version
    if not any(p == host.tag or p in ("py3", f"py{major}", f"py{major}{minor}") for p in py.split(".")):
        why = f"this host's python3 is {host}; the wheel is {py}"
    elif not any(a in ("none", host.tag + host.abiflags) or (a == "abi3" and host.implementation == "cpython")
                 for a in abi.split(".")):
        why = f"this host's python3 is {host} (ABI {host.tag}{host.abiflags}); the wheel's ABI is {abi}"
    elif not any(q == "any" or q == f"{host.system}_{host.machine}"
                 or (q.startswith(("manylinux", "musllinux")) and q.endswith(f"_{host.machine}"))
                 for q in plat.split(".")):
        why = f"this host is {host.system} {host.machine}; the wheel is {plat}"
    else:
        why = ""
    if host.tags is None:
        return not why, why
    expanded = {f"{p}-{a}-{q}" for p in py.split(".") for a in abi.split(".") for q in plat.split(".")}
    ok = bool(expanded & host.tags)
    return ok, "" if ok else why or f"this host's python3 ({host}) does not accept the tags {py}-{abi}-{plat}"


@dataclass(frozen=True)
class Linked:
    """What the installed wheel loads from the system: glibc's version and the Debian packages."""
    glibc: str
    packages: tuple[str, ...]


# In the build root (or a trixie host), in the venv: libc6's version, then the Debian package of
# every system library that torch's libraries and extension load (ldd follows their needs).
LINKED_SCRIPT = r"""
dpkg-query -W -f='${Version}\n' libc6
cd "$1" && for so in lib/python3*/site-packages/torch/lib/*.so* lib/python3*/site-packages/torch/_C*.so; do
    ldd "$so"
done 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u | while read -r lib; do
    real=$(readlink -f "$lib")
    dpkg -S "$real" 2>/dev/null || dpkg -S "${real#/usr}" 2>/dev/null || dpkg -S "/usr$real" 2>/dev/null
done
"""


def packages_of(dpkg_search: str) -> list[str]:
    """The package names in `dpkg -S` output ("libc6:amd64: /usr/lib/...", "a, b: /path")."""
    names = set()
    for line in dpkg_search.splitlines():
        owners, sep, _ = line.partition(": /")
        if sep:
            names.update(o.split(":")[0].strip() for o in owners.split(","))
    return sorted(n for n in names if re.fullmatch(r"[a-z0-9][a-z0-9+.-]+", n))


def linked(br: BuildRoot, venv: str) -> Linked | None:
    """What the wheel installed in `venv` (as seen from inside) links; None if that cannot be read."""
    out = br.run(["sh", "-c", LINKED_SCRIPT, "sh", venv], capture=True, check=False).stdout or ""
    first, _, rest = out.partition("\n")
    glibc = re.match(r"\d+\.\d+", first)
    packages = packages_of(rest)
    if glibc is None or "libc6" not in packages:
        return None
    return Linked(glibc.group(0), tuple(packages))


def missing_packages(packages: tuple[str, ...]) -> list[str]:
    """Which of the Debian packages this host has not installed."""
    out = subprocess.run(["dpkg-query", "-W", "-f", "${Package} ${db:Status-Abbrev}\n", *packages],
                         capture_output=True, text=True).stdout
    installed = {line.split()[0].split(":")[0] for line in out.splitlines() if line.split()[1:2] == ["ii"]}
    return [p for p in packages if p not in installed]


def _this_host() -> str:
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        return "unknown"
    m = re.search(r'^PRETTY_NAME="?([^"\n]*)', text, re.M)
    return m.group(1) if m else "unknown"


def host_can_install(name: str, suite: str, host: Interpreter | None = None, on_suite: bool | None = None,
                     libs: Linked | None = None) -> tuple[bool, str]:
    """Whether this host's python3 can pip install the wheel and import it, and why (not).

    The tags say which interpreter and platform. A platform wheel built here also needs the
    Debian release's shared libraries it was linked against (USE_SYSTEM_LIBS): that release,
    with the packages that `libs` names when it is known.
    """
    host = host or host_python()
    if host is None:
        return False, "this host has no python3 on PATH"
    ok, why = _accepts(host, name)
    if not ok:
        return False, why
    if wheel_tags(name)[2] == "any":
        return True, f"this host's python3 is {host}"
    if not (host_is(suite) if on_suite is None else on_suite):
        return False, f"this host's python3 is {host}, but the host is {_this_host()}, not Debian {suite}"
    missing = missing_packages(libs.packages) if libs else []
    if missing:
        return False, (f"this host lacks Debian packages whose libraries the wheel links: "
                       f"apt-get install {' '.join(missing)}")
    return True, f"this host's python3 is {host}, on Debian {suite}" + (" with those packages" if libs else "")


def _describe(name: str) -> str:
    """What the tags say, in words: "CPython 3.13 on x86-64 Linux"."""
    py, _, plat = wheel_tags(name)
    python = f"CPython {py[2]}.{py[3:]}" if re.fullmatch(r"cp\d\d+", py) else py
    system, _, machine = plat.partition("_")
    machine = {"x86_64": "x86-64", "aarch64": "ARM64"}.get(machine, machine)
    return f"{python} on {machine} {system.capitalize()}" if machine else python


def usage(pin: Pin, wheel: Path, libs: Linked | None = None, runnable: bool = True) -> list[str]:
    """What `build` prints at its end: where the wheel is, what it needs, and how to use it."""
    ok, why = host_can_install(wheel.name, pin.suite, libs=libs)
    tags = "-".join(wheel_tags(wheel.name))
    if libs:
        needs = f"glibc {libs.glibc}; packages: {' '.join(libs.packages)}"
    else:
        needs = "glibc and libraries of buildroot.PACKAGES: OpenBLAS with OpenMP, Sleef, protobuf, gloo, TensorPipe..."
    example = "examples/top_gradient_path.py" if Path.cwd() == REPO else f"{REPO}/examples/top_gradient_path.py"
    lines = [
        f"the wheel: {wheel}",
        f"  for {_describe(wheel.name)} (tags {tags}), linked against Debian {pin.suite}'s shared libraries "
        f"({needs})",
        f"  pip install takes it on a Debian {pin.suite} host with those packages; "
        + ("on any other, use run or shell:" if runnable else "elsewhere, a trixie host or the Dockerfile's image"),
    ]
    if runnable:
        lines += [
            f"  {tool_command('scripts/semiring run')} -- python {example}   # a command on the build, "
            f"in your directory",
            f"  {tool_command('scripts/semiring shell')}   # an interactive shell on the build",
        ]
    if ok:
        lines.append(f"this host can pip install it ({why}), into a venv: "
                     f"python3 -m venv VENV && VENV/bin/pip install {wheel}")
    else:
        lines.append(f"this host cannot pip install it ({why})" + (": use run or shell" if runnable else ""))
    return lines
