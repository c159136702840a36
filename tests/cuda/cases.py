"""The GPU check's cases and their definitions, computed on CPU.

Each kernel of ATen/native/cuda/SemiringKernel.cu is compared with the definition of what it
computes (the same definitions as test/autograd/test_semiring.py's kernel tests: every term,
then plus), on the cases those tests use: empty and 1 x n shapes, sizes across tiles,
broadcast batches, non-contiguous and transposed operands, -inf/+inf/NaN, ties, zero weights
(no edge) and the argmax. tests/feature/test_cuda_check_cases.py holds these definitions to
the patched build's CPU kernels on the same cases, so that the CUDA kernels answer to the CPU
ones.

The definitions run in the kernels' accumulation type (float for float32, half and bfloat16;
double for float64), so max_plus and max_product, whose terms round once, compare exactly,
argmax included; log and the steps with a logarithm within the stated tolerances.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Iterator, Optional

import torch
from torch import Tensor

INF = math.inf
MM_KINDS = ("max_plus", "max_product", "log")
STEP_KINDS = ("max_plus", "log", "max_product", "entropy")
NORM_KINDS = ("real", "abs", "counting", "boolean", "log", "max_plus", "max_product", "entropy")
DTYPES = (torch.float64, torch.float32, torch.float16, torch.bfloat16)
# Relative and absolute tolerances for results that pass through exp or log, by dtype: a few
# ulps of float32 and float64 (CUDA's exp and log against the CPU's), the rounding of the
# result for half and bfloat16 (accumulated in float).
LOG_TOL = {torch.float64: 1e-12, torch.float32: 2e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def accumulation(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


@dataclass
class MMCase:
    """Planes (batch, n, k) and (batch, k, m) of one _semiring_mm kernel call."""
    label: str
    kind: str
    a_hi: Tensor
    b_hi: Tensor
    a_lo: Optional[Tensor] = None
    b_lo: Optional[Tensor] = None
    scaled_a: bool = False  # a is a real matrix standing for its lift (0: no edge)

    @property
    def dtype(self) -> torch.dtype:
        return self.a_hi.dtype


def _lift_real(w: Tensor) -> tuple[Tensor, Tensor]:
    """max_product's lift of real w as planes: (w, w), the empty pair (-inf, +inf) at 0."""
    zero = w == 0
    return w.masked_fill(zero, -INF), w.masked_fill(zero, INF)


def mm_reference(c: MMCase) -> tuple[Tensor, Optional[Tensor], Tensor]:
    """(out_hi, out_lo or None, argmax) by definition: every term, then plus over k; argmax
    the smallest k of the largest term (the first NaN), -1 where no term is a path."""
    acc = accumulation(c.dtype)
    a_hi, b_hi = c.a_hi.cpu().to(acc), c.b_hi.cpu().to(acc)
    batch, n, k = a_hi.shape
    m = b_hi.shape[-1]
    if c.kind == "max_product":
        if c.scaled_a:
            a_hi, a_lo = _lift_real(a_hi)
        else:
            a_lo = c.a_lo.cpu().to(acc)
        b_lo = c.b_lo.cpu().to(acc)
        ahi, alo = a_hi[:, :, :, None], a_lo[:, :, :, None]
        bhi, blo = b_hi[:, None], b_lo[:, None]
        corners = torch.stack(torch.broadcast_tensors(ahi * bhi, ahi * blo, alo * bhi, alo * blo), -1)
        empty = ((ahi == -INF) & (alo == INF)) | ((bhi == -INF) & (blo == INF))
        terms = torch.where(empty, -INF, corners.amax(-1))
        lows = torch.where(empty, INF, corners.amin(-1))
        out_lo = lows.amin(-2) if k else torch.full((batch, n, m), INF, dtype=acc)
    else:
        terms = a_hi[:, :, :, None] + b_hi[:, None]
        out_lo = None
    if k == 0:
        out = torch.full((batch, n, m), -INF, dtype=acc)
        return out, out_lo, torch.full((batch, n, m), -1, dtype=torch.long)
    out = torch.logsumexp(terms, -2) if c.kind == "log" else terms.amax(-2)
    best = terms.amax(-2, keepdim=True)
    wins = (terms == best) | (terms.isnan() & best.isnan())
    index = torch.arange(k).reshape(1, 1, k, 1)
    first = torch.where(wins, index, k).amin(-2)
    argmax = torch.where(best.squeeze(-2) == -INF, -1, first)
    return out, out_lo, argmax


