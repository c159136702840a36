"""The baseline the native semiring engine is measured against: a __torch_dispatch__ subclass.

The original upstream discussion suggested implementing semiring backward without touching the
engine: run ordinary autograd with a seed that is a tensor subclass holding semiring elements,
and let __torch_dispatch__ turn each ATen op that the real backward formulas apply to the
message into semiring arithmetic. This file is that approach, implemented honestly: a wrapper
subclass `SemiringMessage` whose elements are kept as real "planes" (one tensor of the
tensor's shape per component of the element: max_product (hi, lo), entropy (Z, H~)), with
  * mm / bmm of a message with a real matrix: a semiring contraction with the lifted matrix
    (max semirings blocked over rows, at most --block products per block; log by the max-shift
    and a real matmul, with an exact fallback where that underflows; entropy by 3 matmuls);
  * mul / div / neg by a real tensor or number: times by the lifted factor;
  * tanh/sigmoid/gelu/silu/leaky_relu/threshold (relu) backward: times by the lifted local
    derivative, computed by the real backward op on a gradient of ones;
  * sum (the engine's broadcast reduction): plus-reduction; add of two messages (the engine's
    input buffer): plus; views, transposes, expand, clone, select, slice, unbind: moved plane by
    plane; select's, slice's and stack's backward: moved into place, the semiring's zero
    elsewhere; masked_fill with 0 (no edge): the zero;
  * embedding's backward: an index-plus of the lookups' messages into the table's rows;
    nll_loss's: the message to each row's target logit, times the lifted -weight (/ total);
  * softmax, log_softmax and layer_norm backward, whose real formulas subtract: each row's dense
    n x n Jacobian, formed for a block of rows at a time, contracted with the semiring's mm
    (what a subclass can do without a rule per op and semiring).
Any other ATen op on a message raises NotImplementedError naming the op, and a graph with an
autograd node whose real formula has not been checked to translate raises before the backward
starts (as the native engine does): the baseline never gives a silently wrong answer. The
contract both implementations answer to is docs/semantics.md.

Modes:
  (default)  per workload, dtype and semiring: the time of ordinary backward (semiring=None),
             of the native semiring backward (torch.autograd.grad(..., semiring=name)) and of
             the subclass route; the ratios native/ordinary and subclass/native; the peak memory
             of each (RSS high-water mark of one backward in a fresh subprocess, over the RSS
             after the workload's setup and forward); whether the subclass result equals
             the native one. On a torch without semiring backward only the subclass is timed.
             Peak memory runs with a fixed glibc mmap threshold (MALLOC_MMAP_THRESHOLD_), so that
             freed tensors leave the RSS and it follows the live tensors; --no-memory skips it.
  --check    the subclass route (and the native engine, if present) against a brute-force
             oracle on tiny programs: dense float64 Jacobians per op, lifted, summed over the
             paths of the scalar graph by dynamic programming.
"""
import argparse
import gc
import inspect
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time
import warnings
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F

from proc_status import status_kib

aten = torch.ops.aten
Planes = Tuple[torch.Tensor, ...]

#: Upper bound on the products one block of a max semiring's contraction materialises.
MM_BLOCK_ELEMENTS = 1 << 18


# -- semirings on planes ---------------------------------------------------------------------
#
# An element of K is `planes` real numbers; a message for a tensor of shape S is a tuple of
# that many tensors of shape S. Every factor a message is multiplied by is the lift of a real
# number w (a local derivative), so `times_real(m, w)` = m TIMES lift(w), with lift(0) = zero.


def _real(w, like: torch.Tensor) -> torch.Tensor:
    """A real factor (tensor or Python number) as a tensor of the message's dtype."""
    if isinstance(w, torch.Tensor):
        return w if w.dtype == like.dtype else w.to(like.dtype)
    return torch.tensor(w, dtype=like.dtype, device=like.device)


class PlaneSemiring:
    name = "semiring"
    element_shape: Tuple[int, ...] = ()

    def zero(self, shape, dtype, device) -> Planes:
        raise NotImplementedError

    def one(self, shape, dtype, device) -> Planes:
        raise NotImplementedError

    def plus(self, a: Planes, b: Planes) -> Planes:
        raise NotImplementedError

    def times_real(self, a: Planes, w) -> Planes:
        raise NotImplementedError

    def sum(self, a: Planes, dims: Tuple[int, ...], keepdim: bool) -> Planes:
        raise NotImplementedError

    def mm_real(self, a: Planes, w: torch.Tensor) -> Planes:
        """PLUS over k of a[..., i, k] TIMES lift(w[..., k, j]) (w real)."""
        raise NotImplementedError

    def index_plus(self, a: Planes, index: torch.Tensor, size: int) -> Planes:
        """out[t] = PLUS over the rows r of a with index[r] == t of a[r] (zero where none)."""
        raise NotImplementedError

    def stack(self, planes: Planes) -> torch.Tensor:
        """The layout torch.autograd.grad(..., semiring=) returns: shape S + element_shape."""
        return torch.stack(planes, dim=-1) if self.element_shape else planes[0]


