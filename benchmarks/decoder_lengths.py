"""A pretrained decoder at real prompt lengths: semiring backward against ordinary backward.

SmolLM2-135M-Instruct (examples/decoder/smollm2.py: 30 layers, width 576, grouped-query
attention), float32, this machine's threads. For each prompt length and attention
implementation (eager, sdpa), one forward and one backward from the next-token logit at the
last position (the model's greedy choice) to the input embeddings:

* ordinary: torch.autograd.grad, the baseline;
* max_product, log_entropy: the same backward in that semiring;
* max_product+paths: max_product under record_paths(model), the top path recovered from the
  last token's strongest embedding unit (what the path analyses run).

Time: every kind in one process, in interleaved rounds (ordinary, then each semiring, again;
--repeat rounds below the longest length, one at it), the best of each: ratios measured side
by side, so that a slower spell of the machine does not land on one row. Peak memory: each kind
once more in a fresh process, its peak resident set above the set before the forward (the
forward's saved tensors included, as a user pays them), against ordinary's. A process whose
resident set would pass 90% of the memory available is stopped and reported. The prompt is
English text (the docstrings of a few Python standard modules) cut to the length.

    python3 scripts/semiring run -- python benchmarks/decoder_lengths.py [--lengths 128 512 2048]

--json writes the rows (`scripts/semiring metrics --decoder` runs this and writes its table
into the RFC's Metrics).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "decoder"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from proc_status import status_kib  # noqa: E402

KINDS = ("ordinary", "max_product", "log_entropy", "max_product+paths")
ATTENTION = ("eager", "sdpa")


def prompt_ids(tokenizer, length: int) -> torch.Tensor:
    import collections
    import inspect
    import json as json_module
    import pathlib
    import re

    text = "\n\n".join(inspect.getdoc(m) or "" for m in (collections, re, json_module, pathlib, inspect, argparse))
    ids = tokenizer(text, add_special_tokens=False, return_tensors="pt").input_ids
    while ids.shape[1] < length:
        ids = torch.cat([ids, ids], dim=1)
    return ids[:, :length]


class Workload:
    """The model with `attn` attention and a prompt of `length` tokens, loaded once."""

    def __init__(self, attn: str, length: int) -> None:
        import smollm2

        tokenizer, self.model = smollm2.load(attn)
        for p in self.model.parameters():
            p.requires_grad_(False)
        self.ids = prompt_ids(tokenizer, length)
        with torch.no_grad():
            self.target = int(self.model(self.ids, logits_to_keep=1).logits[0, -1].argmax())

    def run(self, kind: str) -> tuple[float, int | None]:
        """One forward (untimed) and the timed backward of `kind`: seconds, and a path's steps."""
        model, length = self.model, self.ids.shape[1]
        embeds = model.model.embed_tokens(self.ids).detach().requires_grad_()
        if kind == "max_product+paths":
            with torch.autograd.semiring.record_paths(model) as rec:
                logit = model(inputs_embeds=embeds, logits_to_keep=1).logits[0, -1, self.target]
                t0 = time.perf_counter()
                (g,) = torch.autograd.grad(logit, embeds, semiring="max_product")
                top = g[0, -1, :, 0].argmax()
                path = rec.path(embeds, (0, length - 1, int(top)))
                return time.perf_counter() - t0, len(path.steps)
        logit = model(inputs_embeds=embeds, logits_to_keep=1).logits[0, -1, self.target]
        t0 = time.perf_counter()
        torch.autograd.grad(logit, embeds, semiring=None if kind == "ordinary" else kind)
        return time.perf_counter() - t0, None


def times(attn: str, length: int, kinds: list[str], rounds: int) -> dict:
    """In this process: the best time of each kind over interleaved rounds."""
    work = Workload(attn, length)
    best: dict[str, float] = {}
    steps = None
    for _ in range(rounds):
        for kind in kinds:
            t, s = work.run(kind)
            best[kind] = min(t, best.get(kind, t))
            steps = s if s is not None else steps
    return {"seconds": best, "path_steps": steps, "threads": torch.get_num_threads()}


