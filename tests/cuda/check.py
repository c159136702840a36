#!/usr/bin/env python3
"""The GPU check: the series' CUDA kernels, built into a stock PyTorch and run on a GPU.

On a machine with an NVIDIA GPU, nvcc and a stock PyTorch with CUDA (nothing else, nothing
fetched):

    python3 tests/cuda/check.py [--log FILE]

rebuilds the series' kernel file and headers from patches/ (series_files.py), compiles them
with semiring_check.cu into an extension (extension.py), compares every kernel with its
definition on CPU on the cases of cases.py (float64, float32, half, bfloat16), times each
semiring product against cuBLAS's float32 product (TF32 off) at 4096^3 and at the shapes of
the benchmark's models (throughput.py), and ends with one summary line. Exit status 0 when
every case passed.

Without a GPU, `--compile-only` runs the same compile against the headers of the pinned stock
wheel (stock_torch.py); the project's test tier runs it so that the check cannot rot.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import extension  # noqa: E402


class Log:
    def __init__(self, path: Path | None):
        self.file = path.open("w") if path else None
        self.start = time.monotonic()

    def __call__(self, line: str) -> None:
        line = f"[{time.monotonic() - self.start:6.1f}s] {line}"
        print(line, flush=True)
        if self.file:
            self.file.write(line + "\n")
            self.file.flush()


def build(log: Log, build_dir: Path, torch_include: Path, archs: list[str],
          torch_lib: Path | None) -> Path | None:
    tree, touched = extension.prepare(build_dir)
    for path, names in touched.items():
        log(f"series: {path} from {len(names)} patch(es): {', '.join(n[:4] for n in names)}")
    obj = build_dir / "semiring_check.o"
    log(f"nvcc: compiling semiring_check.cu with the series' kernels for sm_{', sm_'.join(archs)} "
        f"against {torch_include}")
    extension.run(extension.compile_command(build_dir, tree, torch_include, archs, obj), "nvcc")
    log("nvcc: compiled")
    if torch_lib is None:
        return None
    library = build_dir / "semiring_check.so"
    extension.run(extension.link_command(obj, torch_lib, library), "link")
    return library


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compile-only", action="store_true",
                        help="compile against the pinned stock wheel's headers; no GPU needed")
    parser.add_argument("--arch", action="append",
                        help="compute capability to compile for, as 90 (default: the GPU's; "
                             "with --compile-only 90, the GPU machines' H100 and H200)")
    parser.add_argument("--log", type=Path, help="also write the output to this file")
    parser.add_argument("--build-dir", type=Path, help="keep the build here (default: a temporary one)")
    parser.add_argument("--no-throughput", action="store_true", help="correctness only")
    args = parser.parse_args()
    log = Log(args.log)
    with tempfile.TemporaryDirectory() as tmp:
        build_dir = args.build_dir or Path(tmp)
        build_dir.mkdir(parents=True, exist_ok=True)
        try:
            if args.compile_only:
                import stock_torch
                include = stock_torch.include_dir()
                build(log, build_dir, include, args.arch or ["90"], None)
                log(f"semiring CUDA check: compile only, against stock torch {stock_torch.VERSION}'s "
                    f"headers: compiled (nothing run: no GPU)")
                return 0
            return run_on_gpu(log, build_dir, args)
        except Exception as e:  # the summary line says what stopped the check
            log(f"semiring CUDA check: FAILED, stopped by {type(e).__name__}: {e}")
            return 1


def run_on_gpu(log: Log, build_dir: Path, args: argparse.Namespace) -> int:
    import torch
    import torch.utils.cpp_extension as cpp

    if not torch.cuda.is_available():
        log("semiring CUDA check: no GPU visible to torch; run with --compile-only on a machine "
            "without one")
        return 2
    major, minor = torch.cuda.get_device_capability()
    archs = args.arch or [f"{major}{minor}"]
    name = torch.cuda.get_device_name()
    log(f"device: {name} (sm_{major}{minor}), torch {torch.__version__}, CUDA {torch.version.cuda}")
    include = Path(cpp.include_paths()[0])
    library = build(log, build_dir, include, archs, Path(cpp.library_paths()[0]))
    torch.ops.load_library(str(library))
    ops = torch.ops.semiring_check

    import cases
    log("correctness: every kernel against its definition on CPU")
    outcome = cases.run_cases("cuda", ops.mm, ops.times_lifted, ops.norm, ops.log_mm)
    for failure in outcome.failures:
        log(f"FAIL {failure}")
    log(f"correctness: {outcome.passed} passed, {len(outcome.failures)} failed")

    summary = ""
    if not args.no_throughput:
        import throughput
        rows = throughput.measure(ops, log)
        for line in throughput.table(rows):
            log(line)
        summary = "; " + throughput.summary(rows)
    log(f"semiring CUDA check: {outcome.passed} cases passed, {len(outcome.failures)} failed{summary}; "
        f"{name}, torch {torch.__version__}")
    return 1 if outcome.failures else 0


if __name__ == "__main__":
    sys.exit(main())
