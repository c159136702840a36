"""A pretrained decoder at real prompt lengths: semiring backward against ordinary backward.

SmolLM2-135M-Instruct (examples/decoder/smollm2.py: 30 layers, width 576, grouped-query
attention), float32, this machine's threads. For each prompt length and attention
implementation (eager, sdpa) it runs, each in a fresh process, one forward and one backward from
the next-token logit at the last position (the model's greedy choice) to the input embeddings:

* ordinary: torch.autograd.grad, the baseline;
* max_product, log_entropy: the same backward in that semiring;
* max_product+paths: max_product under record_paths(model), the top path recovered from the
  last token's strongest embedding unit (what the path analyses run).

and prints, per row: the backward's time (best of --repeat runs at the shorter lengths, one run
at the longest), its ratio to ordinary backward's, the peak resident set of the process above its
resident set before the forward (the forward's saved tensors included, as a user pays them), and
that peak's ratio to ordinary's. The prompt is English text (the docstrings of a few Python
standard modules) cut to the length. Writes the table as JSON with --json.

    python3 scripts/semiring run -- python benchmarks/decoder_lengths.py [--lengths 128 512 2048]
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


def one(attn: str, length: int, kind: str, repeat: int) -> dict:
    """One row, in this process: the model loaded, then the measured forward and backward."""
    import smollm2

    tokenizer, model = smollm2.load(attn)
    for p in model.parameters():
        p.requires_grad_(False)
    ids = prompt_ids(tokenizer, length)
    with torch.no_grad():
        target = int(model(ids, logits_to_keep=1).logits[0, -1].argmax())
    times = []
    base = status_kib("VmRSS")
    for _ in range(repeat):
        embeds = model.model.embed_tokens(ids).detach().requires_grad_()
        if kind == "max_product+paths":
            with torch.autograd.semiring.record_paths(model) as rec:
                logit = model(inputs_embeds=embeds, logits_to_keep=1).logits[0, -1, target]
                t0 = time.perf_counter()
                (g,) = torch.autograd.grad(logit, embeds, semiring="max_product")
                top = g[0, -1, :, 0].argmax()
                path = rec.path(embeds, (0, length - 1, int(top)))
                times.append(time.perf_counter() - t0)
            steps = len(path.steps)
        else:
            logit = model(inputs_embeds=embeds, logits_to_keep=1).logits[0, -1, target]
            t0 = time.perf_counter()
            semiring = None if kind == "ordinary" else kind
            torch.autograd.grad(logit, embeds, semiring=semiring)
            times.append(time.perf_counter() - t0)
            steps = None
        del logit
    peak = status_kib("VmHWM") - base
    return {"attention": attn, "length": length, "kind": kind, "seconds": min(times),
            "peak_mib": peak / 1024, "path_steps": steps}


def available_kib() -> int:
    with open("/proc/meminfo") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("MemAvailable:"))


def row_in_subprocess(attn: str, length: int, kind: str, repeat: int) -> dict:
    """One row in a fresh process, stopped (and reported) when its resident set would take more
    than 90% of the memory available when it started, before the kernel's OOM killer picks a
    process."""
    limit = available_kib() * 9 // 10
    row = {"attention": attn, "length": length, "kind": kind}
    proc = subprocess.Popen([sys.executable, __file__, "--one", attn, str(length), kind, str(repeat)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = 0
    while proc.poll() is None:
        try:
            rss = status_kib("VmRSS", proc.pid)
        except (FileNotFoundError, RuntimeError):  # exited, or a zombie without VmRSS
            rss = 0
        peak = max(peak, rss)
        if rss > limit:
            proc.kill()
            proc.wait()
            return {**row, "error": f"stopped at {rss / 2**20:.1f} GiB resident, over 90% of the "
                                    f"{limit / 0.9 / 2**20:.1f} GiB available"}
        time.sleep(0.2)
    out, err = proc.communicate()
    if proc.returncode != 0:
        return {**row, "error": (err.strip().splitlines() or ["exit status %d" % proc.returncode])[-1]}
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=[128, 512, 2048])
    ap.add_argument("--attention", nargs="+", default=list(ATTENTION), choices=ATTENTION)
    ap.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    ap.add_argument("--repeat", type=int, default=3, help="runs per row below the longest length")
    ap.add_argument("--json", type=Path, help="write the rows here")
    ap.add_argument("--one", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        attn, length, kind, repeat = args.one
        print(json.dumps(one(attn, int(length), kind, int(repeat))))
        return
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, SmolLM2-135M-Instruct (Q4_1, float32); "
          "backward from the last position's next-token logit to the input embeddings", flush=True)
    print(f"{'attention':>9} {'tokens':>6} {'backward':<18} {'seconds':>9} {'x ordinary':>10} "
          f"{'peak MiB':>9} {'x ordinary':>10}", flush=True)
    rows = []
    longest = max(args.lengths)
    for length in sorted(args.lengths):
        for attn in args.attention:
            base = None
            for kind in ("ordinary", *[k for k in args.kinds if k != "ordinary"]):
                r = row_in_subprocess(attn, length, kind, 1 if length == longest else args.repeat)
                rows.append(r)
                if "error" in r:
                    print(f"{attn:>9} {length:>6} {kind:<18} failed: {r['error']}", flush=True)
                    continue
                if kind == "ordinary":
                    base = r
                t = r["seconds"] / base["seconds"] if base else float("nan")
                m = r["peak_mib"] / base["peak_mib"] if base else float("nan")
                print(f"{attn:>9} {length:>6} {kind:<18} {r['seconds']:>9.3f} {t:>10.2f} "
                      f"{r['peak_mib']:>9.0f} {m:>10.2f}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
