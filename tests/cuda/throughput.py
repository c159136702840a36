"""Each semiring product's speed against cuBLAS's float32 product of the same shape, on one GPU.

One semiring term (a plus and a times) is set against one multiply-add: a ratio of 0.25 means
the kernel computes terms at a quarter of the rate cuBLAS computes multiply-adds (TF32 off,
the plain float32 product). Shapes: 4096^3, and the products of the benchmark's models:
benchmarks/semiring_cost.py's BERT-style encoder (batch 8, sequence 128, hidden 512, 8 heads,
MLP 2048) and a Llama-7B decoder's MLP at 2048 tokens (hidden 4096, MLP 11008).
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Callable

import torch

# (label, batch, n, k, m): (batch, n, k) x (batch, k, m).
SHAPES = [
    ("4096^3", 1, 4096, 4096, 4096),
    ("bert mlp in", 1, 1024, 2048, 512),
    ("bert mlp out", 1, 1024, 512, 2048),
    ("bert scores", 64, 128, 64, 128),
    ("bert values", 64, 128, 128, 64),
    ("llama mlp in", 1, 2048, 11008, 4096),
    ("llama mlp out", 1, 2048, 4096, 11008),
]
# The products, by what their rules run: a message times a message or activation, and a
# message times a weight (max_product's real matrix first, its products with a lifted real).
PRODUCTS = ["max_plus", "max_plus argmax", "max_product", "max_product real first",
            "log", "log term by term"]
HEADLINE = "4096^3"


@dataclass
class Row:
    shape: str
    product: str
    ms: float
    cublas_ms: float

    @property
    def ratio(self) -> float:
        return self.cublas_ms / self.ms


def time_ms(fn: Callable[[], object], budget_s: float = 0.3, at_most: int = 10) -> float:
    """The median of timed calls after one warm-up, stopping once `budget_s` is spent."""
    fn()
    torch.cuda.synchronize()
    times: list[float] = []
    while len(times) < at_most and (len(times) < 2 or sum(times) < budget_s * 1000):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def _operands(batch: int, n: int, k: int, m: int) -> dict[str, torch.Tensor]:
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(batch, n, k, device="cuda", generator=g)
    b = torch.randn(batch, k, m, device="cuda", generator=g)
    return {"a": a, "b": b, "a_lo": a - 0.5, "b_lo": b - 0.5}


def products(ops, o: dict[str, torch.Tensor]) -> dict[str, Callable[[], object]]:
    a, b, a_lo, b_lo = o["a"], o["b"], o["a_lo"], o["b_lo"]
    return {
        "max_plus": lambda: ops.mm("max_plus", a, None, b, None, False, False, False),
        "max_plus argmax": lambda: ops.mm("max_plus", a, None, b, None, False, True, True),
        "max_product": lambda: ops.mm("max_product", a, a_lo, b, b_lo, False, False, True),
        "max_product real first": lambda: ops.mm("max_product", a, None, b, b_lo, True, False, False),
        "log": lambda: ops.log_mm(a, b),
        "log term by term": lambda: ops.mm("log", a, None, b, None, False, False, True),
    }


def measure(ops, log: Callable[[str], None]) -> list[Row]:
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    rows: list[Row] = []
    try:
        for label, batch, n, k, m in SHAPES:
            o = _operands(batch, n, k, m)
            cublas = time_ms(lambda: torch.bmm(o["a"], o["b"]))
            log(f"throughput: {label} ({batch} x {n} x {k} x {m}): cuBLAS float32 {cublas:.3f} ms")
            for product, fn in products(ops, o).items():
                rows.append(Row(label, product, time_ms(fn), cublas))
            del o
            torch.cuda.empty_cache()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    return rows


def table(rows: list[Row]) -> list[str]:
    lines = ["| shape | product | ms | cuBLAS float32 ms | fraction of cuBLAS's rate |",
             "| --- | --- | ---: | ---: | ---: |"]
    lines += [f"| {r.shape} | {r.product} | {r.ms:.3f} | {r.cublas_ms:.3f} | {r.ratio:.3f} |" for r in rows]
    return lines


def summary(rows: list[Row]) -> str:
    at = {r.product: r.ratio for r in rows if r.shape == HEADLINE}
    return f"{HEADLINE} against cuBLAS float32: " + ", ".join(f"{p} {at[p]:.2f}x" for p in PRODUCTS if p in at)