class _Blocks:
    """Row blocks of a contraction of a (..., n, k) with w (..., k, m), for the max semirings.

    A block's (..., r, k, m) products stay within MM_BLOCK_ELEMENTS; `scratch` buffers of that
    size are allocated once and reused by every block (fresh buffers per block cost more in page
    faults than the arithmetic), and the block results go straight into `outputs` (..., n, m).
    """

    def __init__(self, a: torch.Tensor, w: torch.Tensor, scratch: int, outputs: int):
        batch = tuple(torch.broadcast_shapes(a.shape[:-2], w.shape[:-2]))
        n, k, m = a.shape[-2], a.shape[-1], w.shape[-1]
        r = min(n, max(1, MM_BLOCK_ELEMENTS // max(1, k * m * math.prod(batch))))
        self.rows = [slice(i, i + r) for i in range(0, n, r)]
        self.scratch = [a.new_empty(batch + (r, k, m)) for _ in range(scratch)]
        self.outputs = [a.new_empty(batch + (n, m)) for _ in range(outputs)]

    def __iter__(self):
        """Per block: its rows, the scratch buffers cut to its size, the output slices."""
        for rows in self.rows:
            nr = len(range(*rows.indices(self.outputs[0].shape[-2])))
            yield rows, [b[..., :nr, :, :] for b in self.scratch], [o[..., rows, :] for o in self.outputs]


def _index_reduce(x: torch.Tensor, index: torch.Tensor, size: int, reduce: str, fill: float) -> torch.Tensor:
    """rows of x reduced into `size` rows by index (amax/amin), `fill` where no row goes."""
    out = torch.full((size,) + x.shape[1:], fill, dtype=x.dtype, device=x.device)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "index_reduce.. is in beta")
        return out.index_reduce_(0, index, x, reduce, include_self=True)


class _SumFamily(PlaneSemiring):
    """(R, +, *, 0, 1) with lift = `_weight`: real (w), abs (|w|), counting (w != 0)."""

    def _weight(self, w: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def zero(self, shape, dtype, device):
        return (torch.zeros(shape, dtype=dtype, device=device),)

    def one(self, shape, dtype, device):
        return (torch.ones(shape, dtype=dtype, device=device),)

    def plus(self, a, b):
        return (a[0] + b[0],)

    def times_real(self, a, w):
        return (a[0] * self._weight(_real(w, a[0])),)

    def sum(self, a, dims, keepdim):
        return (a[0].sum(dims, keepdim=keepdim),) if dims else a

    def mm_real(self, a, w):
        return (torch.matmul(a[0], self._weight(w)),)

    def index_plus(self, a, index, size):
        return (a[0].new_zeros((size,) + a[0].shape[1:]).index_add_(0, index, a[0]),)


class Real(_SumFamily):
    name = "real"

    def _weight(self, w):
        return w


class Abs(_SumFamily):
    name = "abs"

    def _weight(self, w):
        return w.abs()


class Counting(_SumFamily):
    name = "counting"

    def _weight(self, w):
        return (w != 0).to(w.dtype)


class Boolean(Counting):
    name = "boolean"

    def plus(self, a, b):
        return (torch.maximum(a[0], b[0]),)

    def sum(self, a, dims, keepdim):
        return (a[0].amax(dims, keepdim=keepdim),) if dims else a

    def mm_real(self, a, w):
        return ((torch.matmul(a[0], self._weight(w)) > 0).to(a[0].dtype),)

    def index_plus(self, a, index, size):
        return (_index_reduce(a[0], index, size, "amax", 0.0),)


class MaxPlus(PlaneSemiring):
    """(R u {-inf}, max, +, -inf, 0), lift(w) = log|w| (log 0 = -inf is zero: no edge)."""

    name = "max_plus"

    def zero(self, shape, dtype, device):
        return (torch.full(shape, -math.inf, dtype=dtype, device=device),)

    def one(self, shape, dtype, device):
        return (torch.zeros(shape, dtype=dtype, device=device),)

    def plus(self, a, b):
        return (torch.maximum(a[0], b[0]),)

    def times_real(self, a, w):
        return (a[0] + _real(w, a[0]).abs().log(),)

    def sum(self, a, dims, keepdim):
        return (a[0].amax(dims, keepdim=keepdim),) if dims else a

    @staticmethod
    def _blocked(a: torch.Tensor, lw: torch.Tensor, reduce) -> torch.Tensor:
        """reduce over k of a[..., i, k] + lw[..., k, j], written into `out` block by block."""
        a, lw = a.contiguous(), lw.contiguous().unsqueeze(-3)  # strided operands are slow
        blocks = _Blocks(a, lw.squeeze(-3), scratch=1, outputs=1)
        for rows, (p,), (out,) in blocks:
            reduce(torch.add(a[..., rows, :].unsqueeze(-1), lw, out=p), -2, out=out)
        return blocks.outputs[0]

    def mm_real(self, a, w):
        return (self._blocked(a[0], w.abs().log(), torch.amax),)

    def index_plus(self, a, index, size):
        return (_index_reduce(a[0], index, size, "amax", -math.inf),)


class Log(MaxPlus):
    """(R u {-inf}, logaddexp, +, -inf, 0), lift(w) = log|w|."""

    name = "log"

    def plus(self, a, b):
        return (torch.logaddexp(a[0], b[0]),)

    def sum(self, a, dims, keepdim):
        return (torch.logsumexp(a[0], dims, keepdim=keepdim),) if dims else a

    def mm_real(self, a, w):
        # log(exp(a) @ |w|) with each row of a and column of |w| scaled by its maximum: one
        # real matmul. Where a path exists but the scaled sum is below sqrt(tiny) (precision
        # lost, or underflow to 0), the exact blocked logsumexp replaces it.
        x = a[0]
        shift = x.amax(-1, keepdim=True).nan_to_num(neginf=0.0)
        aw = w.abs()
        scale = aw.amax(-2, keepdim=True)
        scale = torch.where(scale > 0, scale, torch.ones_like(scale))
        summed = torch.matmul((x - shift).exp(), aw / scale)
        out = summed.log() + shift + scale.log()
        small = ~(summed > math.sqrt(torch.finfo(x.dtype).tiny))
        if bool(small.any()):
            reach = torch.matmul((x > -math.inf).to(x.dtype), (w != 0).to(x.dtype)) > 0
            lost = small & reach
            if bool(lost.any()):
                exact = self._blocked(x, aw.log(), torch.logsumexp)
                out = torch.where(lost, exact, out)
        return (out,)

    def index_plus(self, a, index, size):
        # Each term shifted by its target's largest; a target with none stays -inf.
        top = _index_reduce(a[0], index, size, "amax", -math.inf)
        shift = top.nan_to_num(neginf=0.0, posinf=0.0)
        sums = torch.zeros_like(top).index_add_(0, index, (a[0] - shift[index]).exp())
        return (sums.log() + shift,)


class MaxProduct(PlaneSemiring):
    """Pairs (hi, lo): plus (max, min), times the interval product, zero (-inf, +inf)."""

    name = "max_product"
    element_shape = (2,)

    def zero(self, shape, dtype, device):
        return (torch.full(shape, -math.inf, dtype=dtype, device=device),
                torch.full(shape, math.inf, dtype=dtype, device=device))

    def one(self, shape, dtype, device):
        o = torch.ones(shape, dtype=dtype, device=device)
        return (o, o.clone())

    def plus(self, a, b):
        return (torch.maximum(a[0], b[0]), torch.minimum(a[1], b[1]))

    def times_real(self, a, w):
        # (hi, lo) TIMES (w, w): w > 0 keeps the order, w < 0 swaps it, w = 0 is no edge. The
        # empty interval (-inf, +inf) stays empty under both signs, with no special case.
        hi, lo = a
        if not isinstance(w, torch.Tensor):
            if w > 0:
                return (hi * w, lo * w)
            if w < 0:
                return (lo * w, hi * w)
            return self.zero(hi.shape, hi.dtype, hi.device)
        w = _real(w, hi)
        p, q = hi * w, lo * w
        pos, neg = w > 0, w < 0
        return (torch.where(pos, p, torch.where(neg, q, -math.inf)),
                torch.where(pos, q, torch.where(neg, p, math.inf)))

    def sum(self, a, dims, keepdim):
        if not dims:
            return a
        return (a[0].amax(dims, keepdim=keepdim), a[1].amin(dims, keepdim=keepdim))

    def mm_real(self, a, w):
        # For a point weight w != 0 and a non-empty interval, the interval product is
        # (max, min)(hi w, lo w). "No edge" (w = 0) and "no path" (the empty interval) become
        # NaN products, which are then read as the semiring's zero before the reductions.
        hi, lo = a
        empty, no_edge = (hi == -math.inf) & (lo == math.inf), w == 0
        masked = bool(empty.any()) or bool(no_edge.any())  # else skip the two NaN passes
        if masked:
            hi, lo = hi.masked_fill(empty, math.nan), lo.masked_fill(empty, math.nan)
            w = w.masked_fill(no_edge, math.nan)
        hi, lo, wb = hi.contiguous(), lo.contiguous(), w.contiguous().unsqueeze(-3)  # wb: (..., 1, k, m)
        blocks = _Blocks(hi, w, scratch=3, outputs=2)
        for rows, (p, q, top), (out_hi, out_lo) in blocks:
            torch.mul(hi[..., rows, :].unsqueeze(-1), wb, out=p)
            torch.mul(lo[..., rows, :].unsqueeze(-1), wb, out=q)
            torch.maximum(p, q, out=top)  # NaN in p exactly where in q: no fmax needed
            torch.minimum(p, q, out=p)
            if masked:
                top.nan_to_num_(nan=-math.inf, posinf=math.inf, neginf=-math.inf)
                p.nan_to_num_(nan=math.inf, posinf=math.inf, neginf=-math.inf)
            torch.amax(top, -2, out=out_hi)
            torch.amin(p, -2, out=out_lo)
        return tuple(blocks.outputs)

    def index_plus(self, a, index, size):
        return (_index_reduce(a[0], index, size, "amax", -math.inf),
                _index_reduce(a[1], index, size, "amin", math.inf))


class Entropy(PlaneSemiring):
    """Pairs (Z, H~): plus componentwise, (Z1 Z2, Z1 H2 + Z2 H1), lift(w) = (|w|, -|w| log|w|)."""

    name = "entropy"
    element_shape = (2,)

    def zero(self, shape, dtype, device):
        z = torch.zeros(shape, dtype=dtype, device=device)
        return (z, z.clone())

    def one(self, shape, dtype, device):
        return (torch.ones(shape, dtype=dtype, device=device), torch.zeros(shape, dtype=dtype, device=device))

    def plus(self, a, b):
        return (a[0] + b[0], a[1] + b[1])

    @staticmethod
    def _lift(w: torch.Tensor):
        aw = w.abs()
        return aw, -torch.xlogy(aw, aw)  # xlogy(0, 0) = 0: lift(0) = (0, 0)

    def times_real(self, a, w):
        z, h = a
        aw, hw = self._lift(_real(w, z))
        return (z * aw, h * aw + z * hw)

    def sum(self, a, dims, keepdim):
        return (a[0].sum(dims, keepdim=keepdim), a[1].sum(dims, keepdim=keepdim)) if dims else a

    def mm_real(self, a, w):
        z, h = a
        aw, hw = self._lift(w)
        return (torch.matmul(z, aw), torch.matmul(h, aw) + torch.matmul(z, hw))

    def index_plus(self, a, index, size):
        return tuple(p.new_zeros((size,) + p.shape[1:]).index_add_(0, index, p) for p in a)


SEMIRINGS: Dict[str, PlaneSemiring] = {
    s.name: s for s in (MaxProduct(), Log(), MaxPlus(), Entropy(), Abs(), Counting(), Boolean(), Real())
}


# -- the message subclass --------------------------------------------------------------------


def _ones(shape, like: torch.Tensor) -> torch.Tensor:
    return torch.ones(shape, dtype=like.dtype, device=like.device)


class SemiringMessage(torch.Tensor):
    """A backward message: real metadata of the tensor it belongs to, semiring planes inside."""

    planes: Planes
    semiring: PlaneSemiring

    @staticmethod
    def __new__(cls, planes: Planes, semiring: PlaneSemiring):
        p = planes[0]
        r = torch.Tensor._make_wrapper_subclass(cls, p.shape, strides=p.stride(), dtype=p.dtype,
                                                device=p.device, requires_grad=False)
        r.planes = tuple(planes)
        r.semiring = semiring
        return r

    @classmethod
    def one_like(cls, t: torch.Tensor, semiring: PlaneSemiring) -> "SemiringMessage":
        return cls(semiring.one(t.shape, t.dtype, t.device), semiring)

    def __repr__(self):
        return f"SemiringMessage({self.semiring.name}, shape={tuple(self.shape)})"

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        handler = _HANDLERS.get(func) or _HANDLERS.get(func.overloadpacket)
        if handler is None:
            raise NotImplementedError(
                f"SemiringMessage: no semiring rule for {func} (the real backward formula applied "
                f"it to a message); the subclass baseline does not support this op")
        return handler(func, *args, **kwargs)


def _msg(x) -> bool:
    return isinstance(x, SemiringMessage)


def _wrap(planes: Planes, s: PlaneSemiring) -> SemiringMessage:
    return SemiringMessage(planes, s)


def _refuse(func, why: str):
    raise NotImplementedError(f"SemiringMessage: {func} {why}; the subclass baseline does not support it")


def _structural(func, m, *args, **kwargs):
    """Ops that only move elements (weight-1 edges): the same op on every plane."""
    if not _msg(m) or any(_msg(a) for a in args):
        _refuse(func, "with a message in an unexpected position")
    outs = [func(p, *args, **kwargs) for p in m.planes]
    if isinstance(outs[0], torch.Tensor):
        return _wrap(tuple(outs), m.semiring)
    return type(outs[0])(_wrap(tuple(ps), m.semiring) for ps in zip(*outs))


def _times(func, a, b):
    """mul: a message times a real tensor or number (in either order)."""
    if _msg(a) and _msg(b):
        _refuse(func, "of two messages (a product of messages has no meaning in a semiring)")
    m, w = (a, b) if _msg(a) else (b, a)
    return _wrap(m.semiring.times_real(m.planes, w), m.semiring)


def _div(func, a, b):
    if not _msg(a) or _msg(b):
        _refuse(func, "with a message as divisor")
    # The local derivative as the real formula computes it: a gradient of ones divided by b.
    return _wrap(a.semiring.times_real(a.planes, func(_ones((), a.planes[0]), b)), a.semiring)


def _neg(func, m):
    return _wrap(m.semiring.times_real(m.planes, -1.0), m.semiring)


def _inplace(op):
    def handler(func, a, *args, **kwargs):
        out = op(func, a, *args, **kwargs)
        if not _msg(a):
            _refuse(func, "into a real tensor")
        a.planes = out.planes  # the wrapper owns no data: in place rebinds its planes
        return a
    return handler


def _plus(func, a, b, *, alpha=1):
    """add of two messages: the engine's input buffer (several producers feed one input)."""
    if not (_msg(a) and _msg(b)):
        _refuse(func, "of a message and a real tensor")
    if alpha != 1:
        _refuse(func, f"with alpha={alpha}")
    return _wrap(a.semiring.plus(a.planes, b.planes), a.semiring)


def _dims(m: SemiringMessage, dim) -> Tuple[int, ...]:
    n = m.dim()
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return tuple(range(n))
    dim = [dim] if isinstance(dim, int) else dim
    return tuple(sorted(d % n for d in dim))


def _sum(func, m, dim=None, keepdim=False, *, dtype=None):
    """sum: a plus-reduction (the engine's reduction of a broadcast gradient, expand's backward)."""
    if dtype is not None and dtype != m.dtype:
        _refuse(func, f"with dtype={dtype}")
    return _wrap(m.semiring.sum(m.planes, _dims(m, dim), keepdim), m.semiring)


def _sum_all(func, m, *, dtype=None):
    return _sum(func, m, None, False, dtype=dtype)


def _mm(func, a, b):
    """mm / bmm of a message with a real matrix, on either side."""
    if _msg(a) == _msg(b):
        _refuse(func, "needs exactly one message operand")
    if a.shape[-1] == 0:  # no k: no paths
        m = a if _msg(a) else b
        shape = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
        return _wrap(m.semiring.zero(shape, m.dtype, m.device), m.semiring)
    if _msg(a):
        return _wrap(a.semiring.mm_real(a.planes, b), a.semiring)
    # real @ message = (message^T @ real^T)^T
    s = b.semiring
    return _wrap(tuple(p.mT for p in s.mm_real(tuple(p.mT for p in b.planes), a.mT)), s)


def _local_derivative(func, m, *args, **kwargs):
    """Elementwise backward ops: times by the lifted derivative, the real op on ones."""
    if not _msg(m) or any(_msg(a) for a in args):
        _refuse(func, "with a message in an unexpected position")
    d = func(_ones(m.shape, m.planes[0]), *args, **kwargs)
    return _wrap(m.semiring.times_real(m.planes, d), m.semiring)


def _to_copy(func, m, **kwargs):
    if set(kwargs) - {"dtype", "device", "layout", "memory_format", "non_blocking"}:
        _refuse(func, f"with {sorted(kwargs)}")
    return _structural(func, m, **kwargs)


def _is_same_size(func, a, b):
    return tuple(a.shape) == tuple(b.shape)


def _zero_planes(m: SemiringMessage, shape) -> List[torch.Tensor]:
    return list(m.semiring.zero(tuple(shape), m.dtype, m.device))


def _select_backward(func, m, input_sizes, dim, index):
    """A selected slice's message goes back into place; the rest of the input gets zero."""
    out = _zero_planes(m, input_sizes)
    for o, p in zip(out, m.planes):
        o.select(dim, index).copy_(p)
    return _wrap(tuple(out), m.semiring)


def _slice_backward(func, m, input_sizes, dim, start, end, step):
    out = _zero_planes(m, input_sizes)
    for o, p in zip(out, m.planes):
        o.transpose(0, dim)[start:end:step].copy_(p.transpose(0, dim))
    return _wrap(tuple(out), m.semiring)


def _stack(func, tensors, dim=0):
    """unbind's backward: the outputs' messages stacked (each input element gets one)."""
    if not all(_msg(t) for t in tensors):
        _refuse(func, "of messages and real tensors (an output of unbind without a message)")
    s = tensors[0].semiring
    return _wrap(tuple(torch.stack(ps, dim) for ps in zip(*(t.planes for t in tensors))), s)


def _masked_fill(func, m, mask, value):
    """The real formula zeroes the masked entries (no edge): the semiring's zero there."""
    if not _msg(m) or _msg(mask) or value != 0:
        _refuse(func, f"with value {value}")
    zero = m.semiring.zero((), m.dtype, m.device)
    return _wrap(tuple(torch.where(mask, z, p) for z, p in zip(zero, m.planes)), m.semiring)


def _embedding_backward(func, m, indices, num_weights, padding_idx, scale_grad_by_freq):
    """Every lookup's message goes to its table row: a plus over the lookups of each row."""
    if scale_grad_by_freq:
        _refuse(func, "with scale_grad_by_freq")
    rows = tuple(p.reshape(-1, p.shape[-1]) for p in m.planes)
    index = indices.reshape(-1)
    if padding_idx >= 0:  # the padding row gets no path
        keep = index != padding_idx
        rows, index = tuple(r[keep] for r in rows), index[keep]
    return _wrap(m.semiring.index_plus(rows, index, num_weights), m.semiring)


def _nll_loss_backward(func, m, logits, target, weight, reduction, ignore_index, total_weight):
    """The loss's message reaches each row's target logit, times -weight (/ total for a mean)."""
    if logits.dim() != 2:
        _refuse(func, f"on a {logits.dim()}-d input")
    n, c = logits.shape
    coef = -(weight[target.clamp(0, c - 1)] if weight is not None else torch.ones(n, dtype=logits.dtype))
    if reduction == 1:  # mean
        coef = coef / total_weight
    keep = target != ignore_index
    coef = torch.where(keep, coef, 0.0)  # an ignored row has no path
    planes = tuple(p.expand(n) if p.dim() == 0 else p for p in m.planes)
    at = m.semiring.times_real(planes, coef)
    out = _zero_planes(m, (n, c))
    for o, v in zip(out, at):
        o.scatter_(1, target.clamp(0, c - 1).unsqueeze(1), v.unsqueeze(1))
    return _wrap(tuple(out), m.semiring)


def _jacobian_rows(m: SemiringMessage, dim: int, jacobian: Callable[[slice], torch.Tensor]) -> SemiringMessage:
    """out[.., i] = PLUS over j of m[.., j] TIMES lift(J[j, i]) along `dim`, row by row.

    `jacobian(rows)` is the real (r, n, n) Jacobian dy_j / dx_i of those rows of the input
    moved to (rows, n). It is formed for a block of rows at a time (at most MM_BLOCK_ELEMENTS
    entries, or one row) and contracted with the semiring's mm: what a subclass can do without
    a rule of its own per semiring.
    """
    moved = tuple(p.movedim(dim, -1) for p in m.planes)
    shape = moved[0].shape
    n = shape[-1]
    flat = tuple(p.reshape(-1, n) for p in moved)
    rows = flat[0].shape[0]
    step = max(1, MM_BLOCK_ELEMENTS // max(1, n * n))
    out = [torch.empty_like(p) for p in flat]
    for r0 in range(0, rows, step):
        block = slice(r0, min(rows, r0 + step))
        got = m.semiring.mm_real(tuple(p[block].unsqueeze(-2) for p in flat), jacobian(block))
        for o, g in zip(out, got):
            o[block] = g.squeeze(-2)
    return _wrap(tuple(o.reshape(shape).movedim(-1, dim) for o in out), m.semiring)


def _rows_of(t: torch.Tensor, dim: int) -> torch.Tensor:
    return t.movedim(dim, -1).reshape(-1, t.shape[dim])


def _softmax_backward(func, m, output, dim, input_dtype):
    y = _rows_of(output, dim)  # dy_j / dx_i = y_j (delta_ij - y_i)
    return _jacobian_rows(m, dim, lambda b: torch.diag_embed(y[b]) - y[b].unsqueeze(-1) * y[b].unsqueeze(-2))


def _log_softmax_backward(func, m, output, dim, input_dtype):
    p = _rows_of(output, dim).exp()  # dy_j / dx_i = delta_ij - p_i
    eye = torch.eye(p.shape[-1], dtype=p.dtype)
    return _jacobian_rows(m, dim, lambda b: eye - p[b].unsqueeze(-2))


def _layer_norm_backward(func, m, x, normalized_shape, mean, rstd, weight, bias, output_mask):
    """dy_j / dx_i = w_j rstd (delta_ij - 1/n - xhat_i xhat_j / n) over the normalized elements;
    the weight's message is the plus over rows of m TIMES lift(xhat), the bias's of m."""
    n = math.prod(normalized_shape)
    s = m.semiring
    xhat = ((x - mean) * rstd).reshape(-1, n)
    r = rstd.reshape(-1, 1, 1)
    w = (weight.reshape(n) if weight is not None else torch.ones(n, dtype=x.dtype)).unsqueeze(-1)
    eye = torch.eye(n, dtype=x.dtype)
    flat = tuple(p.reshape(-1, n) for p in m.planes)
    out = [None, None, None]
    if output_mask[0]:
        gi = _jacobian_rows(_wrap(flat, s), 1, lambda b: w * r[b] * (
            eye - 1.0 / n - xhat[b].unsqueeze(-2) * xhat[b].unsqueeze(-1) / n))
        out[0] = _wrap(tuple(p.reshape(x.shape) for p in gi.planes), s)
    if output_mask[1] and weight is not None:
        gw = s.sum(s.times_real(flat, xhat), (0,), False)
        out[1] = _wrap(tuple(p.reshape(normalized_shape) for p in gw), s)
    if output_mask[2] and bias is not None:
        out[2] = _wrap(tuple(p.reshape(normalized_shape) for p in s.sum(flat, (0,), False)), s)
    return tuple(out)


_STRUCTURAL = [aten.view, aten._unsafe_view, aten._reshape_alias, aten.reshape, aten.t, aten.transpose,
               aten.permute, aten.expand, aten.unsqueeze, aten.squeeze, aten.clone, aten.alias,
               aten.detach, aten.contiguous, aten.unbind, aten.select, aten.slice]
_ELEMENTWISE_BACKWARD = [aten.tanh_backward, aten.sigmoid_backward, aten.gelu_backward,
                         aten.threshold_backward, aten.silu_backward, aten.leaky_relu_backward]
_HANDLERS: Dict[object, Callable] = {
    **{op: _structural for op in _STRUCTURAL},
    **{op: _local_derivative for op in _ELEMENTWISE_BACKWARD},
    aten.mul.Tensor: _times, aten.mul.Scalar: _times,
    aten.mul_.Tensor: _inplace(_times), aten.mul_.Scalar: _inplace(_times),
    aten.div.Tensor: _div, aten.div.Scalar: _div,
    aten.div_.Tensor: _inplace(_div), aten.div_.Scalar: _inplace(_div),
    aten.neg.default: _neg,
    aten.add.Tensor: _plus, aten.add_.Tensor: _inplace(_plus),
    aten.sum.dim_IntList: _sum, aten.sum.default: _sum_all,
    aten.mm.default: _mm, aten.bmm.default: _mm,
    aten._to_copy.default: _to_copy,
    aten.is_same_size.default: _is_same_size,
    aten.select_backward.default: _select_backward, aten.slice_backward.default: _slice_backward,
    aten.stack.default: _stack, aten.masked_fill.Scalar: _masked_fill,
    aten.embedding_dense_backward.default: _embedding_backward,
    aten.nll_loss_backward.default: _nll_loss_backward,
    aten._softmax_backward_data.default: _softmax_backward,
    aten._log_softmax_backward_data.default: _log_softmax_backward,
    aten.native_layer_norm_backward.default: _layer_norm_backward,
}

#: Autograd nodes whose real backward formula (PyTorch v2.6.0) applies to the message only ops
#: handled above, in a way that is a semiring computation on the node's Jacobian; each is
#: exercised by --check. The native engine checks its own rules the same way, before it runs.
SUPPORTED_NODES = frozenset("""
AccumulateGrad AddmmBackward0 MmBackward0 BmmBackward0 TBackward0 ViewBackward0
UnsafeViewBackward0 TransposeBackward0 PermuteBackward0 ExpandBackward0 UnsqueezeBackward0
CloneBackward0 SumBackward0 SumBackward1 MeanBackward0 MeanBackward1 GeluBackward0
TanhBackward0 SigmoidBackward0 ReluBackward0 SiluBackward0 LeakyReluBackward0 MulBackward0
MulBackward1 DivBackward0 DivBackward1 NegBackward0 AddBackward0 AddBackward1 SubBackward0
SubBackward1 RsubBackward1 PowBackward0 SelectBackward0 SliceBackward0 UnbindBackward0
MaskedFillBackward0 EmbeddingBackward0 NllLossBackward0 SoftmaxBackward0 LogSoftmaxBackward0
NativeLayerNormBackward0 StackBackward0
""".split())


def check_graph(outputs: Sequence[torch.Tensor]) -> None:
    seen, todo = set(), [o.grad_fn for o in outputs if o.grad_fn is not None]
    while todo:
        node = todo.pop()
        if node in seen:
            continue
        seen.add(node)
        name = node.name().rsplit("::", 1)[-1]
        if name not in SUPPORTED_NODES:
            raise NotImplementedError(f"subclass baseline: no rule for {name}")
        todo.extend(fn for fn, _ in node.next_functions if fn is not None)


def subclass_grad(output: torch.Tensor, inputs: Sequence[torch.Tensor], semiring: str) -> Tuple[torch.Tensor, ...]:
    """Semiring backward by ordinary autograd on a SemiringMessage seed (the semiring's one).

    Returns one tensor per input in the layout of the native engine: input.shape + element_shape.
    """
    s = SEMIRINGS[semiring]
    check_graph([output])
    grads = torch.autograd.grad(output, inputs, grad_outputs=SemiringMessage.one_like(output, s))
    out = []
    for g in grads:
        if not _msg(g):
            raise RuntimeError(f"subclass baseline: a real tensor ({type(g).__name__}) reached an input")
        out.append(s.stack(g.planes))
    return tuple(out)


# -- the native engine ----------------------------------------------------------------------

HAS_NATIVE = "semiring" in inspect.signature(torch.autograd.grad).parameters
NO_NATIVE = "native: this torch has no semiring backward (torch.autograd.grad has no semiring=)"


def native_grad(output, inputs, semiring: str):
    return torch.autograd.grad(output, inputs, semiring=semiring)


def ordinary_grad(output, inputs, semiring=None):
    return torch.autograd.grad(output, inputs)


METHODS = {"ordinary": ordinary_grad, "native": native_grad, "subclass": subclass_grad}


# -- workloads --------------------------------------------------------------------------------
# A workload is make(dtype) -> forward(); forward() runs the forward pass and returns
# (output, inputs) for one backward.


def mlp(dtype, width: int = 256, depth: int = 4, batch: int = 64):
    # The MLP of benchmarks/semiring_cost.py.
    torch.manual_seed(0)
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers).to(dtype)
    x = torch.randn(batch, width, dtype=dtype, requires_grad=True)
    params = [x, *model.parameters()]
    return lambda: (model(x).sum(), params)


def chain(dtype, length: int = 500):
    # The chain of benchmarks/semiring_cost.py: many tiny nodes.
    x = torch.ones(4, dtype=dtype, requires_grad=True)

    def forward():
        y = x
        for i in range(length):
            y = y * 1.0001 + 0.5 if i % 2 else torch.tanh(y)
        return y.sum(), [x]

    return forward


def bert_layer(dtype, batch: int = 8, seq: int = 128, hidden: int = 512, heads: int = 8):
    # One BERT-style encoder layer (post-norm, GELU feed-forward), written out op by op.
    torch.manual_seed(0)
    lin = lambda i, o: torch.nn.Linear(i, o).to(dtype)  # noqa: E731
    q, k, v, o = (lin(hidden, hidden) for _ in range(4))
    up, down = lin(hidden, 4 * hidden), lin(4 * hidden, hidden)
    ln1, ln2 = torch.nn.LayerNorm(hidden).to(dtype), torch.nn.LayerNorm(hidden).to(dtype)
    x = torch.randn(batch, seq, hidden, dtype=dtype, requires_grad=True)
    params = [x] + [p for m in (q, k, v, o, up, down, ln1, ln2) for p in m.parameters()]
    d = hidden // heads

    def split(t):
        return t.view(batch, seq, heads, d).transpose(1, 2)

    def forward():
        att = torch.softmax(split(q(x)) @ split(k(x)).transpose(-2, -1) / math.sqrt(d), dim=-1)
        ctx = (att @ split(v(x))).transpose(1, 2).reshape(batch, seq, hidden)
        h = ln1(x + o(ctx))
        return ln2(h + down(F.gelu(up(h)))).sum(), params

    return forward


def bert_encoder(dtype, batch: int = 8, seq: int = 128):
    # The BERT-style encoder of benchmarks/semiring_cost.py (tests/reference_models.py, in the
    # shape of bert_uncased_L-6_H-512_A-8): embeddings, padding mask, cross-entropy head.
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
    import reference_models as M

    model, data = M.bert_model(dtype, M.BertShape(), batch, seq)
    params = list(model.parameters())
    return lambda: (model(*data), params)


WORKLOADS = {"mlp": mlp, "chain": chain, "bert": bert_layer, "bert_encoder": bert_encoder}
LABELS = {"mlp": "mlp_4x256", "chain": "chain_500", "bert": "bert_layer", "bert_encoder": "bert_L6_H512"}


# -- measurement -----------------------------------------------------------------------------


def _warm_up(method: str, semiring: Optional[str], dtype) -> None:
    # Imports and one-time initialisation on a tiny graph, so the measured call is steady state.
    w = torch.randn(3, 3, dtype=dtype, requires_grad=True)
    METHODS[method](F.gelu(torch.tanh(w @ w) * 2 + 1).sum(), [w], semiring)


def measure_memory(workload: str, dtype, method: str, semiring: Optional[str]) -> dict:
    """Runs in a fresh process: peak RSS of one backward over the RSS after setup and forward."""
    torch.set_num_threads(1)
    forward = WORKLOADS[workload](dtype)
    _warm_up(method, semiring, dtype)
    out, inputs = forward()
    gc.collect()
    base = status_kib("VmRSS")
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset VmHWM to the current RSS
        peak_field = "VmHWM"
    except OSError:
        peak_field = None  # fall back to the process-lifetime peak (an upper bound)
    METHODS[method](out, inputs, semiring)
    peak = status_kib(peak_field) if peak_field else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"peak_mb": max(0, peak - base) / 1024, "exact": peak_field is not None}


def memory_in_subprocess(workload: str, dtype_name: str, method: str, semiring: Optional[str]) -> str:
    cmd = [sys.executable, os.path.abspath(__file__), "--block", str(MM_BLOCK_ELEMENTS),
           "--_memory", workload, dtype_name, method, semiring or "None"]
    # A fixed mmap threshold: every allocation from 64 KiB up is its own mapping, returned to the
    # system when freed, so the RSS follows the live tensors instead of glibc's heap reuse.
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "OMP_NUM_THREADS": "1"}
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        print(f"memory measurement failed: {' '.join(cmd[2:])}: {r.stderr.strip().splitlines()[-1:]}",
              file=sys.stderr)
        return "err"
    res = json.loads(r.stdout.strip().splitlines()[-1])
    return f"{res['peak_mb']:.1f}" + ("" if res["exact"] else "<=")


