"""examples/decoder/sharded.py: the decoder analysis split across two gloo processes gives exactly
the tables of one process (SmolLM2, a few prompts, one thread per process in both runs)."""
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from conftest import REPO, free_port

sys.path.insert(0, str(REPO / "examples" / "decoder"))
import sharded  # noqa: E402
import verb_agreement  # noqa: E402

WORLD, PROMPTS = 2, 5


def _setup():
    torch.set_num_threads(1)
    tokenizer, model = verb_agreement.load("sdpa")
    verbs = verb_agreement.verb_ids(tokenizer)
    return model, verbs, verb_agreement.prompts(tokenizer, PROMPTS)


def _worker(rank: int, port: int, results) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo",
                      USE_LIBUV="0")
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    try:
        model, verbs, ps = _setup()
        merged = sharded.gather(*verb_agreement.analyse(model, verbs, ps, range(rank, len(ps), WORLD)))
        if rank == 0:
            results["merged"] = merged
    finally:
        dist.destroy_process_group()


def test_two_processes_give_the_one_process_tables():
    with mp.Manager() as manager:
        results = manager.dict()
        mp.spawn(_worker, args=(free_port(), results), nprocs=WORLD, join=True)
        right, rows, entropies = results["merged"]
    threads = torch.get_num_threads()
    try:
        model, verbs, ps = _setup()
        alone = verb_agreement.analyse(model, verbs, ps, range(len(ps)))
    finally:
        torch.set_num_threads(threads)
    assert right == alone[0]
    assert sum(right.values()) >= 2  # some prompts analysed
    assert rows == alone[1]  # every field, the path values bit for bit
    assert entropies.keys() == alone[2].keys()
    for i, e in entropies.items():
        assert torch.equal(e, alone[2][i]), i
