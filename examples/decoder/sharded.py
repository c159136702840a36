"""The decoder agreement analysis (verb_agreement.py) over many prompts, across processes.

Launched by torchrun: each rank analyses the prompts rank, rank + world, ... (gloo on CPU, nccl
where CUDA is available); rank 0 gathers every rank's answers, component rows and entropies, puts
them in prompt order, and writes the same table and figures one process would.

    python3 scripts/semiring run -- torchrun --nproc-per-node 2 \
        examples/decoder/sharded.py --prompts 40 --out out/sharded
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent))
import verb_agreement  # noqa: E402


def gather(right: dict, rows: list, entropies: dict) -> tuple[dict, list, dict] | None:
    """Every rank's results, merged on rank 0 in prompt order (None on the other ranks)."""
    parts = [None] * dist.get_world_size() if dist.get_rank() == 0 else None
    dist.gather_object((right, rows, entropies), parts, dst=0)
    if parts is None:
        return None
    merged_right, merged_rows, merged_entropies = {}, [], {}
    for r, rs, e in parts:
        merged_right.update(r)
        merged_rows += rs
        merged_entropies.update(e)
    # Stable: each prompt's rows keep the order one process writes them in.
    merged_rows.sort(key=lambda row: row.prompt)
    return merged_right, merged_rows, merged_entropies


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=40)
    ap.add_argument("--out", type=Path, default=Path("out/sharded"))
    ap.add_argument("--attention", default="sdpa", choices=("eager", "sdpa"))
    args = ap.parse_args()
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    started = time.perf_counter()

    def log(line: str) -> None:
        print(f"[rank {rank}/{world} {time.perf_counter() - started:6.1f} s] {line}", flush=True)

    try:
        tokenizer, model = verb_agreement.load(args.attention)
        verbs = verb_agreement.verb_ids(tokenizer)
        ps = verb_agreement.prompts(tokenizer, args.prompts)
        mine = range(rank, len(ps), world)
        log(f"analysing {len(mine)} of {len(ps)} prompts")
        merged = gather(*verb_agreement.analyse(model, verbs, ps, mine, log))
        if merged is not None:
            result = verb_agreement.report(args.out, model, verbs, ps, *merged, log, args.attention)
            log(f"{result['rows']} rows in {result['csv'].resolve()}")
            for png in result["pngs"]:
                print(f"wrote {png.resolve()}")
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    # The build has no libuv (Debian's configuration): TCPStore's classic backend.
    os.environ.setdefault("USE_LIBUV", "0")
    main()
