"""The paper's analyses (examples/paper/) on the patched build: small, seeded versions.

Section 5.1 trained here, with its qualitative result; the branch analysis on the torch.nn
reference encoder (fused query/key/value projection) and on a Hugging Face BertModel checked
against the recorded top paths; per-token entropy in float32 against float64.
"""
import math
import sys

import pytest
import torch
import torch.nn.functional as F
from torch.autograd import semiring as S

from conftest import REPO

sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "examples" / "paper"))
import analysis  # noqa: E402
import reference_models as M  # noqa: E402


def _check_flow_against_paths(flows, model, layers, run):
    """Each layer's credited branch and value at the strongest unit is the first step and the
    value of the recorded top path from that element."""
    rec, captured, _ = analysis.record(model, run, layers)
    for flow, h in zip(flows, captured):
        final = S.max_product.finalize(rec.message(h))
        assert torch.equal(flow.value, final.max(-1).values)
        b, t = 0, 1
        path = rec.path(h, (b, t, int(flow.unit[b, t])))
        assert path.value == float(flow.value[b, t])
        assert math.isclose(path.product(), path.value, rel_tol=1e-9)


def test_branch_flow_reference_encoder_fused_projection():
    model, data = M.bert_model(torch.float64)
    model.eval()
    flows = analysis.branch_flow(model, lambda: model(*data), list(model.layers))
    assert len(flows) == len(model.layers)
    for flow in flows:
        assert flow.credited.shape == data[0].shape + (4,)
        # Credited values sit at the winning branch of the strongest unit.
        real = torch.isfinite(flow.value)
        assert torch.equal(flow.credited.sum(-1)[real], flow.value[real])
        assert set(flow.branch[real].tolist()) <= {0, 1, 2, 3}
    _check_flow_against_paths(flows, model, list(model.layers), lambda: model(*data))


def test_branch_flow_and_entropy_hugging_face_bert():
    import transformers

    config = transformers.BertConfig(vocab_size=60, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=64, max_position_embeddings=16)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = transformers.BertModel(config).double().eval()
    ids = torch.randint(1, 60, (3, 7), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[2, 5:] = 0

    def scalars():
        return model(input_ids=ids, attention_mask=mask).last_hidden_state[:, 0, :3].sum(-1)

    layers = analysis.bert_layers(model)
    flows = analysis.branch_flow(model, scalars, layers)
    for flow in flows:
        # Padding takes no path (its attention weights are exactly 0); every real token does.
        assert torch.isfinite(flow.value[mask.bool()]).all()
        # Hugging Face BERT's residual stream has the four consumers of the paper.
        assert (flow.branch[mask.bool()] >= 0).all()
    _check_flow_against_paths(flows, model, layers, scalars)

    h64 = analysis.token_entropy(scalars, model.get_input_embeddings())
    model.float()
    h32 = analysis.token_entropy(scalars, model.get_input_embeddings())
    assert h32.dtype == torch.float32 and h32.shape == ids.shape
    assert torch.allclose(h32.double()[mask.bool()], h64[mask.bool()], rtol=1e-3, atol=1e-3)
    # The entropy of the paths of one row: positive where more than one path leads to it.
    assert (h64[mask.bool()] > 0).all()


@pytest.fixture(scope="module")
def synthetic_result(tmp_path_factory):
    # Section 5.1: trained here (seeded), then 200 correctly classified validation examples.
    import synthetic

    return synthetic, synthetic.run(tmp_path_factory.mktemp("synthetic"), examples=200, log=lambda line: None)


def test_synthetic_task_trains_and_draws_its_chart(synthetic_result):
    synthetic, result = synthetic_result
    assert result["accuracy"] > 0.95, result
    assert result["png"].stat().st_size > 10_000
    assert all(png.stat().st_size > 10_000 for png in result["path_pngs"])
    # The first and the repeated token have top paths (credited to one of the four branches).
    first, repeat = (synthetic.TOKEN_TYPES.index(t) for t in ("first", "repeat"))
    for means in result["means"].values():
        assert (means[[first, repeat]].sum(1) > 0).all(), result["table"]


def _winner(synthetic, result, graph: str, token: str) -> str:
    means = result["means"][graph][synthetic.TOKEN_TYPES.index(token)]
    return analysis.BRANCHES[int(means.argmax())]


def test_synthetic_task_top_path_leaves_the_repeated_token_by_the_keys_in_the_papers_graph(synthetic_result):
    # The paper's result, with softmax and layer norm built as its framework builds them.
    synthetic, result = synthetic_result
    assert _winner(synthetic, result, "brunoflow", "repeat") == "key", result["table"]
    path = result["paths"]["brunoflow"]
    # Through the key's scores and the attention weights, softmax's exp(x - logsumexp(x)).
    assert path.steps[0].module.endswith("attention.self.key")
    assert any(step.name == "ExpBackward0" for step in path.steps)


def test_synthetic_task_fused_softmax_takes_the_values_at_the_repeated_token(synthetic_result):
    # Fused softmax's Jacobian damps the key's path through an attention weight p by 1 - p:
    # the same model, the same examples, a different graph, a different answer.
    synthetic, result = synthetic_result
    assert _winner(synthetic, result, "fused", "repeat") == "value", result["table"]
    path = result["paths"]["fused"]
    # Into the weighted sum of the values, past the attention weights.
    assert path.steps[0].module.endswith("attention.self.value")
    assert not any(step.name == "SoftmaxBackward0" for step in path.steps)


def test_brunoflow_graph_changes_the_graph_not_the_values():
    torch.manual_seed(0)
    x = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    norm = torch.nn.LayerNorm(5, dtype=torch.float64)
    with analysis.brunoflow_graph():
        probs, normed = torch.nn.functional.softmax(x, dim=-1), norm(x)
        more = (x.softmax(dim=0), torch.softmax(x, 1, torch.float32), F.softmax(x, 1, 3, torch.float32))
    assert torch.allclose(probs, torch.softmax(x, -1)) and torch.allclose(normed, norm(x))
    assert torch.allclose(more[0], x.softmax(0))
    assert more[1].dtype == more[2].dtype == torch.float32
    assert probs.grad_fn.name() == "ExpBackward0" and normed.grad_fn.name() == "AddBackward0"
