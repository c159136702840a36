"""The reference models (tests/reference_models.py) in every built-in semiring.

Every backward node they reach has a rule; a semiring backward runs through each of them; and
float32, the real case, gives the finalized answer of float64 within the tolerances below.
"""
import math
import sys

import pytest
import torch
from torch.autograd import semiring as S

from conftest import REPO

sys.path.insert(0, str(REPO / "tests"))
import reference_models as M  # noqa: E402

SEMIRINGS = [name for name in S.builtin_semirings if name != "real"]

# float32 against float64, on finalized answers (max_product's largest path product, log's
# log-sum, entropy's H~/Z + log Z, ...). The log-space answers are compared absolutely (their
# float32 round-off is relative to the exponent); counts are exact integers as long as they
# stay below 2**24, which these models' counts do not, so they get float32's relative precision
# times the depth; the others get a relative tolerance of 1e-3 of the largest answer of the
# tensor (the small answers of a tensor are sums of the same float32 products).
TOLERANCES = {
    "log": dict(rtol=0, atol=2e-3),
    "max_plus": dict(rtol=0, atol=2e-3),
    "entropy": dict(rtol=2e-3, atol=2e-3),
    "log_entropy": dict(rtol=2e-3, atol=2e-3),
    "counting": dict(rtol=1e-5, atol=0),
    "boolean": dict(rtol=0, atol=0),
}


def _grads(model: str, semiring: str, dtype: torch.dtype) -> tuple:
    built = M.MODELS[model](dtype)
    return torch.autograd.grad(built.loss, built.inputs, semiring=semiring, allow_unused=True,
                               materialize_grads=True)


def _assert_same_answers(got: tuple, expected: tuple, semiring: str, what: str) -> None:
    """float32 messages `got` against float64 `expected`, compared as finalized answers."""
    finalize = S.builtin_semirings[semiring].finalize
    for i, (m32, m64) in enumerate(zip(got, expected)):
        # boolean's answer is a bool
        g32, g64 = finalize(m32).to(torch.float64), finalize(m64).to(torch.float64)
        if semiring == "counting":
            # Path counts near and past float32's range (3.4e38: encoder-decoders'
            # cross-attention multiplies them) are not finite in float32 (inf, or NaN where a
            # product met an absent edge's 0, or a partial sum overflowed first): compared as
            # not finite from 1e30 on.
            far = g64 > 1e30
            g32 = torch.where(far | ~g32.isfinite(), torch.inf, g32)
            g64 = torch.where(far, torch.inf, g64)
        # Finite exactly where float64 is: -inf where no path reaches (the log-space semirings),
        # NaN for entropy's H~/Z + log Z there (Z = 0), and nothing else.
        assert torch.equal(g32.isfinite(), g64.isfinite()), f"{what}: input {i}"
        finite = g64.isfinite()
        if semiring == "entropy":
            assert bool((m64[..., 0][~finite] == 0).all()), f"{what}: input {i}: NaN where Z > 0"
        if semiring == "log_entropy":
            assert bool((m64[..., 0][~finite] == -math.inf).all()), f"{what}: input {i}: NaN where Z > 0"
        tol = TOLERANCES.get(semiring)
        if tol is None:  # abs, max_product: relative to the tensor's largest answer
            scale = float(g64[finite].abs().max()) if finite.any() else 0.0
            tol = dict(rtol=1e-3, atol=1e-3 * scale)
        torch.testing.assert_close(g32[finite], g64[finite], **tol, msg=lambda m: f"{what}: input {i}: {m}")
        if semiring != "counting":  # overflowed counts: inf, or NaN past an absent edge's 0
            torch.testing.assert_close(g32[~finite], g64[~finite], rtol=0, atol=0, equal_nan=True)


@pytest.fixture(scope="module", params=list(M.MODELS))
def model(request):
    if request.param.startswith("hf-"):
        pytest.importorskip("transformers")
    return request.param


def test_every_node_has_a_rule(model):
    built = M.MODELS[model](torch.float32)
    cov = S.coverage(built.loss, built.inputs)
    assert not any(cov.missing.values()), f"{model}: {cov}"


@pytest.mark.parametrize("semiring", SEMIRINGS)
def test_float32_gives_the_float64_answer(model, semiring):
    _assert_same_answers(_grads(model, semiring, torch.float32), _grads(model, semiring, torch.float64),
                         semiring, f"{model}/{semiring}")


def test_log_entropy_where_entropy_leaves_float32():
    # A 12-layer BERT-style encoder of width 128: entropy's Z reaches 1e52 in float64, past
    # float32's 3.4e38, so float32 entropy is inf or NaN there. log_entropy carries log Z: its
    # float32 answer agrees with float64 entropy's.
    shape = M.BertShape(layers=12, hidden=128, heads=4, intermediate=512, vocab=50, positions=16)
    grads = {}
    for semiring, dtype in (("entropy", torch.float64), ("entropy", torch.float32), ("log_entropy", torch.float32)):
        built = M.build_bert(dtype, shape=shape, batch=1, seq=8)
        grads[semiring, dtype] = torch.autograd.grad(built.loss, built.inputs, semiring=semiring)
    z64 = max(float(g[..., 0].max()) for g in grads["entropy", torch.float64])
    assert z64 > torch.finfo(torch.float32).max, z64  # the case this test is about
    assert not all(S.entropy.finalize(g).isfinite().all() for g in grads["entropy", torch.float32])
    expected = [S.entropy.finalize(g) for g in grads["entropy", torch.float64]]
    got = [S.log_entropy.finalize(g).double() for g in grads["log_entropy", torch.float32]]
    for i, (e, g) in enumerate(zip(expected, got)):
        assert torch.equal(e.isfinite(), g.isfinite()), f"input {i}"
        torch.testing.assert_close(g[e.isfinite()], e[e.isfinite()], **TOLERANCES["log_entropy"],
                                   msg=lambda m: f"input {i}: {m}")


def test_entropy_through_twelve_layers_in_float32():
    # The entropy semiring's Z is a sum of path products: through a 12-layer transformer it is
    # where float32's range ends first. Its finalized answer must stay finite and agree with float64.
    grads = {}
    for dtype in (torch.float32, torch.float64):
        built = M.build_bert(dtype, shape=M.DEEP_BERT)
        grads[dtype] = torch.autograd.grad(built.loss, built.inputs, semiring="entropy")
    _assert_same_answers(grads[torch.float32], grads[torch.float64], "entropy", "12-layer BERT")
