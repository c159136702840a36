"""The paper's analyses (examples/paper/) on the patched build: small, seeded versions.

Section 5.1 trained here, with its qualitative result; the branch analysis on the torch.nn
reference encoder (fused query/key/value projection) and on a Hugging Face BertModel checked
against the recorded top paths; per-token entropy in float32 against float64.
"""
import math
import sys

import pytest
import torch
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
    # The first and the repeated token have top paths (credited to one of the four branches).
    first, repeat = (synthetic.TOKEN_TYPES.index(t) for t in ("first", "repeat"))
    assert (result["means"][[first, repeat]].sum(1) > 0).all(), result["table"]


@pytest.mark.xfail(strict=True, reason="not reproduced: in this setup (trained here, HF BERT's graph) the top "
                                       "path from the repeated token leaves by the values, not the paper's keys")
def test_synthetic_task_top_path_leaves_the_repeated_token_by_the_keys(synthetic_result):
    synthetic, result = synthetic_result
    repeat = result["means"][synthetic.TOKEN_TYPES.index("repeat")]
    assert int(repeat.argmax()) == analysis.BRANCHES.index("key"), result["table"]
