"""A Debian trixie build root (debootstrap + chroot), or the host itself when it is trixie."""
from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .config import REPO, Pin, state_dir
from .progress import ToolError, say, run

PACKAGES = """
build-essential cmake ninja-build ccache git patch python3-dev python3-venv python3-yaml python3-numpy
python3-setuptools python3-typing-extensions python3-pip python3-wheel python3-expecttest
python3-pytest python3-hypothesis libcpuinfo-dev libfmt-dev libfp16-dev libfxdiv-dev libpsimd-dev
libpthreadpool-dev libsleef-dev pybind11-dev python3-pybind11 libopenblas-openmp-dev liblapack-dev
nlohmann-json3-dev libnuma-dev libzstd-dev libonnx-dev libprotobuf-dev protobuf-compiler
libeigen3-dev libflatbuffers-dev flatbuffers-compiler-dev libcpp-httplib-dev mold valgrind
libgloo-dev libtensorpipe-dev
""".split()

# OpenBLAS's pthread build keeps a thread pool of its own next to ATen's OpenMP pool; on a few
# cores each spins while the other works, and a small log-space semiring mm (a BLAS product
# between ATen ops) slows down by two orders of magnitude. OpenBLAS's OpenMP build shares ATen's
# pool, at the same large-sgemm speed. Debian ranks the pthread build first, so the root selects
# the OpenMP one for every BLAS/LAPACK alternative.
SELECT_OPENMP_BLAS = (
    'arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH) && '
    'for name in libopenblas.so.0 libblas.so.3 liblapack.so.3; do '
    'path=$(update-alternatives --list $name-$arch | grep /openblas-openmp/) && '
    'update-alternatives --quiet --set $name-$arch $path || exit 1; done'
)


def host_is(suite: str) -> bool:
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        return False
    return f"VERSION_CODENAME={suite}" in text


# Every command in the root starts from this environment and nothing of the caller's
# (CI=true, say), so that builds and tests do not depend on who runs them.
BASE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/root", "LC_ALL": "C.UTF-8"}


@dataclass(frozen=True)
class BuildRoot:
    """Runs commands in the build environment; `path` maps a path inside it to the host."""
    root: Path | None  # None: the host is the build environment

    @property
    def build_area(self) -> str:
        """Where build trees, venvs and ccache live, as seen from inside."""
        return "/build" if self.root else str(state_dir() / "build")

    def path(self, inside: str) -> Path:
        return self.root / inside.lstrip("/") if self.root else Path(inside)

    def expose(self, host: Path, inside: str) -> str:
        """Where a host directory appears inside (bind-mounted there by `command(binds=...)`)."""
        return inside if self.root else str(host)

    def command(self, argv: list[str], cwd: str = "/", env: dict[str, str] | None = None,
                binds: dict[Path, str] | None = None) -> list[str]:
        envs = [f"{k}={v}" for k, v in {**BASE_ENV, **(env or {})}.items()]
        script = f"cd {shlex.quote(cwd)} && exec env -i {' '.join(map(shlex.quote, envs))} " + \
            " ".join(map(shlex.quote, argv))
        if self.root is None:
            return ["sh", "-c", script]
        r = str(self.root)
        mounts = [(f"/{d}", f"{r}/{d}") for d in ("proc", "dev", "sys")]
        mounts += [(str(host), f"{r}/{inside.lstrip('/')}") for host, inside in (binds or {}).items()]
        # A private mount namespace: the bind mounts vanish with the process, even when killed.
        setup = " && ".join(f"mkdir -p {shlex.quote(dst)} && mount --bind {shlex.quote(src)} {shlex.quote(dst)}"
                            for src, dst in mounts)
        inner = f"{setup} && exec chroot {shlex.quote(r)} sh -c {shlex.quote(script)}"
        return ["unshare", "--mount", "--fork", "sh", "-c", inner]

    def run(self, argv: list[str], cwd: str = "/", env: dict[str, str] | None = None,
            binds: dict[Path, str] | None = None, **kw) -> subprocess.CompletedProcess:
        return run(self.command(argv, cwd, env, binds), **kw)

    def popen(self, argv: list[str], cwd: str, env: dict[str, str], log,
              binds: dict[Path, str] | None = None) -> subprocess.Popen:
        return subprocess.Popen(self.command(argv, cwd, env, binds), stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)


