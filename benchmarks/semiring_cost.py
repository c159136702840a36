"""What a semiring backward costs relative to ordinary backward, on the patched build.

Prints a table: per semiring, the best time of a grad() call over --repeat runs and its
ratio to semiring=None, for an MLP and a chain of small ops.
"""
import argparse
import time

import torch
from torch.autograd import semiring


def best_of(fn, repeat: int) -> float:
    fn()  # warm-up
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def mlp(width: int = 256, depth: int = 4, batch: int = 64):
    torch.manual_seed(0)
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers).double()
    x = torch.randn(batch, width, dtype=torch.float64, requires_grad=True)
    params = [x, *model.parameters()]
    return lambda s: torch.autograd.grad(model(x).sum(), params, semiring=s)


def chain(length: int = 500):
    x = torch.ones(4, dtype=torch.float64, requires_grad=True)

    def run(s):
        y = x
        for i in range(length):
            y = y * 1.0001 + 0.5 if i % 2 else torch.tanh(y)
        return torch.autograd.grad(y.sum(), x, semiring=s)

    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(f"{'workload':12} {'semiring':12} {'ms':>9} {'x real':>7}")
    for name, make in (("mlp_4x256", mlp), ("chain_500", chain)):
        run = make()
        base = best_of(lambda: run(None), args.repeat)
        print(f"{name:12} {'None':12} {base * 1e3:9.2f} {1.0:7.2f}")
        for s in semiring.builtin_semirings:
            if s == "real":
                continue
            t = best_of(lambda: run(s), args.repeat)
            print(f"{name:12} {s:12} {t * 1e3:9.2f} {t / base:7.2f}")


if __name__ == "__main__":
    main()