def time_methods(forward, calls: Dict[str, Callable], repeat: int) -> Dict[str, float]:
    """Median time of each call over `repeat` rounds after a warm-up; methods interleave per round."""
    times: Dict[str, List[float]] = {name: [] for name in calls}
    for r in range(repeat + 1):
        for name, call in calls.items():
            out, inputs = forward()
            gc.collect()
            t0 = time.perf_counter()
            call(out, inputs)
            t = time.perf_counter() - t0
            if r:  # round 0 is the warm-up
                times[name].append(t)
    return {name: statistics.median(ts) for name, ts in times.items()}


def compare(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor], rtol: float, atol: float) -> Tuple[bool, float]:
    """Infinities and NaNs in the same places, finite entries within atol + rtol |b|.

    Returns (ok, the largest |a - b| / max(|b|, 1)): relative for large values, absolute near 0
    (log-space semirings' values are logarithms, where an absolute error is the relative one).
    """
    ok, worst = True, 0.0
    for x, y in zip(a, b):
        x, y = x.to(torch.float64), y.to(torch.float64)
        if x.shape != y.shape:
            return False, math.inf
        fx, fy, nx, ny = torch.isfinite(x), torch.isfinite(y), torch.isnan(x), torch.isnan(y)
        inf_x, inf_y = ~fx & ~nx, ~fy & ~ny
        ok = ok and torch.equal(fx, fy) and torch.equal(nx, ny) and torch.equal(x[inf_x], y[inf_y])
        both = fx & fy
        err, ref = (x[both] - y[both]).abs(), y[both].abs()
        ok = ok and bool((err <= atol + rtol * ref).all())
        if err.numel():
            worst = max(worst, float((err / ref.clamp_min(1.0)).max()))
    return ok, worst


