"""Subject-verb agreement on a pretrained decoder (SmolLM2-135M-Instruct, smollm2.py).

The prompts are the sentences of examples/paper/agreement.py cut before the verb ("The keys to
the cabinet"), 0-4 attractors of the other number between the subject and the verb; the model
is right when its next-token logit of the verb that agrees (" is" / " are") exceeds the other's,
and the scalar every backward starts from is that difference. Per prompt: where the top path
(max_product) leaves each layer's residual streams at the subject, the attractors and the last
token (components.py: query, key and value heads, the MLP's gate and up, the skip connection),
and the gradient-graph entropy (log_entropy, float32) of every token's embedding.

    python3 scripts/semiring run -- python examples/decoder/verb_agreement.py --out out/decoder
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch
from torch import Tensor
from torch.autograd import semiring as S

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "paper"))
import components  # noqa: E402
import smollm2  # noqa: E402
from agreement import generate, VERBS  # noqa: E402


@dataclass
class Prompt:
    ids: Tensor  # (1, T)
    tokens: list[str]
    plural: bool
    subject: int  # token positions (a word's last token)
    attractors: list[int]

    @property
    def last(self) -> int:
        return self.ids.shape[1] - 1


def prompts(tokenizer, n: int, seed: int = 0) -> list[Prompt]:
    out = []
    for s in generate(n, seed):
        words = s.words[: s.words.index("[MASK]")]
        ids, ends = [], []
        for i, w in enumerate(words):
            ids += tokenizer((w.capitalize() if i == 0 else " " + w), add_special_tokens=False).input_ids
            ends.append(len(ids) - 1)
        out.append(Prompt(torch.tensor([ids]), [tokenizer.decode([t]) for t in ids], s.plural,
                          ends[s.subject], [ends[a] for a in s.attractors]))
    return out


def verb_ids(tokenizer) -> tuple[int, int]:
    return tuple(tokenizer(" " + v, add_special_tokens=False).input_ids[0] for v in VERBS)


def margin(model, p: Prompt, verbs: tuple[int, int], embeds: Tensor | None = None) -> Tensor:
    """The agreeing verb's next-token logit minus the other's."""
    logits = (model(p.ids, logits_to_keep=1) if embeds is None
              else model(inputs_embeds=embeds, logits_to_keep=1)).logits[0, -1]
    right, wrong = (verbs[1], verbs[0]) if p.plural else verbs
    return logits[right] - logits[wrong]


def embed(model, p: Prompt) -> Tensor:
    return model.model.embed_tokens(p.ids).detach().requires_grad_()


def token_entropy(model, p: Prompt, verbs) -> Tensor:
    """(T,): the gradient-graph entropy of each token's embedding row, in nats (log_entropy)."""
    embeds = embed(model, p)
    (m,) = torch.autograd.grad(margin(model, p, verbs, embeds), embeds, semiring="log_entropy")
    return S.log_entropy.finalize(S.log_entropy.sum(m[0], [1]))


def analyse(model, verbs, ps: list[Prompt], indices: Sequence[int], log=None) -> tuple[dict, list, dict]:
    """For the prompts ``indices`` of ``ps``: whether the model answers each right, and for those it
    does, the component rows (their ``prompt`` is the index in ``ps``) and the tokens' entropies."""
    right, rows, entropies = {}, [], {}
    for n, i in enumerate(indices):
        p = ps[i]
        with torch.no_grad():
            right[i] = float(margin(model, p, verbs)) > 0
        if right[i]:
            positions = sorted({p.subject, *p.attractors, p.last})

            # From the input embeddings (a leaf that requires grad; the weights do not).
            def scalar(p: Prompt = p) -> Tensor:
                return margin(model, p, verbs, embed(model, p))

            rows += components.component_rows(model, scalar, p.tokens, prompt=i, positions=positions)
            entropies[i] = token_entropy(model, p, verbs)
        if log is not None and (n + 1) % 10 == 0:
            log(f"  {n + 1}/{len(indices)} prompts")
    return right, rows, entropies


def run(out: Path, sentences: int, log=print, attn: str = "sdpa") -> dict:
    started = time.perf_counter()
    tokenizer, model = load(attn)
    verbs = verb_ids(tokenizer)
    ps = prompts(tokenizer, sentences)
    right, rows, entropies = analyse(model, verbs, ps, range(len(ps)), log)
    result = report(out, model, verbs, ps, right, rows, entropies, log, attn)
    result["seconds"] = time.perf_counter() - started
    return result


def load(attn: str):
    tokenizer, model = smollm2.load(attn)
    for p in model.parameters():
        p.requires_grad_(False)
    return tokenizer, model