def peak(attn: str, length: int, kind: str) -> dict:
    """In this (fresh) process: the peak resident set of one forward and backward, MiB above the
    set before the forward."""
    work = Workload(attn, length)
    base = status_kib("VmRSS")
    work.run(kind)
    return {"peak_mib": (status_kib("VmHWM") - base) / 1024}


def available_kib() -> int:
    with open("/proc/meminfo") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("MemAvailable:"))


def in_subprocess(args: list[str]) -> dict:
    """This script with `args` in a fresh process, stopped (and reported) when its resident set
    would take more than 90% of the memory available when it started, before the kernel's OOM
    killer picks a process. Its last line of output, as JSON, or {"error": why}."""
    limit = available_kib() * 9 // 10
    proc = subprocess.Popen([sys.executable, __file__, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while proc.poll() is None:
        try:
            rss = status_kib("VmRSS", proc.pid)
        except (FileNotFoundError, RuntimeError):  # exited, or a zombie without VmRSS
            rss = 0
        if rss > limit:
            proc.kill()
            proc.wait()
            return {"error": f"stopped at {rss / 2**20:.1f} GiB resident, over 90% of the "
                             f"{limit / 0.9 / 2**20:.1f} GiB available"}
        time.sleep(0.2)
    out, err = proc.communicate()
    if proc.returncode != 0:
        return {"error": (err.strip().splitlines() or ["exit status %d" % proc.returncode])[-1]}
    return json.loads(out.strip().splitlines()[-1])


def measure(attn: str, length: int, kinds: list[str], rounds: int) -> list[dict]:
    """The rows of one length and attention: times side by side, each peak in its own process.
    A kind whose peak does not fit is left out of the timed rounds."""
    peaks = {kind: in_subprocess(["--peak", attn, str(length), kind]) for kind in kinds}
    timed = [k for k in kinds if "error" not in peaks[k]]
    t = in_subprocess(["--times", attn, str(length), str(rounds), *timed]) if timed else {}
    rows = []
    for kind in kinds:
        row = {"attention": attn, "length": length, "kind": kind, **peaks[kind]}
        if "error" in t:
            row["error"] = t["error"]
        elif kind in timed:
            row.update(seconds=t["seconds"][kind], threads=t["threads"],
                       path_steps=t["path_steps"] if kind == "max_product+paths" else None)
        rows.append(row)
    return rows


def ratio(rows: list[dict], row: dict, field: str) -> float:
    base = next(r for r in rows if r["attention"] == row["attention"] and r["length"] == row["length"]
                and r["kind"] == "ordinary")
    return row[field] / base[field]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=[128, 512, 2048])
    ap.add_argument("--attention", nargs="+", default=list(ATTENTION), choices=ATTENTION)
    ap.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    ap.add_argument("--repeat", type=int, default=3, help="timed rounds below the longest length")
    ap.add_argument("--json", type=Path, help="write the rows here")
    ap.add_argument("--times", nargs="+", help=argparse.SUPPRESS)
    ap.add_argument("--peak", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.times:
        attn, length, rounds, *kinds = args.times
        print(json.dumps(times(attn, int(length), kinds, int(rounds))))
        return
    if args.peak:
        attn, length, kind = args.peak
        print(json.dumps(peak(attn, int(length), kind)))
        return
    kinds = ["ordinary", *[k for k in args.kinds if k != "ordinary"]]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, SmolLM2-135M-Instruct (Q4_1, float32); "
          "backward from the last position's next-token logit to the input embeddings", flush=True)
    print(f"{'attention':>9} {'tokens':>6} {'backward':<18} {'seconds':>9} {'x ordinary':>10} "
          f"{'peak MiB':>9} {'x ordinary':>10}", flush=True)
    rows: list[dict] = []
    longest = max(args.lengths)
    for length in sorted(args.lengths):
        for attn in args.attention:
            group = measure(attn, length, kinds, 1 if length == longest else args.repeat)
            rows += group
            for r in group:
                if "seconds" not in r:
                    print(f"{attn:>9} {length:>6} {r['kind']:<18} {r.get('error', '')}", flush=True)
                    continue
                print(f"{attn:>9} {length:>6} {r['kind']:<18} {r['seconds']:>9.3f} {ratio(rows, r, 'seconds'):>10.2f} "
                      f"{r['peak_mib']:>9.0f} {ratio(rows, r, 'peak_mib'):>10.2f}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
