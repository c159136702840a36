"""benchmarks/semiring_cost.py's instruments: the replay of the matrix products a backward ran
(the split rows), TimeOps (--ops) and --keep-freed-memory."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import semiring_cost as C  # noqa: E402


def shapes(calls):
    return sorted((str(func), [tuple(a.shape) for a in args if isinstance(a, torch.Tensor)])
                  for func, args, _ in calls)


def mm_tanh_backward():
    """backward through tanh of a (24 x 16) @ (16 x 8): grad_a = g b^T and grad_b = a^T g."""
    torch.manual_seed(0)
    a = torch.randn(24, 16, requires_grad=True)
    b = torch.randn(16, 8, requires_grad=True)
    return C.backward((a.mm(b).tanh()).sum(), [a, b])


@pytest.mark.parametrize("semiring", [None, "max_product", "entropy"])
def test_products_replays_the_products_of_the_backward(semiring):
    run = mm_tanh_backward()
    with C.RecordProducts() as direct:
        run(semiring)
    replay = C.products_of(run, semiring)
    with C.RecordProducts() as replayed:
        replay()
    assert direct.calls and shapes(direct.calls) == shapes(replayed.calls)
    if semiring is None:
        assert sorted(s for _, s in shapes(replayed.calls)) == [[(16, 24), (24, 8)], [(24, 8), (8, 16)]]
    if semiring == "max_product":
        # the semiring kernel, once per product: a message (24, 8) + its element (2,) with a
        # real matrix
        assert [f for f, _ in shapes(replayed.calls)] == ["aten._semiring_mm_lifted.default"] * 2
        assert all(s[0] == (24, 8, 2) for _, s in shapes(replayed.calls))


@pytest.mark.parametrize("semiring", [None, "max_product"])
def test_time_ops_counts_each_op_of_the_backward_and_what_it_writes(semiring):
    run = mm_tanh_backward()
    with C.TimeOps() as timed:
        run(semiring)
        run(semiring)
    products = {f: n for f, n in timed.calls.items() if f in C.RecordProducts.PRODUCTS}
    assert sum(products.values()) == 4  # grad_a and grad_b, twice
    # what the products write: the two gradients (real) or messages (a pair per element)
    per_element = 1 if semiring is None else 2
    assert sum(timed.elements[f] for f in products) == 2 * per_element * (24 * 16 + 16 * 8)
    assert all(timed.seconds[f] > 0 for f in timed.calls)
    assert len(timed.calls) > len(products)  # tanh's step, the seed: ops beside the products


def test_time_ops_counts_nothing_written_by_a_view_and_the_result_of_an_in_place_op():
    x = torch.randn(8, 4)
    with C.TimeOps() as timed:
        x.t()
        x.add_(1)
        torch.add(x, 1, out=torch.empty(8, 4))
    assert timed.elements[torch.ops.aten.t.default] == 0
    assert timed.elements[torch.ops.aten.add_.Tensor] == 32
    assert timed.elements[torch.ops.aten.add.out] == 32


def test_keep_freed_memory_runs_the_table_in_a_process_with_glibc_told_so():
    script = Path(C.__file__)
    args = [sys.executable, str(script), "--workloads", "chain_1000", "--semirings", "log", "--repeat", "1"]
    env = {k: v for k, v in os.environ.items() if k not in C.KEEP_FREED_MEMORY}
    plain = subprocess.run(args, capture_output=True, text=True, check=True, env=env, cwd=script.parent)
    kept = subprocess.run([*args, "--keep-freed-memory"], capture_output=True, text=True, check=True,
                          env=env, cwd=script.parent)
    assert "glibc keeping the memory it frees" not in plain.stdout
    assert "glibc keeping the memory it frees" in kept.stdout.splitlines()[0]
    assert any(line.startswith("chain_1000") and " log " in line for line in kept.stdout.splitlines())
