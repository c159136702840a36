"""benchmarks/second_order.py: every workload function it times runs and gives finite gradients."""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import second_order  # noqa: E402


def test_second_order_benchmark_runs_every_semiring():
    fns = second_order.runs("mlp_4x256")
    assert set(fns) == {"ordinary", *second_order.SEMIRINGS,
                        *(f"{n} (no create_graph)" for n in second_order.SEMIRINGS)}
    for name in ["ordinary", *second_order.SEMIRINGS]:
        grads = fns[name]()
        assert all(g is not None and torch.isfinite(g).all() for g in grads), name