TOLERANCES = {torch.float64: (1e-9, 1e-12), torch.float32: (1e-4, 1e-5)}  # rtol, atol


def benchmark(args) -> None:
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}; threads 1; median of {args.repeat} after a warm-up; "
          f"memory: peak RSS of one backward in a fresh process, MB over the forward's")
    if not HAS_NATIVE:
        print(NO_NATIVE)
    head = (f"{'workload':11} {'dtype':8} {'semiring':12} {'ordinary ms':>11} {'native ms':>10} "
            f"{'subclass ms':>11} {'nat/ord':>7} {'sub/nat':>7} {'MB ord':>7} {'MB nat':>7} "
            f"{'MB sub':>7}  check")
    print(head)
    for workload in args.workloads:
        for dtype_name in args.dtype:
            dtype = getattr(torch, dtype_name)
            forward = WORKLOADS[workload](dtype)
            mem = (lambda *a: memory_in_subprocess(workload, dtype_name, *a)) if args.memory else (lambda *a: "-")
            mem_ord = mem("ordinary", None)
            for s in args.semirings:
                calls, notes = {"ordinary": ordinary_grad}, []
                out, inputs = forward()
                ref = sub = None
                if HAS_NATIVE:
                    try:
                        ref = native_grad(out, inputs, s)
                        calls["native"] = lambda o, i, s=s: native_grad(o, i, s)
                    except RuntimeError as e:
                        notes.append("native: " + _no_rule(str(e)))
                out, inputs = forward()
                try:
                    sub = subclass_grad(out, inputs, s)
                    calls["subclass"] = lambda o, i, s=s: subclass_grad(o, i, s)
                except NotImplementedError as e:
                    notes.append(str(e).split(";")[0].replace("subclass baseline", "subclass"))
                # Ordinary backward is timed again for each row, interleaved with the others, so
                # that the ratios compare times taken moments apart.
                t = time_methods(forward, calls, args.repeat)
                base, tn, ts = t["ordinary"], t.get("native"), t.get("subclass")
                fmt = lambda v, w, p=2: f"{v:{w}.{p}f}" if v is not None else f"{'n/a':>{w}}"  # noqa: E731
                row = f"{LABELS[workload]:11} {dtype_name:8} {s:12} {base * 1e3:11.2f}"
                row += f" {fmt(tn and tn * 1e3, 10)} {fmt(ts and ts * 1e3, 11)}"
                row += f" {fmt(tn and tn / base, 7)} {fmt(ts / tn if ts and tn else None, 7)}"
                row += f" {mem_ord:>7} {mem('native', s) if 'native' in calls else '-':>7}"
                row += f" {mem('subclass', s) if 'subclass' in calls else '-':>7}"
                if ref is not None and sub is not None:
                    ok, worst = compare(sub, ref, *TOLERANCES[dtype])
                    row += f"  {'equal' if ok else 'DIFFERENT'} (max err {worst:.1e})"
                elif sub is not None:
                    row += "  (no native to compare)"
                print(row + ("  " + "; ".join(notes) if notes else ""), flush=True)


