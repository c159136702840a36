"""What differentiating through a semiring backward costs (create_graph=True), on the patched build.

float32, this machine's threads. Two workloads, the graph built once and kept:

* mlp_4x256: 4 x (Linear(256) + tanh), batch 64: the messages at the input x, then the
  gradient of the sum of their finalized values in every parameter;
* bert_L2_H128: the BERT-style encoder of tests/reference_models.py with 2 layers, width 128,
  4 heads, intermediate 512, batch 4, sequence 32: the messages at the word embeddings' output
  (B, T, H), each token's row plus-reduced and finalized (the token entropy of the paper's
  analyses, for entropy and log_entropy), then the gradient of their mean in every parameter.

For each semiring, side by side in one run (best of --repeat interleaved rounds, as
benchmarks/semiring_cost.py): the semiring backward with create_graph=True followed by the
backward of the finalized result; its ratio to ordinary double backward of the same model
(the gradient at the same tensor with create_graph=True, then the backward of its squared
norm); the semiring backward alone without create_graph, for scale; and the peak resident set
of one run in a fresh process, above the set before it.

Where the time goes: under create_graph a built-in runs its primitives and SemiringOps's
composites of them instead of its fused kernels (Note [Semiring backward with create_graph]).
A matrix product is then a blocked product: every (row, k, column) term formed as a tensor
element by the semiring's times, and plus-folded over k, with the masks (where, eq, fill) that
keep the zero's derivative finite; autograd keeps the blocks for the second backward, which
runs the same elementwise work again. Ordinary double backward runs a few BLAS products per
layer. max_product's times is four products and two masks per term, log_entropy's plus a
log-sum-exp and two weighted means; abs's terms are single products. A profile of the MLP's
max_product run: where, masked_fill, eq, fill and div take most of it; no BLAS.
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path

import torch
from torch.autograd import semiring as S

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import reference_models as M  # noqa: E402
from proc_status import status_kib  # noqa: E402
from semiring_cost import best_times  # noqa: E402

DTYPE = torch.float32
SEMIRINGS = ["abs", "log", "entropy", "log_entropy", "max_plus", "max_product"]
WORKLOADS = ["mlp_4x256", "bert_L2_H128"]


def mlp():
    torch.manual_seed(0)
    layers = []
    for _ in range(4):
        layers += [torch.nn.Linear(256, 256), torch.nn.Tanh()]
    model = torch.nn.Sequential(*layers).to(DTYPE)
    x = torch.randn(64, 256, dtype=DTYPE, requires_grad=True)
    return model(x).sum(), x, list(model.parameters()), None


def bert():
    shape = M.BertShape(layers=2, hidden=128, heads=4, intermediate=512, vocab=1000, positions=64)
    model, data = M.bert_model(DTYPE, shape, batch=4, seq=32)
    captured = []
    handle = model.word.register_forward_hook(lambda m, args, out: captured.append(out))
    loss = model(*data)
    handle.remove()
    return loss, captured[0], list(model.parameters()), 2


def build(workload: str):
    return {"mlp_4x256": mlp, "bert_L2_H128": bert}[workload]()


def runs(workload: str) -> dict:
    """name: a function that runs it once (the graph kept)."""
    loss, at, params, rows = build(workload)

    def semiring(name: str, create_graph: bool):
        K = S.resolve(name)

        def run():
            (m,) = torch.autograd.grad(loss, at, semiring=K, retain_graph=True, create_graph=create_graph)
            if not create_graph:
                return m
            value = K.finalize(K.sum(m, [rows]) if rows is not None else m)
            value = torch.where(value.isfinite(), value, 0).mean()
            return torch.autograd.grad(value, params, allow_unused=True, retain_graph=True)

        return run

    def ordinary():
        (g,) = torch.autograd.grad(loss, at, retain_graph=True, create_graph=True)
        return torch.autograd.grad(g.square().sum(), params, allow_unused=True, retain_graph=True)

    fns = {"ordinary": ordinary}
    for name in SEMIRINGS:
        fns[name] = semiring(name, True)
        fns[f"{name} (no create_graph)"] = semiring(name, False)
    return fns


def peak_of(workload: str, name: str) -> None:
    run = runs(workload)[name]
    before = status_kib("VmRSS")
    held = run()
    print((status_kib("VmHWM") - before) / 1024)
    assert held is not None


def peak_mib(workload: str, name: str) -> float:
    out = subprocess.run([sys.executable, __file__, "--peak-of", workload, name],
                         capture_output=True, text=True, check=True).stdout
    return float(out.split()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--workloads", nargs="*", default=WORKLOADS, choices=WORKLOADS)
    p.add_argument("--json", type=Path, help="also write the rows to this file")
    p.add_argument("--peak-of", nargs=2, metavar=("WORKLOAD", "NAME"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.peak_of:
        peak_of(*args.peak_of)
        return
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, float32")
    rows = []
    for workload in args.workloads:
        fns = runs(workload)
        times = best_times(fns, args.repeat)
        base = times["ordinary"]
        print(f"\n{workload}: semiring backward with create_graph, then the backward of the finalized "
              f"result, against ordinary double backward")
        print(f"{'':12} {'ms':>9} {'ratio':>8} {'no create_graph ms':>19} {'peak MiB':>9}")
        peak = peak_mib(workload, "ordinary")
        rows.append({"workload": workload, "semiring": "ordinary", "ms": base * 1e3, "ratio": 1.0, "peak_mib": peak})
        print(f"{'ordinary':12} {base * 1e3:9.1f} {1.0:7.2f}x {'':>19} {peak:9.1f}", flush=True)
        for name in SEMIRINGS:
            t, alone, peak = times[name], times[f"{name} (no create_graph)"], peak_mib(workload, name)
            rows.append({"workload": workload, "semiring": name, "ms": t * 1e3, "ratio": t / base,
                         "no_create_graph_ms": alone * 1e3, "peak_mib": peak})
            print(f"{name:12} {t * 1e3:9.1f} {t / base:7.2f}x {alone * 1e3:19.1f} {peak:9.1f}", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"torch": torch.__version__, "threads": torch.get_num_threads(),
                                         "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
