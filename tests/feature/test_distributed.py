"""The wheel is built with distributed support (c10d, gloo): DDP and Hugging Face transformers work."""
import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from conftest import free_port

WORLD = 2


def _ddp_worker(rank: int, port: int, results) -> None:
    # Loopback only: the build root's hostname need not resolve.
    # The build has no libuv (Debian's configuration): TCPStore's classic backend.
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo",
                      USE_LIBUV="0")
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    try:
        torch.manual_seed(0)  # the same initial weights on every rank
        model = torch.nn.Linear(3, 2).double()
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        x = torch.full((4, 3), float(rank + 1), dtype=torch.float64)
        ddp(x).pow(2).sum().backward()
        grads = [p.grad.clone() for p in model.parameters()]
        # DDP's all-reduce is a C++ hook: a backward in a semiring must refuse it, not sum messages.
        try:
            ddp(x).sum().backward(semiring="log")
            refusal = ""
        except RuntimeError as e:
            refusal = str(e)
        results[rank] = (grads, refusal)
    finally:
        dist.destroy_process_group()


def test_ddp_on_gloo_averages_gradients_and_refuses_semirings():
    assert dist.is_available() and dist.is_gloo_available()
    with mp.Manager() as manager:
        results = manager.dict()
        mp.spawn(_ddp_worker, args=(free_port(), results), nprocs=WORLD, join=True)
        results = dict(results)
    # The average of what each rank computes alone.
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2).double()
    expected = [torch.zeros_like(p) for p in model.parameters()]
    for rank in range(WORLD):
        model.zero_grad()
        model(torch.full((4, 3), float(rank + 1), dtype=torch.float64)).pow(2).sum().backward()
        for e, p in zip(expected, model.parameters()):
            e += p.grad / WORLD
    for rank in range(WORLD):
        grads, refusal = results[rank]
        for g, e in zip(grads, expected):
            torch.testing.assert_close(g, e)
        assert "semiring 'log' would pass its messages to a C++ hook" in refusal, refusal


@pytest.mark.parametrize("name", ["bert", "gpt2", "llama"])
def test_transformers_models_run_ordinary_backward(name, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    transformers = pytest.importorskip("transformers")
    small = dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=64, max_position_embeddings=32)
    config, model_class = {
        "bert": (transformers.BertConfig(**small), transformers.BertModel),
        "gpt2": (transformers.GPT2Config(vocab_size=64, n_embd=32, n_layer=2, n_head=4, n_positions=32),
                 transformers.GPT2LMHeadModel),
        "llama": (transformers.LlamaConfig(**small, num_key_value_heads=2), transformers.LlamaForCausalLM),
    }[name]
    torch.manual_seed(0)
    model = model_class(config)
    ids = torch.randint(0, 64, (2, 8))
    out = model(input_ids=ids)
    if name == "bert":  # the pooler's parameters reach only pooler_output
        loss = out.last_hidden_state.pow(2).mean() + out.pooler_output.sum()
    else:
        loss = out.logits.pow(2).mean()
    loss.backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert grads and all(g is not None and torch.isfinite(g).all() for g in grads)
