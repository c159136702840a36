"""Cost of ordinary backward (semiring=None): the workload timed by 'scripts/semiring bench'.

Prints one JSON line: the best time (seconds) per workload over --repeat runs.
Run by the same command under the patched and the unpatched build, alternately.
"""
import argparse
import json
import time

import torch


def chain(length: int):
    # Many tiny nodes: the engine's per-node overhead dominates.
    x = torch.ones(4, requires_grad=True)
    y = x
    for i in range(length):
        y = y * 1.0001 + 0.5 if i % 2 else torch.tanh(y)
    loss = y.sum()
    return lambda: loss.backward(retain_graph=True)


def fan_out(length: int):
    # Every node's output is used twice: each step sums two messages in an input buffer.
    x = torch.ones(4, requires_grad=True)
    y = x
    for _ in range(length):
        y = torch.tanh(y) + y
    loss = y.sum()
    return lambda: loss.backward(retain_graph=True)


def mlp(width: int, depth: int, batch: int):
    torch.manual_seed(0)
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers)
    x = torch.randn(batch, width)

    def step():
        model.zero_grad(set_to_none=True)
        model(x).pow(2).mean().backward()

    return step


WORKLOADS = {
    "chain_2000_small_ops": lambda: chain(2000),
    "fan_out_1000": lambda: fan_out(1000),
    "mlp_4x256_batch64": lambda: mlp(256, 4, 64),
}


def best_of(fn, repeat: int) -> float:
    fn()  # warm-up
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    torch.set_num_threads(1)  # one core each: the other is left for the machine
    print(json.dumps({"version": torch.__version__,
                      **{name: best_of(make(), args.repeat) for name, make in WORKLOADS.items()}}))


if __name__ == "__main__":
    main()