def _no_rule(message: str) -> str:
    first = message.strip().splitlines()[0]
    node = first.split(" has no rule", 1)[0] if " has no rule" in first else None
    return f"no rule for {node}" if node else first[:120]


# -- --check: the brute-force oracle --------------------------------------------------------
# Scalar semirings on Python floats (pairs as tuples), written from docs/semantics.md, sharing
# no code with the planes above.


def _lae(a, b):
    if a == -math.inf:
        return b
    if b == -math.inf:
        return a
    m = max(a, b)
    return m + math.log(math.exp(a - m) + math.exp(b - m))


def _mp_times(a, b):
    empty = (-math.inf, math.inf)
    if a == empty or b == empty:
        return empty
    c = [x * y for x in a for y in b]
    return (max(c), min(c))


ORACLE = {  # name: (zero, one, plus, times, lift)
    "real": (0.0, 1.0, lambda a, b: a + b, lambda a, b: a * b, lambda w: w),
    "abs": (0.0, 1.0, lambda a, b: a + b, lambda a, b: a * b, abs),
    "counting": (0.0, 1.0, lambda a, b: a + b, lambda a, b: a * b, lambda w: 1.0),
    "boolean": (0.0, 1.0, lambda a, b: float(bool(a or b)), lambda a, b: float(bool(a and b)), lambda w: 1.0),
    "log": (-math.inf, 0.0, _lae, lambda a, b: a + b, lambda w: math.log(abs(w))),
    "max_plus": (-math.inf, 0.0, max, lambda a, b: a + b, lambda w: math.log(abs(w))),
    "max_product": ((-math.inf, math.inf), (1.0, 1.0), lambda a, b: (max(a[0], b[0]), min(a[1], b[1])),
                    _mp_times, lambda w: (w, w)),
    "entropy": ((0.0, 0.0), (1.0, 0.0), lambda a, b: (a[0] + b[0], a[1] + b[1]),
                lambda a, b: (a[0] * b[0], a[0] * b[1] + b[0] * a[1]),
                lambda w: (abs(w), -abs(w) * math.log(abs(w)))),
}

