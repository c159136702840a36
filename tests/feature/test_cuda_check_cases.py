"""The GPU check's definitions (tests/cuda/cases.py) against the patched build's CPU kernels.

The GPU check compares each CUDA kernel with these definitions on a machine without the
patched build; here, every case of it in float64 and float32 runs through the CPU kernels
behind the private operators (the CPU has no half or bfloat16 kernels), so that passing the
GPU check means agreeing with the CPU kernels.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cuda"))
import cases  # noqa: E402

S = torch.autograd.semiring


def cpu_mm(kind, a_hi, a_lo, b_hi, b_lo, scaled_a, argmax, term_by_term):
    del term_by_term  # the operators choose their own path
    if kind == "max_product":
        b = torch.stack([b_hi, b_lo], -1)
        if scaled_a:
            out, arg = torch._semiring_mm_lifted(b, a_hi, True, kind, compute_argmax=argmax)
        else:
            out, arg = torch._semiring_mm(torch.stack([a_hi, a_lo], -1), b, kind, compute_argmax=argmax)
        planes = [out[..., 0], out[..., 1]]
    else:
        out, arg = torch._semiring_mm(a_hi, b_hi, kind, compute_argmax=argmax)
        planes = [out]
    return planes + ([arg] if argmax else [])


def cpu_step(kind, planes, w):
    message = torch.stack(planes, -1) if len(planes) == 2 else planes[0]
    out = torch._semiring_times_lifted(message, w, kind)
    return list(out.unbind(-1)) if len(planes) == 2 else [out]


def cpu_norm(kind, m, m2, s, c):
    message = torch.stack([m, m2], -1) if m2 is not None else m
    out = S.builtin_semirings[kind]._native.norm_jacobian_mm(message, s, c)
    return list(out.unbind(-1)) if m2 is not None else [out]


def cpu_log_mm(a, b):
    out, _ = torch._semiring_mm(a, b, "log")
    return out


def test_cuda_check_definitions_match_the_cpu_kernels():
    outcome = cases.run_cases("cpu", cpu_mm, cpu_step, cpu_norm, cpu_log_mm,
                              dtypes=(torch.float64, torch.float32))
    assert not outcome.failures, "\n".join(outcome.failures[:20])
    assert outcome.passed >= 400


@pytest.mark.parametrize("kind", cases.MM_KINDS)
def test_a_wrong_kernel_fails_the_check(kind):
    # The check can fail: a product that drops the last k, and an argmax off by one.
    def short_mm(kind, a_hi, a_lo, b_hi, b_lo, scaled_a, argmax, term_by_term):
        k = a_hi.shape[-1]
        return cpu_mm(kind, a_hi[..., : max(k - 1, 0)], None if a_lo is None else a_lo[..., : max(k - 1, 0)],
                      b_hi[..., : max(k - 1, 0), :], None if b_lo is None else b_lo[..., : max(k - 1, 0), :],
                      scaled_a, argmax, term_by_term)

    c = next(c for c in cases.mm_cases("cpu", (torch.float64,)) if c.kind == kind and c.label == "9x131x261")
    assert cases.check_mm(c, short_mm(c.kind, c.a_hi, c.a_lo, c.b_hi, c.b_lo, c.scaled_a, False, True), False)
    got = cpu_mm(c.kind, c.a_hi, c.a_lo, c.b_hi, c.b_lo, c.scaled_a, True, True)
    assert cases.check_mm(c, got, True) is None
    got[-1] = got[-1] + (got[-1] >= 0).long()
    assert "argmax differs" in cases.check_mm(c, got, True)
