"""Builds the GPU check's extension: semiring_check.cu around the series' CUDA kernels.

One compile command for both machines: on a GPU machine against the installed PyTorch, and
here, without a GPU (compile only), against the headers of the pinned stock wheel that
tests/cuda/stock_torch.py unpacks. The flags are those torch.utils.cpp_extension gives a CUDA
extension, written out so that the compile needs no importable torch.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from series_files import function_source, materialize

HERE = Path(__file__).resolve().parent
# The files the series creates that the extension compiles (the kernel file and what it
# includes of the series), and the one it copies log's BLAS product out of.
SERIES_FILES = [
    "aten/src/ATen/native/Semiring.h",
    "aten/src/ATen/native/SemiringArithmetic.h",
    "aten/src/ATen/native/cuda/SemiringKernel.cu",
    "aten/src/ATen/native/Semiring.cpp",
]
NVCC_FLAGS = [
    "-std=c++17", "-O3", "--expt-relaxed-constexpr", "--expt-extended-lambda",
    "-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__",
    "-DTORCH_API_INCLUDE_EXTENSION_H", "-D_GLIBCXX_USE_CXX11_ABI=1",
    "--compiler-options", "-fPIC", "-DNDEBUG",
]


def cuda_home() -> Path | None:
    for candidate in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")):
        if candidate and (Path(candidate) / "bin" / "nvcc").exists():
            return Path(candidate)
    nvcc = shutil.which("nvcc")
    if nvcc:
        return Path(nvcc).resolve().parent.parent
    default = Path("/usr/local/cuda")
    return default if (default / "bin" / "nvcc").exists() else None


def prepare(build: Path) -> tuple[Path, dict[str, list[str]]]:
    """The series' files under build/series, and log_mm_blas copied out of Semiring.cpp."""
    tree = build / "series"
    if tree.exists():
        shutil.rmtree(tree)
    touched = materialize(SERIES_FILES, tree)
    cpp = (tree / "aten/src/ATen/native/Semiring.cpp").read_text()
    (build / "log_mm_blas.inc").write_text(function_source(cpp, "Tensor log_mm_blas("))
    return tree, touched


def compile_command(build: Path, tree: Path, torch_include: Path, archs: list[str],
                    obj: Path) -> list[str]:
    home = cuda_home()
    if home is None:
        raise RuntimeError("no nvcc: set CUDA_HOME or put nvcc on PATH")
    gencode = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in archs]
    return [str(home / "bin" / "nvcc"), "-c", *NVCC_FLAGS, *gencode,
            f"-I{tree / 'aten/src'}", f"-I{torch_include}",
            f"-I{torch_include / 'torch/csrc/api/include'}",
            f'-DLOG_MM_BLAS_SOURCE="{build / "log_mm_blas.inc"}"',
            str(HERE / "semiring_check.cu"), "-o", str(obj)]


def link_command(obj: Path, torch_lib: Path, out: Path) -> list[str]:
    home = cuda_home()
    assert home is not None
    cuda_lib = next((p for p in (home / "lib64", home / "lib", home / "targets/x86_64-linux/lib")
                     if p.exists()), home / "lib64")
    return [os.environ.get("CXX", "c++"), "-shared", str(obj), f"-L{torch_lib}", f"-Wl,-rpath,{torch_lib}",
            "-lc10", "-lc10_cuda", "-ltorch_cpu", "-ltorch_cuda", "-ltorch",
            f"-L{cuda_lib}", "-lcudart", "-o", str(out)]


def run(cmd: list[str], what: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write((proc.stdout + proc.stderr)[-6000:])
        raise RuntimeError(f"{what} failed (exit {proc.returncode}): {' '.join(cmd)}")