Step = Tuple[str, Callable, Tuple[str, ...]]  # (output name, fn, argument names): one autograd node


def oracle(steps: Sequence[Step], leaves: Dict[str, torch.Tensor], semiring: str) -> Dict[str, torch.Tensor]:
    """PLUS over the paths from each leaf element to the last step's output of seed TIMES lifts.

    Each step's dense Jacobian (float64, ordinary autograd) gives one edge per nonzero entry;
    the path sum is dynamic programming backward over the steps, seeded with one.
    """
    zero, one, plus, times, lift = ORACLE[semiring]
    values = {k: v.detach().to(torch.float64) for k, v in leaves.items()}
    edges: Dict[Tuple[str, int], List[Tuple[Tuple[str, int], float]]] = {}
    order = list(leaves)
    for name, fn, arg_names in steps:
        args = tuple(values[a] for a in arg_names)
        out = fn(*args).detach()
        jac = torch.autograd.functional.jacobian(fn, args)
        for arg_name, arg, j in zip(arg_names, args, jac):
            j = j.reshape(out.numel(), arg.numel())
            for o, i in j.nonzero().tolist():
                edges.setdefault((name, o), []).append(((arg_name, i), float(j[o, i])))
        values[name] = out
        order.append(name)
    root = steps[-1][0]
    msgs = {(root, j): one for j in range(values[root].numel())}
    for name in reversed(order):
        for j in range(values[name].numel()):
            m = msgs.get((name, j))
            for src, w in (edges.get((name, j), ()) if m is not None else ()):
                c = times(m, lift(w))
                msgs[src] = c if src not in msgs else plus(msgs[src], c)
    return {k: torch.tensor([msgs.get((k, i), zero) for i in range(v.numel())], dtype=torch.float64)
            .reshape(tuple(v.shape) + SEMIRINGS[semiring].element_shape) for k, v in leaves.items()}


