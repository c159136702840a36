"""docs/own-model.md's code, run as one script on a small Llama saved with its tokenizer.

The page loads a model from MODEL_DIR (a Hub name by default); here it is a randomly
initialised Llama-architecture decoder with a word-level tokenizer, written by
save_pretrained into a temporary directory, so that loading, coverage, the top paths and the
entropy run exactly as the page shows them, offline.
"""
import os
import re
import subprocess
import sys

import pytest

from conftest import REPO

PAGE = REPO / "docs" / "own-model.md"
WORDS = ["The", "keys", "to", "the", "cabinet", "is", "are", "on", "table"]


def page_code() -> str:
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)
    assert len(blocks) >= 4, "docs/own-model.md lost its code blocks"
    return "\n".join(blocks)


def save_small_llama(directory) -> None:
    import torch
    import transformers as T
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {w: i for i, w in enumerate(["[UNK]", *WORDS])}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    T.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]").save_pretrained(directory)
    torch.manual_seed(0)
    config = T.LlamaConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, intermediate_size=64,
                           max_position_embeddings=32)
    T.LlamaForCausalLM(config).save_pretrained(directory)


def test_the_pages_code_runs_on_a_saved_llama(tmp_path):
    pytest.importorskip("transformers")
    save_small_llama(tmp_path / "model")
    script = tmp_path / "own_model.py"
    script.write_text(page_code())
    env = {**os.environ, "MODEL_DIR": str(tmp_path / "model"), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1"}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    # One top path value per token of "The keys to the cabinet", then the path read from it.
    assert sum(" top path " in line for line in lines) == 5, out.stdout
    steps = next(line for line in lines if " steps, value " in line)
    value, product = (float(v) for v in re.findall(r"(?:value|product) (\S+)", steps))
    assert value == pytest.approx(product, rel=1e-3)
    assert "model.layers.1" in out.stdout and "lm_head" in out.stdout
    entropy = next(line for line in lines if line.startswith("entropy per token:"))
    values = [float(v) for v in re.findall(r"-?\d+\.\d+", entropy)]
    assert len(values) == 5 and all(v > 0 for v in values), entropy
