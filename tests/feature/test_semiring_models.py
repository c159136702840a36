"""Semiring backward on whole models, checked against the oracle shipped in the patch."""
import math

import pytest
import torch
import torch.nn.functional as F
from torch.autograd import semiring as S
from torch.testing._internal.semiring_oracle import oracle, Step

SEMIRINGS = list(S.builtin_semirings)


def _mlp_steps():
    return [
        Step("h1", F.linear, ("x", "w1", "b1")),
        Step("a1", F.gelu, ("h1",)),
        Step("h2", F.linear, ("a1", "w2", "b2")),
        Step("a2", torch.relu, ("h2",)),
        Step("r", torch.add, ("a2", "h1")),  # a residual branch: two paths meet
        Step("o", lambda r: r.mean(-1), ("r",)),
        Step("loss", torch.sum, ("o",)),
    ]


@pytest.mark.parametrize("semiring", SEMIRINGS)
def test_residual_mlp_matches_oracle(semiring):
    g = torch.Generator().manual_seed(1)
    leaves = {
        "x": torch.randn(2, 3, dtype=torch.float64, generator=g),
        "w1": torch.randn(4, 3, dtype=torch.float64, generator=g),
        "b1": torch.randn(4, dtype=torch.float64, generator=g),
        "w2": torch.randn(4, 4, dtype=torch.float64, generator=g),
        "b2": torch.randn(4, dtype=torch.float64, generator=g),
    }
    live = {k: v.clone().requires_grad_() for k, v in leaves.items()}
    env = dict(live)
    for s in _mlp_steps():
        env[s.out] = s.fn(*[env[a] for a in s.args])
    got = torch.autograd.grad(env["loss"], list(live.values()), semiring=semiring)
    expected = oracle(_mlp_steps(), leaves, semiring)
    for name, r in zip(live, got):
        torch.testing.assert_close(r, expected[name], atol=1e-12, rtol=1e-10, equal_nan=True)


def test_nn_module_backward_fills_grad_with_pairs():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.SiLU(), torch.nn.Linear(5, 2)).double()
    model(torch.randn(4, 6, dtype=torch.float64)).sum().backward(semiring="max_product")
    for p in model.parameters():
        assert p.grad.shape == p.shape + (2,)
        hi, lo = p.grad[..., 0], p.grad[..., 1]
        assert bool((hi >= lo).all())


def test_entropy_of_a_uniform_fan():
    # y = sum_i x * 1: n paths of weight 1 from x: entropy log(n).
    x = torch.tensor(2.0, dtype=torch.float64, requires_grad=True)
    n = 7
    (g,) = torch.autograd.grad(x.expand(n).sum(), x, semiring="entropy")
    assert math.isclose(float(S.entropy.finalize(g)), math.log(n), rel_tol=1e-12)