def _programs() -> Dict[str, Tuple[List[Step], Dict[str, torch.Tensor]]]:
    """Tiny programs covering every supported node; each step is one autograd node (up to views)."""
    g = torch.Generator().manual_seed(1)
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)  # noqa: E731
    # The tiny MLP: negative weights, an exact zero weight, a zero input (zero dh/dW entries), a
    # ReLU that is off for some units.
    w1, w2 = r(4, 3), r(2, 4)
    w1[1, 2] = 0.0
    x = torch.tensor([[0.5, -1.0, 2.0], [0.0, 0.3, -0.7]], dtype=torch.float64)
    mask = torch.tensor([[False, False, True], [False, False, False]])
    ids = torch.tensor([[1, 3, 1], [0, 2, 4]])
    labels = torch.tensor([2, -100])
    progs = {
        "mlp_relu_gelu": ([
            ("h1", F.linear, ("x", "w1", "b1")), ("a1", torch.relu, ("h1",)),
            ("h2", F.linear, ("a1", "w2", "b2")), ("a2", F.gelu, ("h2",)), ("out", torch.sum, ("a2",)),
        ], {"x": x, "w1": w1, "b1": torch.tensor([0.1, -2.0, 0.4, 0.0], dtype=torch.float64),
            "w2": w2, "b2": r(2)}),
        "mlp_tanh_sigmoid": ([
            ("h1", F.linear, ("x", "w1", "b1")), ("a1", torch.tanh, ("h1",)),
            ("h2", F.linear, ("a1", "w2", "b2")), ("a2", torch.sigmoid, ("h2",)), ("out", torch.sum, ("a2",)),
        ], {"x": r(2, 3), "w1": w1, "b1": r(4), "w2": -w2.abs(), "b2": r(2)}),
        "chain": ([
            ("y1", torch.tanh, ("x",)), ("y2", lambda t: t * 1.0001, ("y1",)), ("y3", lambda t: t + 0.5, ("y2",)),
            ("y4", torch.tanh, ("y3",)), ("y5", lambda t: t * -1.5, ("y4",)), ("y6", lambda t: t - 0.25, ("y5",)),
            ("y7", torch.tanh, ("y6",)), ("y8", lambda t: aten.mul.Scalar(t, 0.75), ("y7",)),
            ("y9", lambda t: aten.add.Scalar(t, 1.0), ("y8",)), ("y10", lambda t: aten.div.Scalar(t, -2.0), ("y9",)),
            ("y11", lambda t: aten.sub.Scalar(t, 0.5), ("y10",)), ("y12", lambda t: 0.25 - t, ("y11",)),
            ("out", torch.sum, ("y12",)),
        ], {"x": torch.tensor([1.0, -0.5, 0.0, 2.0], dtype=torch.float64)}),
        # Fan-out (the input buffer's plus), broadcasting (the engine's plus-reduction), x * x
        # (two edges), subtraction, division, pow, mean over a dim, leaky ReLU's negative slope.
        "fan_out_broadcast": ([
            ("y1", torch.tanh, ("x",)), ("y2", torch.mul, ("y1", "x")), ("y3", torch.add, ("y2", "b")),
            ("y4", torch.sigmoid, ("y3",)), ("y5", torch.sub, ("y4", "x")), ("y6", F.silu, ("y5",)),
            ("y7", torch.div, ("y6", "c")), ("y8", lambda t: t ** 2, ("y7",)), ("y9", torch.mul, ("y8", "y8")),
            ("y10", lambda t: F.leaky_relu(t, -0.3), ("y9",)), ("y11", torch.neg, ("y10",)),
            ("y12", lambda t: t.mean(0), ("y11",)), ("y13", torch.mul, ("y12", "b")),
            ("y14", lambda t: t / 3.0, ("y13",)), ("out", torch.mean, ("y14",)),
        ], {"x": r(3, 4), "b": r(4), "c": torch.tensor([0.5, -2.0, 1.5, 3.0], dtype=torch.float64)}),
        # Batched matmul with views, transposes, permute, unsqueeze and expand in between.
        "bmm_views": ([
            ("c", torch.matmul, ("a", "b")), ("d", lambda t: t.transpose(1, 2).reshape(2, 15), ("c",)),
            ("e", lambda t: torch.relu(t), ("d",)), ("f", lambda t: t.unsqueeze(0).expand(3, 2, 15), ("e",)),
            ("g", lambda t, m: t.permute(1, 0, 2) @ m, ("f", "m")), ("h", torch.mm, ("p", "q")),
            ("k", lambda t, h: t.sum(2) * h, ("g", "h")), ("out", torch.sum, ("k",)),
        ], {"a": r(2, 3, 4), "b": r(2, 4, 5), "m": r(15, 2), "p": r(2, 4), "q": r(4, 3)}),
        # The transformer's nodes: softmax (with ties and a masked, exactly-zero entry), layer
        # norm (a zero weight), embedding (a repeated id and the padding row), select, slice,
        # unbind, masked_fill, and cross-entropy (log_softmax and nll_loss, an ignored target).
        "attention_softmax": ([
            ("s", lambda t: t.masked_fill(mask, -math.inf).softmax(-1), ("x",)),
            ("u", lambda t, v: torch.stack((t @ v).unbind(0), 2), ("s", "v")),
            ("out", lambda t: (t[:, 1:, 0] * t[:, :-1, 1]).sum(), ("u",)),
        ], {"x": torch.tensor([[[0.3, 0.3, -1.0], [2.0, 0.0, 0.5]], [[1.0, -1.0, 0.2], [0.0, 0.0, 0.0]]],
                              dtype=torch.float64), "v": r(2, 3, 2)}),
        "layer_norm": ([
            ("y", lambda t, w, b: F.layer_norm(t, (4,), w, b), ("x", "w", "b")),
            ("out", lambda t, c: (t * c).sum(), ("y", "c")),
        ], {"x": r(3, 4), "w": torch.tensor([1.5, 0.0, -0.7, 1.0], dtype=torch.float64), "b": r(4),
            "c": r(3, 4)}),
        "embedding_cross_entropy": ([
            ("e", lambda t: F.embedding(ids, t, padding_idx=0), ("table",)),
            ("h", lambda t, w: torch.tanh(t.sum(1)) @ w, ("e", "w")),
            ("out", lambda t: F.cross_entropy(t, labels, ignore_index=-100), ("h",)),
        ], {"table": r(5, 3), "w": r(3, 4)}),
        # The fixed cases of docs/semantics.md: (x**2 + x).sum() and the diamond 2x + 3x.
        "square_plus": ([("y", lambda t: t ** 2, ("x",)), ("z", torch.add, ("y", "x")), ("out", torch.sum, ("z",))],
                        {"x": torch.tensor([1.0, 0.1], dtype=torch.float64)}),
        "diamond": ([("y1", lambda t: t * 2, ("x",)), ("y2", lambda t: t * 3, ("x",)),
                     ("y", torch.add, ("y1", "y2")), ("out", torch.sum, ("y",))],
                    {"x": torch.tensor([0.7], dtype=torch.float64)}),
    }
    return progs


