"""Build the patched (or unpatched) wheel incrementally inside the build root.

Each variant has a build tree (a git checkout, kept between runs so ninja only rebuilds what
changed) and a venv; all variants share one ccache.
"""
from __future__ import annotations

import hashlib
import os
import signal
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from .base import git
from .buildroot import BASE_ENV, BuildRoot, ensure_root, pip_access, root_for
from .config import REPO, Pin, state_dir
from .ninja_estimate import Estimate, read_log
from .progress import Stopwatch, ToolError, fmt_seconds, progress_line, say
from . import doctor, series

# A minimal CPU configuration (no oneDNN, XNNPACK, FBGEMM, Kineto), with distributed
# support as Debian's package builds it (c10d with gloo and TensorPipe from Debian's
# libraries): Hugging Face transformers imports torch.distributed.tensor, and v2.6.0 cannot
# import torch with USE_DISTRIBUTED=1 but USE_TENSORPIPE=0 (pytorch/pytorch#97397).
CPU_CONFIG = {
    "USE_SYSTEM_LIBS": "ON", "USE_CUDA": "0", "USE_DISTRIBUTED": "1", "USE_MKLDNN": "0",
    "USE_XNNPACK": "0", "USE_PYTORCH_QNNPACK": "0", "USE_NNPACK": "0", "USE_FBGEMM": "0",
    "USE_KINETO": "0", "USE_VULKAN": "0", "USE_MPI": "0", "BUILD_TEST": "0", "USE_ITT": "0",
    "USE_GLOO": "1", "USE_TENSORPIPE": "1", "USE_NUMA": "0", "USE_FLASH_ATTENTION": "0",
    "USE_MEM_EFF_ATTENTION": "0", "BLAS": "OpenBLAS", "USE_GFLAGS": "OFF", "USE_GLOG": "OFF",
    "BUILD_CUSTOM_PROTOBUF": "OFF", "ONNX_NAMESPACE": "onnx",
    "CFLAGS": "-Wno-dangling-reference -fuse-ld=mold",
    "CXXFLAGS": "-Wno-dangling-reference -fuse-ld=mold",
}
# For users with a CUDA 12.x toolkit (not runnable here: no GPU, and CUDA 13 is unverified
# for the whole of v2.6.0). Selected with `build --cuda`.
CUDA_CONFIG = {**CPU_CONFIG, "USE_CUDA": "1", "USE_CUDNN": "0", "USE_FLASH_ATTENTION": "0",
               "TORCH_CUDA_ARCH_LIST": os.environ.get("TORCH_CUDA_ARCH_LIST", "8.0;9.0"),
               "CMAKE_CUDA_COMPILER_LAUNCHER": "ccache"}


@dataclass(frozen=True)
class Variant:
    name: str          # "semiring" or "unpatched" (+ "-cuda")
    patches: int       # how many series patches the build tree carries
    local_version: str  # the wheel's local version label

    @property
    def build_command(self) -> str:
        flags = (" --unpatched" if self.name.startswith("unpatched") else "") + \
            (" --cuda" if self.name.endswith("-cuda") else "") + \
            (f" --prefix {self.patches}" if ".p" in self.local_version else "")
        return f"scripts/semiring build{flags}"

    def area(self, br: BuildRoot) -> str:
        return f"{br.build_area}/{self.name}"


def variant(pin: Pin, unpatched: bool, cuda: bool, prefix: int | None = None) -> Variant:
    """What to build. A prefix of the series (its first `prefix` patches, as upstream would
    land them one PR at a time) builds in the patched tree, incrementally, under its own label."""
    suffix = "-cuda" if cuda else ""
    if unpatched:
        return Variant("unpatched" + suffix, series.build_layer_count(), "unpatched")
    n = len(series.read_series())
    label = f"semiring.{pin.series_version}"
    if prefix is None or prefix == n:
        return Variant("semiring" + suffix, n, label)
    if not series.build_layer_count() <= prefix < n:
        raise ToolError(f"--prefix takes {series.build_layer_count()} to {n} (the build-layer patches "
                        f"are always applied), got {prefix}")
    return Variant("semiring" + suffix, prefix, f"{label}.p{prefix}")


# The CUDA toolkit is the host's (the build root has none): it appears inside at CUDA_INSIDE.
CUDA_INSIDE = "/usr/local/cuda"


def host_cuda_home() -> Path | None:
    """The host's CUDA toolkit: $CUDA_HOME, else the one whose nvcc is on PATH, else
    /usr/local/cuda; None when none of them has bin/nvcc."""
    on_path = shutil.which("nvcc")
    for home in (os.environ.get("CUDA_HOME"), on_path and str(Path(on_path).parent.parent), CUDA_INSIDE):
        if home and (Path(home) / "bin" / "nvcc").exists():
            return Path(home)
    return None


