"""What the k best paths cost (PathRecord.paths) against the top path alone (PathRecord.path).

float32, this machine's threads, the BERT-style encoder of tests/reference_models.py in the
shape of bert_uncased_L-6_H-512_A-8, one sequence of 128 tokens, the classification loss; one
backward in the semiring inside record_paths(). From every token's word embedding (the output of
the word embedding, at the unit with the best value of that token), the top path and the k
best paths (default k = 8): seconds for all tokens, side by side in one run (best of --repeat
interleaved rounds), and their ratios. The k best paths are found by one call for all tokens
(one search, which ranks each element the paths pass once), by a call per token, and the top
paths by path() per token and by paths_from() with k = 1 for all tokens.

    python3 scripts/semiring run -- python benchmarks/best_paths.py [--k 8] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.autograd import semiring as S

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import reference_models as M  # noqa: E402


def recorded(semiring: str, seq: int):
    """The record of one backward, its leaf (the word embedding's output, (1, seq, hidden), as
    inputs_embeds would be) and the finalized result at it."""
    model, data = M.bert_model(torch.float32, M.BertShape(), 1, seq)
    for p in model.parameters():
        p.requires_grad_(False)
    words = model.word(data[0]).detach().requires_grad_()
    handle = model.word.register_forward_hook(lambda m, args, out: words)
    with S.record_paths(model) as rec:
        loss = model(*data)
        (g,) = torch.autograd.grad(loss, words, semiring=semiring)
    handle.remove()
    return rec, words, S.builtin_semirings[semiring].finalize(g)


def where(step) -> object:
    """A step's node; a fused node's stages (nodes of its composition, run again for each walk)
    by their names."""
    return step.node if step.within is None else (step.module, step.within, step.name)


def measure(semiring: str, k: int, seq: int, repeat: int) -> dict:
    """One row: the times of the four kinds, side by side, and how the k paths share their steps."""
    rec, words, final = recorded(semiring, seq)
    units = final[0].argmax(-1).tolist()
    starts = [(0, t, u) for t, u in enumerate(units)]

    kinds = {
        "top": lambda: [rec.path(words, i) for i in starts],  # one path() per token
        "best": lambda: rec.paths_from(words, starts, k),  # every token's k best, one search
        "best_each": lambda: [rec.paths(words, i, k) for i in starts],  # a search per token
        "top_shared": lambda: rec.paths_from(words, starts, 1),  # k = 1, one search
    }
    times = {name: [] for name in kinds}
    found = {}
    for _ in range(repeat):
        for name, fn in kinds.items():
            t0 = time.perf_counter()
            found[name] = fn()
            times[name].append(time.perf_counter() - t0)
    tops, bests = found["top"], found["best"]
    for one, many, each, shared in zip(tops, bests, found["best_each"], found["top_shared"]):
        # The first of the k best is the top path; one search finds what a search per token does.
        if not many[0].steps == one.steps == shared[0].steps:
            raise SystemExit("the first of the k best paths is not the top path")
        if [p.to_dict() for p in many] != [p.to_dict() for p in each]:
            raise SystemExit("one search and a search per token found different paths")
    gaps = [m[1].value / m[0].value if semiring == "max_product" else m[1].value - m[0].value
            for m in bests if len(m) > 1]
    # How much of their way the k paths share: the elements they pass, counted once, over
    # the steps of all of them; and the step at which each leaves the top path.
    passed = [len({(where(s), s.output, s.index) for path in m for s in path.steps})
              / sum(len(path.steps) for path in m) for m in bests]
    leaves = [next((i for i, (a, b) in enumerate(zip(path.steps, m[0].steps))
                    if (where(a), a.index) != (where(b), b.index)), len(path.steps))
              for m in bests for path in m[1:]]
    r = {"semiring": semiring, "k": k, "tokens": len(starts), "top_s": min(times["top"]),
         "best_s": min(times["best"]), "best_each_s": min(times["best_each"]),
         "top_shared_s": min(times["top_shared"]), "steps": statistics.mean(len(t.steps) for t in tops),
         "paths": sum(len(m) for m in bests), "second_to_first": statistics.median(gaps) if gaps else None,
         "distinct_steps": statistics.mean(passed), "leaves_top_at": statistics.median(leaves)}
    r["ratio"] = r["best_s"] / r["top_s"]
    r["ratio_each"] = r["best_each_s"] / r["top_s"]
    r["ratio_shared"] = r["best_s"] / r["top_shared_s"]
    return r


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--k", type=int, default=8)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", type=Path, help="also write the rows to this file")
    args = p.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, float32, BERT-style encoder L6 H512, "
          f"sequence {args.seq}: from every token's best word-embedding unit, the top path and the {args.k} best")
    print(f"{'semiring':12} {'top s':>7} {f'{args.k} best s':>9} {'ratio':>7} {'each s':>7} {'ratio':>7} "
          f"{'top 1 s':>8} {'ratio':>7} {'steps':>6} {'paths':>6} {'2nd/1st':>8} {'distinct':>9} {'leaves at':>9}")
    rows = []
    for semiring in ("max_product", "max_plus"):
        r = measure(semiring, args.k, args.seq, args.repeat)
        rows.append(r)
        gap = "-" if r["second_to_first"] is None else f"{r['second_to_first']:.3g}"
        print(f"{semiring:12} {r['top_s']:7.2f} {r['best_s']:9.2f} {r['ratio']:6.2f}x {r['best_each_s']:7.2f} "
              f"{r['ratio_each']:6.2f}x {r['top_shared_s']:8.2f} {r['ratio_shared']:6.2f}x {r['steps']:6.0f} "
              f"{r['paths']:6d} {gap:>8} {r['distinct_steps']:9.2f} {r['leaves_top_at']:9.0f}", flush=True)
    print(f"top: path() from each token; {args.k} best: paths_from() every token (one search), "
          f"and its ratio to top; each: paths() called per token, and its ratio to top; "
          f"top 1: paths_from() every token with k = 1 (the top paths, by one search), and {args.k} best's ratio "
          "to it")
    print("steps: of a top path (mean); 2nd/1st: the median over tokens of the second path's value over the "
          "first's (max_product), or their difference in log (max_plus); distinct: the steps of a token's k "
          "paths, each counted once, as a fraction of all their steps (mean over tokens); leaves at: "
          "the step at which a path other than the first leaves the top path (median)")
    if args.json:
        args.json.write_text(json.dumps({"torch": torch.__version__, "threads": torch.get_num_threads(),
                                         "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