def _run_program(steps: Sequence[Step], leaves: Dict[str, torch.Tensor], dtype):
    values = {k: v.detach().to(dtype).requires_grad_() for k, v in leaves.items()}
    inputs = list(values.values())
    for name, fn, arg_names in steps:
        values[name] = fn(*(values[a] for a in arg_names))
    return values[steps[-1][0]], inputs


def check(args) -> int:
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}: the subclass route"
          f"{' and the native engine' if HAS_NATIVE else ''} against the brute-force oracle (float64)")
    if not HAS_NATIVE:
        print(NO_NATIVE + "; checking the subclass route only")
    failures = 0
    for prog, (steps, leaves) in _programs().items():
        for s in args.semirings:
            want = oracle(steps, leaves, s)
            methods = {"subclass": subclass_grad, **({"native": native_grad} if HAS_NATIVE else {})}
            results = []
            for method, fn in methods.items():
                out, inputs = _run_program(steps, leaves, torch.float64)
                try:
                    got = fn(out, inputs, s)
                except (RuntimeError, NotImplementedError) as e:
                    if method == "native" and " has no rule for backward" in str(e):
                        # A refusal naming the node, not a wrong answer: nothing to compare.
                        results.append(f"native refused ({_no_rule(str(e))})")
                        continue
                    results.append(f"{method} ERROR {str(e).splitlines()[0][:100]}")
                    failures += 1
                    continue
                ok, worst = compare(got, list(want.values()), *TOLERANCES[torch.float64])
                failures += not ok
                results.append(f"{method} {'ok' if ok else 'FAIL'} (max err {worst:.0e})")
            print(f"  {prog:18} {s:12} " + "; ".join(results))
    # The contract's fixed numbers (docs/semantics.md), through the subclass route.
    fixed = [("square_plus", "max_product", lambda g: g[0][..., 0], [2.0, 1.0]),
             ("diamond", "real", lambda g: g[0], [5.0]), ("diamond", "counting", lambda g: g[0], [2.0]),
             ("diamond", "max_product", lambda g: g[0][..., 0], [3.0]),
             ("diamond", "log", lambda g: g[0], [math.log(5.0)]),
             ("diamond", "entropy", lambda g: g[0][..., 1] / g[0][..., 0] + g[0][..., 0].log(),
              [-(0.4 * math.log(0.4) + 0.6 * math.log(0.6))])]
    for prog, s, answer, expected in fixed:
        out, inputs = _run_program(*_programs()[prog], torch.float64)
        got = answer(subclass_grad(out, inputs, s)).tolist()
        ok = all(abs(a - b) <= 1e-12 * max(1.0, abs(b)) for a, b in zip(got, expected))
        failures += not ok
        print(f"  fixed {prog:12} {s:12} {'ok' if ok else 'FAIL'}: {got} (expected {expected})")
    # Unsupported ops are refused, not answered: cumsum's real formula is a reversed cumsum of
    # the message, which the subclass has no rule for.
    out, inputs = _run_program([("y", lambda t: torch.cumsum(t, 0), ("x",)), ("out", torch.sum, ("y",))],
                               {"x": torch.randn(3, dtype=torch.float64)}, torch.float64)
    try:
        subclass_grad(out, inputs, "max_product")
        print("  unsupported op   FAIL: cumsum was not refused")
        failures += 1
    except NotImplementedError as e:
        print(f"  unsupported op   ok: {e}")
    print("check: " + ("all passed" if not failures else f"{failures} FAILED"))
    return 1 if failures else 0


def main() -> int:
    global MM_BLOCK_ELEMENTS
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="check against the brute-force oracle, then exit")
    ap.add_argument("--repeat", type=int, default=5, help="timed rounds per method (median), after a warm-up")
    ap.add_argument("--semirings", default=None, type=lambda v: v.split(","),
                    help=f"comma-separated, of {','.join(SEMIRINGS)} (default: max_product,log,max_plus,"
                         f"entropy; --check: all)")
    ap.add_argument("--workloads", default=["mlp", "chain"], type=lambda v: v.split(","),
                    help=f"comma-separated, of {','.join(WORKLOADS)} (default: mlp,chain)")
    ap.add_argument("--dtype", default=["float32", "float64"], type=lambda v: v.split(","),
                    help="comma-separated (default: float32,float64)")
    ap.add_argument("--no-memory", dest="memory", action="store_false", help="skip the peak-memory subprocesses")
    ap.add_argument("--block", type=int, default=MM_BLOCK_ELEMENTS,
                    help="max semirings' contraction: products per block (default: %(default)s)")
    ap.add_argument("--_memory", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    MM_BLOCK_ELEMENTS = args.block
    if args._memory:
        workload, dtype_name, method, semiring = args._memory
        res = measure_memory(workload, getattr(torch, dtype_name), method, None if semiring == "None" else semiring)
        print(json.dumps(res))
        return 0
    if args.semirings is None:
        args.semirings = list(SEMIRINGS) if args.check else ["max_product", "log", "max_plus", "entropy"]
    bad = [s for s in args.semirings if s not in SEMIRINGS] + [w for w in args.workloads if w not in WORKLOADS]
    if bad:
        ap.error(f"unknown: {', '.join(bad)}")
    if args.check:
        return check(args)
    benchmark(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