def cuda_binds() -> dict[Path, str]:
    host = host_cuda_home()
    if host is None:
        raise ToolError("build --cuda needs a CUDA 12.x toolkit: no nvcc in $CUDA_HOME/bin, on PATH "
                        f"or in {CUDA_INSIDE}/bin (set CUDA_HOME to the toolkit's directory)")
    return {host: CUDA_INSIDE}


def build_env(br: BuildRoot, cuda: bool) -> dict[str, str]:
    cfg = CUDA_CONFIG if cuda else CPU_CONFIG
    return {
        **cfg,
        "MAX_JOBS": os.environ.get("MAX_JOBS", str(os.cpu_count() or 2)),
        "CMAKE_C_COMPILER_LAUNCHER": "ccache", "CMAKE_CXX_COMPILER_LAUNCHER": "ccache",
        "CCACHE_DIR": f"{br.build_area}/ccache", "CCACHE_BASEDIR": br.build_area,
        "CCACHE_NOHASHDIR": "true", "CCACHE_MAXSIZE": "10G",
        "PATH": BASE_ENV["PATH"] + (f":{CUDA_INSIDE}/bin" if cuda else ""),
        **({"CUDA_HOME": CUDA_INSIDE} if cuda else {}),
    }


def sync_tree(pin: Pin, br: BuildRoot, v: Variant) -> str:
    """Point the variant's build tree at base + its patches, touching only changed files."""
    work = state_dir() / "work" / f"build-{v.name}"
    # A private work tree per variant: the user's work tree stays theirs.
    series.apply(pin, work, upto=v.patches, force=True)
    tree = br.path(f"{v.area(br)}/pytorch")
    if not (tree / ".git").exists():
        tree.parent.mkdir(parents=True, exist_ok=True)
        git(work, "clone", "-q", "--no-checkout", str(work), str(tree))
    git(tree, "fetch", "-q", "--force", str(work), f"+{series.BRANCH}:refs/remotes/work/target")
    # Without --force: the flatc-regenerated header below stays as it is (so ninja does not
    # rebuild its users on every sync); any other local change makes the checkout fail loudly.
    git(tree, "checkout", "-q", "-B", "build", "refs/remotes/work/target")
    head = git(tree, "rev-parse", "--short", "HEAD", capture=True).stdout.strip()
    # Debian regenerates the flatbuffers header for the installed flatc (debian/rules); do the
    # same, but only rewrite it when it changes so that ninja does not rebuild its users.
    ser = f"{v.area(br)}/pytorch/torch/csrc/jit/serialization"
    br.run(["sh", "-c", "mkdir -p /tmp/flatc && flatc --cpp --gen-mutable --scoped-enums -o /tmp/flatc "
            "mobile_bytecode.fbs && (cmp -s /tmp/flatc/mobile_bytecode_generated.h "
            "mobile_bytecode_generated.h || cp /tmp/flatc/mobile_bytecode_generated.h .)"], cwd=ser)
    return head


def _follow(proc, log_path: Path, label: str, watch: Stopwatch) -> int:
    """Wait for the build, printing ninja's [n/N] with elapsed time and an estimate."""
    # ninja's records of earlier builds, read before this one adds to its own: this build
    # tree's (<area>/pytorch/build) and the newest other variant's (the same sources).
    own = log_path.parent / "pytorch" / "build" / ".ninja_log"
    others = [p for p in log_path.parent.parent.glob("*/pytorch/build/.ninja_log") if p != own]
    other = max(others, key=lambda p: p.stat().st_mtime, default=None)
    jobs = int(os.environ.get("MAX_JOBS", os.cpu_count() or 2))  # as build_env passes it to ninja
    estimate = Estimate(read_log(own), read_log(other), jobs)
    last_print, pos = 0.0, 0
    while True:
        rc = proc.poll()
        with open(log_path, "rb") as f:
            f.seek(pos)
            chunk = f.read()
        complete = chunk[:chunk.rfind(b"\n") + 1]  # a line still being written waits for the next round
        pos += len(complete)
        for line in complete.decode(errors="replace").splitlines():
            news = estimate.feed(line, watch.elapsed)
            if news:
                say(f"{label}: {news}")
        now = time.monotonic()
        if estimate.done and (now - last_print > 30 or rc is not None):
            last_print = now
            progress_line(label, estimate.done, estimate.total, watch.elapsed,
                          estimate.remaining(watch.elapsed), estimate.basis)
        if rc is not None:
            return rc
        time.sleep(2)