def report(out: Path, model, verbs, ps: list[Prompt], right: dict, rows: list, entropies: dict, log,
           attn: str) -> dict:
    """Accuracy, the table (CSV), and the figures, from what :func:`analyse` returned for every prompt."""
    accuracy = sum(right.values()) / len(ps)
    by_k = []
    for k in range(5):
        of_k = [right[i] for i, p in enumerate(ps) if len(p.attractors) == k]
        by_k.append(f"{k}: {sum(of_k) / max(1, len(of_k)):.2f}")
    log(f"SmolLM2-135M-Instruct ({attn} attention), {len(ps)} prompts: agreement accuracy {accuracy:.3f} "
        f"(by attractors: {', '.join(by_k)})")
    lay = components.layout(model)
    layers = len(model.get_submodule(lay.layers))
    correct = [i for i in range(len(ps)) if right[i]]
    out.mkdir(parents=True, exist_ok=True)
    csv = out / "decoder_components.csv"
    components.rows_to_csv(rows, csv)
    groups = {"subject": lambda r: r.position == ps[r.prompt].subject,
              "attractors": lambda r: r.position in ps[r.prompt].attractors,
              "last token": lambda r: r.position == ps[r.prompt].last}
    heat = out / "decoder_components.png"
    components.heatmap_figure(rows, lay, layers, groups, heat,
                              f"SmolLM2-135M: where the top path leaves each layer's residual streams "
                              f"({len(correct)} correctly answered agreement prompts)")
    flow = out / "decoder_branches.png"
    branch_figure(rows, lay, layers, groups["subject"], flow)
    ent = out / "decoder_entropy.png"
    entropy_figure([ps[i] for i in correct], [entropies[i] for i in correct], ent)
    # The path drawn: from the subject of the first prompt with the most attractors.
    example = max((ps[i] for i in correct), key=lambda p: len(p.attractors))
    path_png = out / "decoder_path.png"
    draw_path(model, example, verbs, lay, layers, path_png)
    table = branch_table(rows, lay, layers, groups)
    return {"accuracy": accuracy, "prompts": len(ps), "analysed": len(correct), "rows": len(rows),
            "csv": csv, "pngs": [heat, flow, ent, path_png], "table": table}


def branch_table(rows, lay, layers: int, groups) -> str:
    cols = lay.columns()
    lines = []
    for name, select in groups.items():
        frac, _ = components.fractions(rows, lay, layers, select)
        lines.append(f"  {name}: layer " + " ".join(f"{'attn' if s == 'attention' else s:>4}:{c:>5}" for s, c in cols))
        for layer in range(layers):
            lines.append(f"  {'':{len(name)}}  {layer:5} " + " ".join(f"{float(v):10.2f}" for v in frac[layer]))
    return "\n".join(lines)


def branch_figure(rows, lay, layers: int, select, png: Path) -> None:
    """At the subject: per layer, the fraction of prompts whose top path leaves the stream
    entering attention by each component, with 95% Wilson intervals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = lay.columns()
    frac, n = components.fractions(rows, lay, layers, select)
    lo, hi = components.wilson(frac, n)
    fig, ax = plt.subplots(figsize=(8, 3.6), dpi=150)
    for c, (stream, comp) in enumerate(cols):
        if stream != "attention":
            continue
        below, above = (frac[:, c] - lo[:, c]).clamp(min=0), (hi[:, c] - frac[:, c]).clamp(min=0)
        ax.errorbar(range(layers), frac[:, c], yerr=[below, above],
                    label=comp, marker="o", markersize=3, capsize=2, linewidth=1)
    ax.set_xlabel("layer")
    ax.set_ylabel("fraction of prompts")
    ax.set_ylim(-0.02, 1.02)
    ax.legend(fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.16))
    ax.set_title("SmolLM2-135M, the subject token: where the top path leaves the residual stream "
                 "entering attention (95% intervals)", fontsize=8)
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)


def entropy_figure(ps: list[Prompt], entropies: list[Tensor], png: Path) -> None:
    """Gradient-graph entropy of each token against the prompt's length, and the mean per length."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6), dpi=150)
    by_length: dict[int, list[float]] = {}
    for p, e in zip(ps, entropies):
        n = p.ids.shape[1]
        ax.scatter([n] * len(e), e.tolist(), s=3, alpha=0.25, color="tab:blue")
        by_length.setdefault(n, []).append(float(e.mean()))
    xs = sorted(by_length)
    ax.plot(xs, [sum(by_length[x]) / len(by_length[x]) for x in xs], color="tab:red", marker="o",
            markersize=3, label="mean over tokens and prompts")
    ax.set_xlabel("prompt length (tokens)")
    ax.set_ylabel("entropy of a token's paths (nats)")
    ax.legend(fontsize=7)
    ax.set_title("SmolLM2-135M: gradient-graph entropy per token (log_entropy)", fontsize=9)
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)


def draw_path(model, p: Prompt, verbs, lay, layers: int, png: Path) -> None:
    """The top path from the subject token's strongest embedding unit, over the prompt's tokens."""
    embeds = embed(model, p)
    with S.record_paths(model) as rec:
        (g,) = torch.autograd.grad(margin(model, p, verbs, embeds), embeds, semiring="max_product")
    unit = int(S.max_product.finalize(g)[0, p.subject].argmax())
    path = rec.path(embeds, (0, p.subject, unit))
    components.path_figure(path, lay, p.tokens, layers, png,
                           f"SmolLM2-135M: the top path from {p.tokens[p.subject]!r} (unit {unit}) "
                           f"to the verb's logit margin")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("out/decoder"))
    ap.add_argument("--sentences", type=int, default=100)
    ap.add_argument("--attention", default="sdpa", choices=smollm2.ATTENTION)
    args = ap.parse_args()
    result = run(args.out, args.sentences, attn=args.attention)
    print(result["table"])
    for png in result["pngs"]:
        print(f"wrote {png.resolve()}")


if __name__ == "__main__":
    main()