def _randn(g: torch.Generator, *shape: int) -> Tensor:
    return torch.randn(*shape, generator=g, dtype=torch.float64)


def _mm_operands(kind: str, n: int, k: int, m: int, batch: int, g: torch.Generator
                 ) -> dict[str, Tensor]:
    if kind == "max_product":
        hi = _randn(g, batch, n, k)
        lo = hi - torch.rand(batch, n, k, generator=g, dtype=torch.float64)
        hi[:, ::3], lo[:, ::3] = -INF, INF  # empty pairs: rows no path reaches
        w = _randn(g, batch, k, m)
        b_hi, b_lo = _lift_real(w * (w.abs() > 0.4))
        return {"a_hi": hi, "a_lo": lo, "b_hi": b_hi, "b_lo": b_lo}
    a = _randn(g, batch, n, k)
    a[:, ::4, ::5] = -INF
    return {"a_hi": a, "b_hi": _randn(g, batch, k, m)}


def _cast(planes: dict[str, Tensor], dtype: torch.dtype, device: str) -> dict[str, Tensor]:
    return {name: t.to(device, dtype) for name, t in planes.items()}


def mm_cases(device: str, dtypes: tuple[torch.dtype, ...] = DTYPES) -> Iterator[MMCase]:
    g = torch.Generator().manual_seed(0)
    shapes = [(0, 3, 2), (2, 0, 3), (3, 2, 0), (1, 7, 1), (1, 5, 9), (6, 1, 4), (9, 131, 261),
              (64, 64, 64), (65, 17, 127), (130, 70, 129), (128, 256, 128)]
    for kind in MM_KINDS:
        for dtype in dtypes:
            for n, k, m in shapes:
                ops = _cast(_mm_operands(kind, n, k, m, 1, g), dtype, device)
                yield MMCase(f"{n}x{k}x{m}", kind, **ops)
            # A batch, b broadcast over it (an expanded view: stride 0).
            ops = _cast(_mm_operands(kind, 5, 6, 7, 3, g), dtype, device)
            for name in ("b_hi", "b_lo"):
                if name in ops:
                    ops[name] = ops[name][:1].expand(3, -1, -1)
            yield MMCase("batch of 3, b broadcast", kind, **ops)
            # Non-contiguous (every other row, every third column) and transposed.
            ops = _cast(_mm_operands(kind, 24, 8, 30, 1, g), dtype, device)
            strided = {n: (t[:, ::2] if n.startswith("a") else t[:, :, ::3]) for n, t in ops.items()}
            yield MMCase("non-contiguous", kind, **strided)
            transposed = {n: t.mT.contiguous().mT for n, t in ops.items()}
            yield MMCase("transposed", kind, **transposed)
        yield from _special_mm_cases(kind, device)
    # max_product's product with a real matrix (what its rules' products run): a real w with
    # zeros (no edge) and both signs, times a pair message with empty pairs.
    for dtype in dtypes:
        for n, k, m in [(13, 300, 70), (1, 9, 5), (70, 13, 300)]:
            w = _randn(g, 1, n, k)
            w[:, :, ::7] = 0.0
            hi = _randn(g, 1, k, m)
            lo = hi - torch.rand(1, k, m, generator=g, dtype=torch.float64)
            hi[:, 5], lo[:, 5] = -INF, INF
            ops = _cast({"a_hi": w, "b_hi": hi, "b_lo": lo}, dtype, device)
            yield MMCase(f"real matrix first {n}x{k}x{m}", "max_product", scaled_a=True, **ops)