def run_with_progress(br: BuildRoot, argv: list[str], cwd: str, env: dict[str, str],
                      log_path: Path, label: str,
                      binds: dict[Path, str] | None = None) -> tuple[int, float]:
    """Runs a ninja-driven build, logging to log_path and printing its progress.

    Interrupting it (Ctrl-C) stops the whole process group and leaves the build
    directory as ninja left it, so running the same build again resumes it.
    """
    watch = Stopwatch()
    with open(log_path, "w") as log:
        proc = br.popen(argv, cwd=cwd, env=env, log=log, binds=binds)
        try:
            rc = _follow(proc, log_path, label, watch)
        except KeyboardInterrupt:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait()
            raise ToolError(f"{label} interrupted; run the same command again to resume where it stopped")
    return rc, watch.elapsed


def build(pin: Pin, unpatched: bool = False, cuda: bool = False, prefix: int | None = None) -> Path:
    doctor.require(pin)
    br = ensure_root(pin)
    v = variant(pin, unpatched, cuda, prefix)
    # What the tree is synced from: the patches may change while it builds.
    stamp = build_stamp(pin, v)
    head = sync_tree(pin, br, v)
    area = v.area(br)
    env = {**build_env(br, cuda), "TORCH_SEMIRING_LOCAL_VERSION": v.local_version}
    log_path = br.path(f"{area}/build.log")
    say(f"building {v.name} (tree at {head}, {v.patches} series patches) in {br.path(area)}; "
        f"log: {log_path}")
    reconfigure_if_stale(br, br.path(f"{area}/pytorch/build/build.ninja"))
    dist_inside = f"{area}/dist"
    shutil.rmtree(br.path(dist_inside), ignore_errors=True)
    rc, elapsed = run_with_progress(br, ["python3", "setup.py", "bdist_wheel", "-d", dist_inside],
                                    f"{area}/pytorch", env, log_path, f"build {v.name}",
                                    binds=cuda_binds() if cuda else None)
    if rc != 0:
        tail = log_path.read_text(errors="replace").splitlines()[-40:]
        raise ToolError(f"build of {v.name} failed (exit {rc}); last lines of {log_path}:\n" + "\n".join(tail))
    wheels = sorted(br.path(dist_inside).glob("torch-*.whl"))
    if not wheels:
        raise ToolError(f"the build finished but wrote no wheel into {br.path(dist_inside)}")
    wheel = wheels[-1]
    say(f"built {wheel.name} in {fmt_seconds(elapsed)}")
    out = REPO / "dist"
    out.mkdir(exist_ok=True)
    for old in out.glob(f"torch-*+{v.local_version}-*.whl"):
        old.unlink()
    shutil.copyfile(wheel, out / wheel.name)
    install(br, v, f"{dist_inside}/{wheel.name}", pin.runtime_requirements)
    stamp_path(br, v).write_text(f"{stamp} {head}\n")
    if not v.name.startswith("unpatched"):
        from .wheel import linked, usage
        # run and shell use the CPU build: a CUDA build's wheel is for pip install only.
        for line in usage(pin, out / wheel.name, linked(br, f"{area}/venv"), runnable=not cuda):
            say(line)
    return out / wheel.name


def cmake_inputs(build_ninja: Path) -> list[str]:
    """The files whose change makes ninja re-run cmake: the inputs of build.ninja's own rule and,
    for those that are generated, their inputs (paths as the root sees them)."""
    text = build_ninja.read_text(errors="replace").replace("$\n", "")
    rules: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line.startswith("build ") and ":" in line:
            outs, rest = line[len("build "):].split(":", 1)
            deps = rest.replace("||", "|").replace("|", " ").split()[1:]  # the rule's name first
            for out in outs.split():
                rules[out] = deps
    seen, todo = [], list(rules.get("build.ninja", []))
    while todo:
        f = todo.pop()
        if f not in seen:
            seen.append(f)
            todo.extend(rules.get(f, []))
    return [f for f in seen if f not in rules and f.startswith("/")]


# setup.py copies these source directories into torchgen/packaged before cmake runs, so a copy
# that is still there may be gone by the time ninja looks: the source decides.
PACKAGED_COPIES = {"/torchgen/packaged/autograd/": "/tools/autograd/",
                   "/torchgen/packaged/ATen/": "/aten/src/ATen/"}


def copied_from(path: str) -> str:
    for copy, source in PACKAGED_COPIES.items():
        if copy in path:
            return path.replace(copy, source, 1)
    return path