# The repository appears inside the root at its own path, so that the paths of its files that a
# command prints there (figures, logs, tracebacks) are the host's.
REPO_BIND: dict[Path, str] = {REPO: str(REPO)}

# Where the host's CA certificates appear inside the root while pip runs there.
HOST_CERTS_INSIDE = "/run/torch-semiring-host-certs"


def pip_access(br: BuildRoot) -> tuple[dict[str, str], dict[Path, str]]:
    """Environment and bind mounts for pip in the root to reach PyPI as the host does.

    The root trusts Debian's CA certificates only; a host behind a TLS-inspecting proxy
    trusts the proxy's CA too (in its bundle), so pip in the root uses the host's bundle.
    """
    env = {"PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    bundle = Path(os.environ.get("PIP_CERT") or os.environ.get("SSL_CERT_FILE")
                  or "/etc/ssl/certs/ca-certificates.crt")
    if not bundle.is_file():
        return env, {}
    if br.root is None:
        return {**env, "PIP_CERT": str(bundle)}, {}
    return {**env, "PIP_CERT": f"{HOST_CERTS_INSIDE}/{bundle.name}"}, {bundle.parent: HOST_CERTS_INSIDE}


def _packages_key() -> str:
    return hashlib.sha256((" ".join(sorted(PACKAGES)) + SELECT_OPENMP_BLAS).encode()).hexdigest()[:16]


def root_for(pin: Pin) -> BuildRoot:
    """The build root that ensure_root makes or reuses, without making it (it may not exist)."""
    if host_is(pin.suite) and not os.environ.get("TORCH_SEMIRING_FORCE_CHROOT"):
        return BuildRoot(None)
    return BuildRoot(state_dir() / f"root-{pin.suite}")


def ensure_root(pin: Pin) -> BuildRoot:
    """Create (or reuse) the build root for the pinned Debian suite."""
    if root_for(pin).root is None:
        missing = [p for p in ("cmake", "ninja", "ccache", "flatc") if shutil.which(p) is None]
        if missing:
            raise ToolError(f"the host is Debian {pin.suite} but lacks {missing}; install: "
                            f"apt-get install {' '.join(PACKAGES)}")
        return BuildRoot(None)
    root = root_for(pin).root
    stamp = root / ".torch-semiring-root"
    if stamp.exists() and stamp.read_text().strip() == _packages_key():
        return BuildRoot(root)
    if os.geteuid() != 0:
        raise ToolError(f"the host is not Debian {pin.suite}, so the build needs a {pin.suite} root made "
                        f"with debootstrap and entered with chroot, which needs root. Run this command "
                        f"as root (or on a {pin.suite} host / in the Dockerfile).")
    for tool in ("debootstrap", "unshare", "chroot"):
        if shutil.which(tool) is None:
            raise ToolError(f"'{tool}' is missing; install it (apt-get install debootstrap util-linux)")
    if not (root / "etc" / "debian_version").exists():
        partial = root.with_name(root.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        say(f"debootstrap {pin.suite} into {root} (about a minute)")
        run(["debootstrap", "--variant=minbase", "--include=ca-certificates", pin.suite,
             str(partial), pin.mirror])
        partial.rename(root)
    br = BuildRoot(root)
    say(f"installing {len(PACKAGES)} build packages into the root (about a minute)")
    br.run(["sh", "-c", "apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
            "--no-install-recommends " + " ".join(PACKAGES)])
    br.run(["sh", "-c", SELECT_OPENMP_BLAS])
    stamp.write_text(_packages_key() + "\n")
    return br