def _special_mm_cases(kind: str, device: str) -> Iterator[MMCase]:
    """Infinities, NaN and ties, as in the CPU kernel tests, in float64 and float32."""
    for dtype in (torch.float64, torch.float32):
        g = torch.Generator().manual_seed(1)
        ops = _mm_operands(kind, 4, 6, 5, 1, g)
        if kind == "max_product":
            ops["a_hi"][0, 0, 1], ops["a_lo"][0, 0, 1] = INF, 2.0
            ops["a_hi"][0, 1, 2], ops["a_lo"][0, 1, 2] = math.nan, math.nan
            ops["a_hi"][0, 2], ops["a_lo"][0, 2] = 1.0, 1.0  # ties: every k gives b's row
            ops["b_hi"][:], ops["b_lo"][:] = 1.0, 1.0
        else:
            ops["a_hi"][0, 0, 1], ops["a_hi"][0, 1, 2], ops["a_hi"][0, 3] = INF, math.nan, 1.0
            ops["b_hi"][0, :, 0] = 2.0  # row 3, column 0: every k ties
            ops["a_hi"][0, 2] = -INF  # row 2: no path
        yield MMCase("inf, nan and ties", kind, **_cast(ops, dtype, device))
        # Ties across tiles: every term equal in a product wider than a tile in k.
        ones = {"a_hi": torch.ones(1, 40, 300, dtype=torch.float64),
                "b_hi": torch.ones(1, 300, 33, dtype=torch.float64)}
        if kind == "max_product":
            ones["a_lo"], ones["b_lo"] = ones["a_hi"].clone(), ones["b_hi"].clone()
        yield MMCase("every term tied", kind, **_cast(ones, dtype, device))


def check_mm(c: MMCase, got: list[Tensor], with_argmax: bool) -> Optional[str]:
    """None if the kernel's planes (and argmax) match the definition, else what differs."""
    out, out_lo, argmax = mm_reference(c)
    tol = LOG_TOL[c.dtype] if c.kind == "log" else 0.0
    expected = [out.to(c.dtype)] + ([out_lo.to(c.dtype)] if out_lo is not None else [])
    for name, e, x in zip(("hi", "lo"), expected, got):
        problem = compare(x.cpu(), e, tol)
        if problem:
            return f"{name}: {problem}"
    if with_argmax:
        x = got[-1].cpu()
        if c.kind == "log" and c.dtype in (torch.float16, torch.bfloat16):
            return None  # exp of half-precision terms: the winner of near ties may differ
        if not torch.equal(x, argmax):
            bad = (x != argmax).nonzero()[:3].tolist()
            return f"argmax differs at {bad}: got {[x[tuple(i)].item() for i in bad]}, " \
                   f"expected {[argmax[tuple(i)].item() for i in bad]}"
    return None


def compare(got: Tensor, expected: Tensor, tol: float) -> Optional[str]:
    if got.shape != expected.shape or got.dtype != expected.dtype:
        return f"got {tuple(got.shape)} {got.dtype}, expected {tuple(expected.shape)} {expected.dtype}"
    g, e = got.double(), expected.double()
    same = (g == e) | (g.isnan() & e.isnan())
    if tol:
        finite = g.isfinite() & e.isfinite()
        same |= finite & ((g - e).abs() <= tol * (1 + e.abs()))
    if bool(same.all()):
        return None
    i = (~same).nonzero()[0].tolist()
    return f"{int((~same).sum())} of {same.numel()} differ; at {i}: got {g[tuple(i)].item()!r}, " \
           f"expected {e[tuple(i)].item()!r}"


# -- the elementwise step (_semiring_times_lifted) ------------------------------------------

@dataclass
class StepCase:
    label: str
    kind: str
    planes: list[Tensor]
    w: Tensor


def step_reference(c: StepCase) -> list[Tensor]:
    acc = accumulation(c.w.dtype)
    w = c.w.cpu().to(acc)
    planes = [p.cpu().to(acc) for p in c.planes]
    if c.kind in ("max_plus", "log"):
        return [planes[0] + w.abs().log()]
    if c.kind == "max_product":
        hi, lo = planes
        empty = ((hi == -INF) & (lo == INF)) | (w == 0)
        p, q = hi * w, lo * w
        top = torch.where(p.isnan() | (p > q), p, q)
        bottom = torch.where(p.isnan() | (p < q), p, q)
        return [top.masked_fill(empty, -INF), bottom.masked_fill(empty, INF)]
    z, h = planes
    aw = w.abs()
    xlogx = torch.where(aw.isnan(), aw, torch.where(aw == 0, 0.0, aw * aw.log()))
    return [z * aw, h * aw - z * xlogx]


