"""Compiles the series' CUDA sources with the host's nvcc against the CPU build's headers.

No GPU here and no CUDA build (hours on two cores): each .cu file that the series adds or
changes is compiled alone (`nvcc -c`), with the include paths of the CPU build tree, whose
generated ATen headers are device-independent. What it proves: the sources compile with this
nvcc for the listed architectures; not that they run.
"""
from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from .build import host_cuda_home
from .config import PATCHES
from .progress import Stopwatch, fmt_seconds, say
from .series import read_series
from .stats import numstat

ARCHS = ("sm_80", "sm_90")


def series_cuda_sources(patches: int | None = None) -> list[str]:
    """The .cu files the first `patches` patches add or change (and do not delete)."""
    files: dict[str, bool] = {}
    for name in read_series()[:patches]:
        for f in numstat((PATCHES / name).read_text()):
            if f.path.endswith(".cu"):
                files[f.path] = not f.deleted
    return sorted(p for p, present in files.items() if present)


def compile_sources(tree: Path, sources: list[str], eigen: Path) -> int:
    """nvcc -c of each source; 0 if all compiled. `tree` is the built source tree (host path)."""
    home = host_cuda_home()
    if not sources:
        say("cuda: this prefix of the series has no CUDA sources")
        return 0
    if home is None:
        say(f"cuda: no nvcc (CUDA_HOME, PATH, /usr/local/cuda): {len(sources)} CUDA source(s) of the "
            f"series NOT compiled")
        return 0
    nvcc = str(home / "bin" / "nvcc")
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    version = out.split("release ", 1)[-1].split(",")[0] if "release " in out else "(version unknown)"
    with tempfile.TemporaryDirectory() as tmp:
        # The one header a CUDA configure would generate; a CPU build has none.
        macros = Path(tmp) / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h"
        macros.parent.mkdir(parents=True)
        macros.write_text("#pragma once\n")
        includes = [tmp, tree / "aten" / "src", tree / "build" / "aten" / "src", tree / "build", tree,
                    tree / "torch" / "csrc" / "api" / "include"]
        rc = 0
        for src in sources:
            watch = Stopwatch()
            cmd = [nvcc, "-c", "-std=c++17", "-O2", "--expt-relaxed-constexpr", "--expt-extended-lambda",
                   *(f"-gencode=arch=compute_{a[3:]},code={a}" for a in ARCHS),
                   "-DNDEBUG", "-DUSE_CUDA", "-DTORCH_CUDA_BUILD_MAIN_LIB",
                   *(f"-I{p}" for p in includes), "-isystem", str(eigen),
                   str(tree / src), "-o", str(Path(tmp) / "out.o")]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                rc = 1
                say(f"cuda: nvcc {version} FAILED on {src}:\n{(proc.stdout + proc.stderr)[-3000:]}")
            else:
                say(f"cuda: nvcc {version} compiled {src} for {', '.join(ARCHS)} in "
                    f"{fmt_seconds(watch.elapsed)} (compile only: no GPU here)")
    return rc
