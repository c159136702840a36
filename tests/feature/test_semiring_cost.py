"""benchmarks/semiring_cost.py's replay of ordinary backward's real products (the floor rows)."""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import semiring_cost as C  # noqa: E402


def shapes(calls):
    return [(str(func), [tuple(a.shape) for a in args if isinstance(a, torch.Tensor)])
            for func, args, _ in calls]


def test_products_replays_the_products_of_ordinary_backward():
    # backward through a (24 x 16) @ (16 x 8): grad_a = g b^T and grad_b = a^T g
    torch.manual_seed(0)
    a = torch.randn(24, 16, requires_grad=True)
    b = torch.randn(16, 8, requires_grad=True)
    run = C.backward((a.mm(b).tanh()).sum(), [a, b])
    with C.RecordProducts() as ordinary:
        run(None)
    replay = C.products_of(run)
    with C.RecordProducts() as replayed:
        replay()
    assert sorted(shapes(ordinary.calls)) == sorted(shapes(replayed.calls))
    assert sorted(s for _, s in shapes(replayed.calls)) == [[(16, 24), (24, 8)], [(24, 8), (8, 16)]]