def reconfigure_if_stale(br: BuildRoot, build_ninja: Path) -> None:
    """Makes setup.py run cmake again when a file cmake read is gone.

    cmake records what its globs found; when a change of the series (a shorter prefix, say)
    removes such a file, ninja stops with "missing and no known rule to make it" instead of
    re-running cmake. Without build.ninja, setup.py configures again (keeping CMakeCache.txt).
    """
    if not build_ninja.exists():
        return
    gone = [f for f in cmake_inputs(build_ninja) if not br.path(copied_from(f)).exists()]
    if gone:
        first = br.path(copied_from(gone[0]))
        say(f"cmake read {len(gone)} file(s) that are gone ({first}{', ...' if len(gone) > 1 else ''}): "
            f"configuring again")
        build_ninja.unlink()


def venv_python(br: BuildRoot, v: Variant) -> str:
    return f"{v.area(br)}/venv/bin/python"


# Beside the venv: the demo's model packages (examples/paper/requirements.txt), installed with
# --no-deps off the venv, whose `pip check` their unused declared dependencies would fail.
DEMO_PACKAGES = "demo-packages"


def demo_packages(venv: str) -> str:
    """The demo's model packages directory (inside the root) of the venv at `venv`."""
    return f"{venv.rsplit('/', 1)[0]}/{DEMO_PACKAGES}"


def install(br: BuildRoot, v: Variant, wheel_inside: str, requirements: tuple[str, ...]) -> None:
    """Installs the wheel and exactly the pinned runtime requirements, then checks them.

    The venv sees the root's Debian packages (numpy, pytest, expecttest) but none of torch's
    Requires-Dist: they come from PyPI at the versions upstream.toml pins, and `pip check`
    fails the build if the wheel declares something the pins do not satisfy.
    """
    venv = f"{v.area(br)}/venv"
    if not br.path(f"{venv}/bin/python").exists():
        br.run(["python3", "-m", "venv", "--system-site-packages", venv])
    say(f"installing {len(requirements)} pinned runtime requirements into {br.path(venv)}: "
        f"{' '.join(requirements)}")
    pip_install_pinned(br, venv, list(requirements))
    say(f"installing {Path(wheel_inside).name} into {br.path(venv)}")
    br.run([f"{venv}/bin/pip", "install", "-q", "--no-deps", "--force-reinstall", "--no-index",
            wheel_inside], env=pip_access(br)[0])
    pip_check(br, venv, "the wheel's declared requirements are not met by upstream.toml's [runtime] pins")
    out = br.run([f"{venv}/bin/python", "-c", "import torch; print(torch.__version__)"],
                 cwd="/tmp", capture=True)
    say(f"import torch in {br.path(venv)}: torch.__version__ = {out.stdout.strip()}")


def pip_install_pinned(br: BuildRoot, venv: str, args: list[str], binds: dict[Path, str] | None = None) -> None:
    """pip install of pinned requirements (no resolver: the pins list every dependency)."""
    env, pip_binds = pip_access(br)
    br.run([f"{venv}/bin/pip", "install", "-q", "--no-deps", "--only-binary=:all:", *args],
           env=env, binds={**(binds or {}), **pip_binds})


def pip_check(br: BuildRoot, venv: str, what: str) -> None:
    """Fails, saying `what`, when an installed distribution's requirements are not met."""
    check = br.run([f"{venv}/bin/pip", "check"], env=pip_access(br)[0], capture=True, check=False)
    if check.returncode != 0:
        raise ToolError(f"{what}; add or update the pins:\n{check.stdout}")


def build_stamp(pin: Pin, v: Variant) -> str:
    """Identifies what a build is of: the pin, the variant's patches, configuration and pins."""
    h = hashlib.sha256()
    h.update(f"{pin.key} {v.name} {v.local_version}\n".encode())
    for name in series.read_series()[:v.patches]:
        h.update((REPO / "patches" / name).read_bytes())
    h.update(repr(sorted((CUDA_CONFIG if v.name.endswith("-cuda") else CPU_CONFIG).items())).encode())
    h.update(repr(pin.runtime_requirements).encode())
    return h.hexdigest()[:16]


def stamp_path(br: BuildRoot, v: Variant) -> Path:
    return br.path(v.area(br)) / "built-from"


def build_state(pin: Pin, unpatched: bool = False, prefix: int | None = None) -> tuple[bool, str]:
    """Whether the installed build is of the current series, and a line saying why (not)."""
    v = variant(pin, unpatched, cuda=False, prefix=prefix)
    br = root_for(pin)
    root_made = br.root is None or (br.root / ".torch-semiring-root").exists()
    if not root_made or not stamp_path(br, v).exists():
        return False, f"no build of {v.local_version} (run '{v.build_command}')"
    built = stamp_path(br, v).read_text().split()[0]
    if built != build_stamp(pin, v):
        return False, (f"the build in {v.name} is not of {v.local_version} (stamp {built}, "
                       f"current {build_stamp(pin, v)}); run '{v.build_command}'")
    return True, f"the build in {v.name} is of {v.local_version} (stamp {built})"