def step_cases(device: str, dtypes: tuple[torch.dtype, ...] = DTYPES) -> Iterator[StepCase]:
    g = torch.Generator().manual_seed(1)
    for kind in STEP_KINDS:
        pair = kind in ("max_product", "entropy")
        for dtype in dtypes:
            w = _randn(g, 3, 1, 37)
            w[0, 0, :9] = 0.0  # no edge
            w[1, 0, 4], w[2, 0, 30] = INF, math.nan
            first = _randn(g, 4, 37)
            if kind == "max_product":
                planes = [first, first - torch.rand(4, 37, generator=g, dtype=torch.float64)]
                planes[0][1], planes[1][1] = -INF, INF  # an empty message row
            elif kind == "entropy":
                planes = [first.abs(), _randn(g, 4, 37)]
                planes[0][1], planes[1][1] = 0.0, 0.0
            else:
                planes = [first]
                planes[0][1] = -INF
            planes = [p.to(device, dtype) for p in planes]
            w = w.to(device, dtype)
            yield StepCase("broadcast, zeros, inf and nan", kind, planes, w)
            yield StepCase("strided", kind, [p[:, ::2] for p in planes], w[:, :, ::2])
            yield StepCase("w of one element", kind, [p[:3] for p in planes], w[:1, :1, :1].expand(3, 1, 37))
            if not pair:
                big = torch.randn(257, 1031, generator=g, dtype=torch.float64).to(device, dtype)
                yield StepCase("257 x 1031", kind, [big], big.mT.contiguous().mT * 0.5)


def check_step(c: StepCase, got: list[Tensor]) -> Optional[str]:
    tol = 0.0 if c.kind == "max_product" else LOG_TOL[c.w.dtype]
    for i, e in enumerate(step_reference(c)):
        problem = compare(got[i].cpu(), e.to(c.w.dtype), tol)
        if problem:
            return f"plane {i}: {problem}"
    return None


# -- normalization Jacobian products (semiring_norm_jacobian_mm) ---------------------------

@dataclass
class NormCase:
    label: str
    kind: str
    m: Tensor
    s: Tensor
    c: Tensor
    m2: Optional[Tensor] = None


def _norm_plus_times(kind: str, m: Tensor, m2: Optional[Tensor], w: Tensor
                     ) -> tuple[Tensor, Optional[Tensor]]:
    """plus_j m[g, j] times lift(w[g, j, i]) for the kernel's semirings; w == 0 is no edge."""
    mj, edge = m[:, :, None], w != 0
    if kind == "real":
        return (mj * w).sum(1), None
    if kind == "abs":
        return (mj * w.abs()).sum(1), None
    if kind in ("counting", "boolean"):
        total = (mj * edge).sum(1)
        return ((total > 0).to(m.dtype) if kind == "boolean" else total), None
    if kind in ("log", "max_plus"):
        terms = mj + w.abs().log()
        return (torch.logsumexp(terms, 1) if kind == "log" else terms.amax(1)), None
    if kind == "max_product":
        p, q = mj * w, m2[:, :, None] * w
        empty = ((mj == -INF) & (m2[:, :, None] == INF)) | ~edge
        hi = torch.where(empty, -INF, torch.maximum(p, q)).amax(1)
        lo = torch.where(empty, INF, torch.minimum(p, q)).amin(1)
        return hi, lo
    aw = w.abs()
    xlogx = torch.where(aw == 0, 0.0, aw * aw.log())
    return (mj * aw).sum(1), (m2[:, :, None] * aw - mj * xlogx).sum(1)


def norm_reference(c: NormCase) -> tuple[Tensor, Optional[Tensor]]:
    """In double: J[g, j, i] = c_j (delta_ij - (1 + s_i s_j) / n), as the kernel forms it."""
    m, s, scale = (t.cpu().double() for t in (c.m, c.s, c.c))
    m2 = c.m2.cpu().double() if c.m2 is not None else None
    n = s.shape[1]
    u = -scale / n
    v = u * s
    w = u[:, :, None] + v[:, :, None] * s[:, None, :]
    w = w + torch.diag_embed(scale)
    return _norm_plus_times(c.kind, m, m2, w)


