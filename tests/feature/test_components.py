"""examples/paper/components.py: where the top path leaves each layer's residual streams, on a
Llama-architecture decoder (eager and sdpa attention) and on a BERT encoder, random weights."""
import sys

import pytest
import torch

from conftest import REPO

sys.path.insert(0, str(REPO / "examples" / "paper"))
import components  # noqa: E402

T = 6


def _llama(attn: str):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=48, num_hidden_layers=3,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
                         attn_implementation=attn)
    return LlamaForCausalLM(config).eval()


def _bert():
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    config = BertConfig(vocab_size=50, hidden_size=32, intermediate_size=48, num_hidden_layers=3,
                        num_attention_heads=4, max_position_embeddings=32, attn_implementation="eager",
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    return BertForSequenceClassification(config).eval()


MODELS = {"llama_eager": lambda: _llama("eager"), "llama_sdpa": lambda: _llama("sdpa"), "bert": _bert}


def _scalar(model, ids):
    def run():
        embeds = model.get_input_embeddings()(ids).detach().requires_grad_()
        out = model(inputs_embeds=embeds).logits
        return out[0, -1, 7] if out.dim() == 3 else out[0, 1]
    return run


def _rows(model):
    ids = torch.arange(3, 3 + T).unsqueeze(0)
    return components.component_rows(model, _scalar(model, ids), [f"t{i}" for i in range(T)])


@pytest.mark.parametrize("name", MODELS)
def test_every_stream_position_and_layer_has_a_row_that_holds(name):
    model = MODELS[name]()
    lay = components.layout(model)
    rows = _rows(model)
    layers = len(model.get_submodule(lay.layers))
    decoder = name.startswith("llama")
    got = {(r.position, r.layer, r.stream) for r in rows}
    assert got <= {(t, layer, s) for t in range(T) for layer in range(layers) for s in components.STREAMS}
    # Every layer's streams at the position the output reads (the decoder's last token, BERT's
    # [CLS] through the pooler), and every position entering the first layer; a position with no
    # path (the last layer's MLP elsewhere) has no row.
    read = T - 1 if decoder else 0
    assert {(read, layer, s) for layer in range(layers) for s in components.STREAMS} <= got
    assert {(t, 0, "attention") for t in range(T)} <= got
    assert (0 if decoder else T - 1, layers - 1, "mlp") not in got
    for r in rows:
        assert (r.stream, r.component) in lay.columns(), r
        assert r.value == r.value and abs(r.value) < float("inf"), r
        if r.component in ("query", "key", "value"):
            assert 0 <= r.head < (lay.heads if r.component == "query" else lay.kv_heads), r
            assert r.to_position is not None, r
            if decoder:  # causal: a key or value of token t reaches rows t..T-1, a query its own row
                assert (r.to_position == r.position) if r.component == "query" else (r.to_position >= r.position), r
            if r.component != "value":
                head, row, col = r.weight
                assert (row if r.component == "query" else col) == r.position, r
                assert row == r.to_position, r


def test_eager_and_sdpa_give_the_same_rows():
    eager, sdpa = _rows(MODELS["llama_eager"]()), _rows(MODELS["llama_sdpa"]())
    assert [(r.position, r.layer, r.stream, r.component, r.head, r.weight, r.to_position) for r in eager] == \
        [(r.position, r.layer, r.stream, r.component, r.head, r.weight, r.to_position) for r in sdpa]
    torch.testing.assert_close(torch.tensor([r.value for r in eager]), torch.tensor([r.value for r in sdpa]),
                               rtol=1e-4, atol=0)


def test_a_silenced_component_is_never_credited():
    # With the attention's output projection zero, no path goes through attention: every path
    # from a stream entering attention leaves by the skip connection. Likewise the MLP.
    model = MODELS["llama_sdpa"]()
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
    rows = _rows(model)
    assert rows and {r.component for r in rows} == {"skip"}


def test_rows_to_csv_and_figures(tmp_path):
    model = MODELS["bert"]()
    rows = _rows(model)
    lay = components.layout(model)
    components.rows_to_csv(rows, tmp_path / "rows.csv")
    assert (tmp_path / "rows.csv").read_text().count("\n") == len(rows) + 1
    components.heatmap_figure(rows, lay, 3, {"all": lambda r: True, "first": lambda r: r.position == 0},
                              tmp_path / "heat.png", "test")
    frac, n = components.fractions(rows, lay, 3, lambda r: True)
    # Each stream's components and skip share out its prompts.
    for s in components.STREAMS:
        cols = [i for i, (stream, _) in enumerate(lay.columns()) if stream == s]
        torch.testing.assert_close(frac[:, cols].sum(1), torch.ones(3))
    assert (tmp_path / "heat.png").stat().st_size > 0
