"""Cost of ordinary backward (semiring=None): the workloads of 'scripts/semiring bench'.

--serve: lock-step timing. Prints a JSON line (torch version, workload names), then for each
workload name read from stdin runs one step and prints its time in seconds. 'bench' drives
servers of both builds in lock-step on one core, so the steps it compares are timed
milliseconds apart and the machine's drifting speed cancels in their ratio.
--instructions LIB: runs --steps steps of each workload between the callgrind client requests
of LIB (benchmarks/callgrind_markers.c), for an exact instruction count per workload.
"""
import argparse
import ctypes
import gc
import json
import sys
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


def mlp_model(width: int, depth: int, batch: int):
    torch.manual_seed(0)
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.GELU()]
    return torch.nn.Sequential(*layers), torch.randn(batch, width)


def mlp(width: int, depth: int, batch: int):
    model, x = mlp_model(width, depth, batch)

    def step():
        model.zero_grad(set_to_none=True)
        model(x).pow(2).mean().backward()

    return step


def mlp_backward(width: int, depth: int, batch: int):
    # The backward alone, on a kept graph: the engine's share of the step above.
    model, x = mlp_model(width, depth, batch)
    loss = model(x).pow(2).mean()

    def step():
        model.zero_grad(set_to_none=True)
        loss.backward(retain_graph=True)

    return step


def mlp_forward(width: int, depth: int, batch: int):
    # Control: the MLP's forward without autograd runs no line the series changes, so any
    # difference it shows is the two binaries' layout, not the feature.
    model, x = mlp_model(width, depth, batch)

    def forward():
        with torch.no_grad():
            model(x)

    return forward


def kernel(op, *shapes):
    # Control: one ATen kernel of the MLP's backward, called directly (no autograd at all).
    torch.manual_seed(0)
    args = [torch.randn(*shape) for shape in shapes]
    return lambda: op(*args)


WORKLOADS = {
    "chain_2000_small_ops": lambda: chain(2000),
    "fan_out_1000": lambda: fan_out(1000),
    "mlp_4x256_batch64": lambda: mlp(256, 4, 64),
    "mlp_4x256_batch64_backward": lambda: mlp_backward(256, 4, 64),
    "control_mlp_forward_no_grad": lambda: mlp_forward(256, 4, 64),
    "control_gelu_backward_kernel": lambda: kernel(torch.ops.aten.gelu_backward, (64, 256), (64, 256)),
    "control_mm_kernel": lambda: kernel(torch.mm, (64, 256), (256, 256)),
}


def serve() -> None:
    steps = {name: make() for name, make in WORKLOADS.items()}
    for step in steps.values():
        step()  # warm-up: lazy initialisation is not the steady state being compared
    print(json.dumps({"version": torch.__version__, "workloads": list(steps)}), flush=True)
    for line in sys.stdin:
        step = steps[line.strip()]
        t0 = time.perf_counter()
        step()
        print(time.perf_counter() - t0, flush=True)


def count_instructions(markers_lib: str, steps: int) -> None:
    markers = ctypes.CDLL(markers_lib)
    for name, make in WORKLOADS.items():
        step = make()
        step()  # warm-up: lazy initialisation is not the steady state being compared
        gc.collect()
        markers.measure_start()
        for _ in range(steps):
            step()
        markers.measure_stop(name.encode())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--serve", action="store_true", help="time steps on request (lock-step timing)")
    mode.add_argument("--instructions", metavar="LIB", help="count instructions under callgrind")
    ap.add_argument("--steps", type=int, default=5, help="--instructions: steps counted per workload")
    args = ap.parse_args()
    torch.set_num_threads(1)  # one core: the other is left for the machine
    if args.serve:
        serve()
    else:
        count_instructions(args.instructions, args.steps)
        print(json.dumps({"version": torch.__version__}))


if __name__ == "__main__":
    main()