def norm_cases(device: str, dtypes: tuple[torch.dtype, ...] = DTYPES) -> Iterator[NormCase]:
    for kind in NORM_KINDS:
        for dtype in dtypes:
            for groups, n in ((1, 1), (3, 5), (4, 37), (2, 300)):
                g = torch.Generator().manual_seed(3)
                s = _randn(g, groups, n)
                s[:, n // 2] = s[:, 0]  # ties
                scale = _randn(g, groups, n)
                scale[0, 2:5] = 0.0  # zero weights: no edge
                raw = _randn(g, groups, n)
                m2 = None
                if kind == "max_product":
                    m, m2 = raw, raw - torch.rand(groups, n, generator=g, dtype=torch.float64)
                    m[:, 1::4], m2[:, 1::4] = -INF, INF
                elif kind == "entropy":
                    m, m2 = raw.abs(), _randn(g, groups, n)
                elif kind in ("log", "max_plus"):
                    m = raw.masked_fill(torch.arange(n) % 4 == 1, -INF)
                else:
                    m = raw.masked_fill(torch.arange(n) % 4 == 1, 0.0)
                    if kind in ("counting", "boolean"):
                        m = (m != 0).double()
                to = lambda t: None if t is None else t.to(device, dtype)  # noqa: E731
                yield NormCase(f"{groups}x{n}", kind, to(m), to(s), to(scale), to(m2))


# The normalization kernel accumulates in float (double for float64) in its own order; half
# and bfloat16 results are rounded to a few bits: relative tolerances, on 1 + |expected|.
NORM_TOL = {torch.float64: 1e-10, torch.float32: 1e-4, torch.float16: 4e-3, torch.bfloat16: 3e-2}


def check_norm(c: NormCase, got: list[Tensor]) -> Optional[str]:
    expected = norm_reference(c)  # from the operands as given (half ones rounded), in double
    for i, e in enumerate(expected):
        if e is None:
            continue
        problem = compare(got[i].cpu().double(), e, NORM_TOL[c.m.dtype])
        if problem:
            return f"plane {i}: {problem}"
    return None


@dataclass
class Outcome:
    passed: int = 0
    failures: list[str] = field(default_factory=list)

    def record(self, what: str, problem: Optional[str]) -> None:
        if problem is None:
            self.passed += 1
        else:
            self.failures.append(f"{what}: {problem}")


# The ways a product runs: with argmax (term by term), without it term by term, without it
# where the kernel may screen its operands for a faster path, and log's product of shifted
# exponentials (log_mm_blas, on cuBLAS).
MM_VARIANTS = ("argmax", "exact", "screened", "blas")


def run_cases(device: str, mm: Callable, step: Callable, norm: Callable,
              log_mm: Optional[Callable] = None,
              dtypes: tuple[torch.dtype, ...] = DTYPES) -> Outcome:
    """Every case through the given kernels (callables with the extension's signatures)."""
    out = Outcome()

    def attempt(what: str, run: Callable[[], Optional[str]]) -> None:
        try:
            out.record(what, run())
        except Exception as e:  # a kernel that raises fails its case; the others still run
            out.record(what, f"raised {e!r}")

    for c in mm_cases(device, dtypes):
        what = f"mm {c.kind} {c.dtype} {c.label}"
        for variant in MM_VARIANTS:
            if variant == "blas":
                if c.kind == "log" and log_mm is not None:
                    attempt(f"{what} (shifted exponentials)", lambda: check_mm(c, [log_mm(c.a_hi, c.b_hi)], False))
                continue
            argmax, exact = variant == "argmax", variant != "screened"
            attempt(f"{what} ({variant})", lambda: check_mm(
                c, mm(c.kind, c.a_hi, c.a_lo, c.b_hi, c.b_lo, c.scaled_a, argmax, exact), argmax))
    for c in step_cases(device, dtypes):
        attempt(f"step {c.kind} {c.w.dtype} {c.label}", lambda: check_step(c, step(c.kind, c.planes, c.w)))
    for c in norm_cases(device, dtypes):
        attempt(f"norm {c.kind} {c.m.dtype} {c.label}", lambda: check_norm(c, norm(c.kind, c.m, c.m2, c.s, c.c)))
    return out
