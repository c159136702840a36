"""Where the top gradient path leaves each layer's residual streams, by component, for decoders
(Llama, Qwen2, SmolLM: pre-norm, grouped-query attention, gated MLPs) and encoders (BERT,
MiniLM: post-norm) alike: the paper's question (section 5) generalized.

For every position of a prompt and every layer, at the residual stream entering the layer's
attention and the one entering its MLP, the top path (``max_product``) from the stream's
strongest unit at that position is walked to the output, and credited to the component it
leaves by: a query head, a key/value head (shared by several query heads under grouped-query
attention), the MLP's gate or up projection (an encoder's MLP has ``up`` only), or the skip
connection. A path through attention also says which head it passes (the attention weight's,
``(batch, head, query position, key position)``) and which position it travels to (the
output row of the attention: a key or value path from token t reaches a later token).

One row per (prompt, position, layer, stream): :class:`Row`, whose ``value`` is the path's
value, for a researcher to aggregate (``rows_to_csv``). Figures: :func:`heatmap_figure` (layer x
component, per position, over prompts) and :func:`path_figure` (one path drawn over a prompt's
tokens, layer by layer).
"""
from __future__ import annotations

import csv
import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

import torch
from torch import nn, Tensor
from torch.autograd import semiring as S

sys.path.insert(0, str(Path(__file__).resolve().parent))
import analysis  # noqa: E402

STREAMS = ("attention", "mlp")


@dataclass(frozen=True)
class Layout:
    """Where a model family keeps what the analysis reads (module names relative to a layer)."""

    layers: str  # the layers' ModuleList, e.g. "model.layers"
    stream_in: tuple[str, str]  # the submodules whose input is the stream entering attention, MLP ("": the layer)
    components: tuple[tuple[str, str, str], ...]  # (stream, submodule, component)
    attention: str  # the attention module
    attention_out: str  # its output projection
    heads: int
    kv_heads: int
    head_dim: int

    def columns(self) -> list[tuple[str, str]]:
        """(stream, component) in figure order: each stream's components, then its skip."""
        out = []
        for stream in STREAMS:
            out += [(s, c) for s, _, c in self.components if s == stream]
            out.append((stream, "skip"))
        return out


def layout(model: nn.Module) -> Layout:
    """The layout of a Hugging Face decoder (llama, qwen2, mistral) or encoder (bert) model."""
    config = model.config
    kind = config.model_type
    heads = config.num_attention_heads
    if kind in ("llama", "qwen2", "mistral"):
        base = "model.layers" if hasattr(model, "model") else "layers"
        return Layout(
            base, ("input_layernorm", "post_attention_layernorm"),
            (("attention", "self_attn.q_proj", "query"), ("attention", "self_attn.k_proj", "key"),
             ("attention", "self_attn.v_proj", "value"), ("mlp", "mlp.gate_proj", "gate"),
             ("mlp", "mlp.up_proj", "up")),
            "self_attn", "self_attn.o_proj", heads, config.num_key_value_heads,
            getattr(config, "head_dim", None) or config.hidden_size // heads)
    if kind == "bert":
        base = "bert.encoder.layer" if hasattr(model, "bert") else "encoder.layer"
        return Layout(
            base, ("", "intermediate.dense"),
            (("attention", "attention.self.query", "query"), ("attention", "attention.self.key", "key"),
             ("attention", "attention.self.value", "value"), ("mlp", "intermediate.dense", "up")),
            "attention.self", "attention.output.dense", heads, heads, config.hidden_size // heads)
    raise ValueError(f"no component layout for model_type {kind!r} (llama, qwen2, mistral, bert)")


@dataclass
class Row:
    prompt: int
    position: int
    token: str
    layer: int
    stream: str  # the residual stream entering "attention" or "mlp"
    component: str  # query, key, value, gate, up or skip
    value: float  # the top path's value from the stream's strongest unit at this position
    unit: int  # that unit
    head: Optional[int] = None  # query: its query head; key, value: the key/value head
    weight: Optional[tuple[int, int, int]] = None  # the attention weight passed: (head, query pos, key pos)
    to_position: Optional[int] = None  # the attention output row the path reaches


def _stream_modules(model: nn.Module, lay: Layout) -> list[nn.Module]:
    """Per layer, the modules whose input is the stream entering attention, then the MLP."""
    return [layer.get_submodule(sub) if sub else layer
            for layer in model.get_submodule(lay.layers) for sub in lay.stream_in]


def classify(path, lay: Layout, layer: int, stream: str) -> dict:
    """The component a path from the stream entering ``stream`` of ``layer`` leaves by, with the
    attention head, weight and position it passes (the first of the layer's components the path
    enters; none of the stream's own, or leaving the layer first: the skip connection)."""
    prefix = f"{lay.layers}.{layer}."
    modules = {prefix + sub: (s, c) for s, sub, c in lay.components}
    found: dict = {"component": "skip"}
    steps = path.steps
    for k, step in enumerate(steps):
        module = step.module or ""
        if module in modules:
            s, c = modules[module]
            if s != stream:
                return found
            found["component"] = c
            # The projection's output element: its last step in that module.
            last = k
            while last + 1 < len(steps) and steps[last + 1].module == module:
                last += 1
            if s == "attention":
                found["head"] = steps[last].index[-1] // lay.head_dim
                found.update(_through_attention(steps[last + 1:], lay, prefix))
            return found
        if not module.startswith(prefix) and module != prefix[:-1]:
            return found
    return found


def _through_attention(steps, lay: Layout, prefix: str) -> dict:
    out: dict = {}
    attention, o_proj = prefix + lay.attention, prefix + lay.attention_out
    for step in steps:
        if step.name in ("SoftmaxBackward0", "SafeSoftmaxBackward0") and (step.module or "").startswith(attention):
            out.setdefault("weight", tuple(int(i) for i in step.index[-3:]))
        if step.module == o_proj:
            # The output projection's first step is its input's element: (batch, row, unit).
            out["to_position"] = int(step.index[-2])
            return out
    return out


def component_rows(model: nn.Module, scalar: Callable[[], Tensor], tokens: Sequence[str], prompt: int = 0,
                   positions: Optional[Sequence[int]] = None) -> list[Row]:
    """Runs ``scalar()`` (the forward pass of one prompt, batch 1, returning a scalar) and a
    max_product backward to every layer's streams, inside ``record_paths(model)``; returns one
    :class:`Row` per position (all, or ``positions``), layer and stream."""
    lay = layout(model)
    captured, handles = analysis._capture(_stream_modules(model, lay), output=False)
    try:
        with S.record_paths(model) as rec:
            out = scalar()
            torch.autograd.grad(out, captured, semiring="max_product")
    finally:
        for h in handles:
            h.remove()
    rows = []
    n = len(model.get_submodule(lay.layers))
    for i, h in enumerate(captured):
        layer, k = divmod(i, len(STREAMS))
        stream = STREAMS[k]
        if layer >= n:
            break
        values = S.max_product.finalize(rec.message(h))[0]  # (T, H)
        for t in positions if positions is not None else range(values.shape[0]):
            unit = int(values[t].argmax())
            if not torch.isfinite(values[t, unit]):
                continue
            path = rec.path(h, (0, t, unit))
            rows.append(Row(prompt, t, tokens[t], layer, stream, value=path.value, unit=unit,
                            **classify(path, lay, layer, stream)))
    return rows


def rows_to_csv(rows: Sequence[Row], path: Path) -> None:
    fields = [f.name for f in dataclasses.fields(Row)]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for r in rows:
            w.writerow(dataclasses.asdict(r))


def fractions(rows: Sequence[Row], lay: Layout, layers: int, select: Callable[[Row], bool]) -> tuple[Tensor, Tensor]:
    """(layers, columns): the fraction of the selected rows' prompts whose top path leaves by each
    (stream, component), and the count of prompts per layer and stream."""
    cols = lay.columns()
    hits = torch.zeros(layers, len(cols))
    count = torch.zeros(layers, len(STREAMS))
    for r in rows:
        if select(r):
            hits[r.layer, cols.index((r.stream, r.component))] += 1
            count[r.layer, STREAMS.index(r.stream)] += 1
    per_col = torch.stack([count[:, STREAMS.index(s)] for s, _ in cols], 1)
    return hits / per_col.clamp(min=1), per_col


def wilson(p: Tensor, n: Tensor, z: float = 1.96) -> tuple[Tensor, Tensor]:
    """The 95% Wilson score interval of proportions p out of n."""
    n = n.clamp(min=1)
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * torch.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def heatmap_figure(rows: Sequence[Row], lay: Layout, layers: int, groups: dict[str, Callable[[Row], bool]],
                   png: Path, title: str) -> None:
    """Per group of positions (e.g. subject, attractor, last token): a layer x component heatmap
    of the fraction of prompts whose top path leaves the layer's stream by the component."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = lay.columns()
    fig, axes = plt.subplots(1, len(groups), figsize=(3.2 * len(groups) + 1, 0.16 * layers + 2.2), dpi=150,
                             squeeze=False)
    for ax, (name, select) in zip(axes[0], groups.items()):
        frac, per = fractions(rows, lay, layers, select)
        im = ax.imshow(frac.numpy(), aspect="auto", cmap="viridis", vmin=0, vmax=1, origin="lower")
        ax.set_xticks(range(len(cols)), [f"{'attn' if s == 'attention' else s}: {c}" for s, c in cols],
                      rotation=90, fontsize=7)
        ax.set_yticks(range(0, layers, max(1, layers // 10)))
        ax.set_title(f"{name} (n={int(per.max())})", fontsize=9)
    axes[0][0].set_ylabel("layer", fontsize=8)
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.8, label="fraction of prompts")
    fig.suptitle(title, fontsize=10)
    fig.savefig(png, bbox_inches="tight")
    plt.close(fig)


def path_positions(path, lay: Layout) -> list[tuple[int, int]]:
    """(layer, position) where a path meets each layer's residual stream (its residual adds)."""
    out = []
    for step in path.steps:
        module = step.module or ""
        head, _, rest = module.rpartition(".")
        if head == lay.layers and rest.isdigit() and step.name.startswith("AddBackward") and len(step.index) == 3:
            point = (int(rest), int(step.index[1]))
            if not out or out[-1] != point:
                out.append(point)
    return out


def path_figure(path, lay: Layout, tokens: Sequence[str], layers: int, png: Path, title: str) -> None:
    """A top path drawn over the prompt's tokens: at each layer, the position of the residual
    stream it passes; a move between positions is a step through attention."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = path_positions(path, lay)
    fig, ax = plt.subplots(figsize=(max(5.0, 0.7 * len(tokens)), 0.16 * layers + 2), dpi=150)
    if points:
        ys, xs = zip(*points)
        ax.plot(xs, ys, marker="o", markersize=3, linewidth=1.2)
        for (_, x0), (y1, x1) in zip(points, points[1:]):
            if x1 != x0:  # through attention, to another token
                ax.annotate(f"layer {y1}: to {tokens[x1]!r}", (x1, y1), fontsize=7, xytext=(4, -2),
                            textcoords="offset points")
    ax.set_xticks(range(len(tokens)), tokens, rotation=45, ha="right", fontsize=8)
    ax.set_xlim(-0.5, len(tokens) - 0.5)
    ax.set_ylim(-0.5, layers - 0.5)
    ax.set_ylabel("layer (residual stream)", fontsize=8)
    ax.grid(True, linewidth=0.3)
    ax.set_title(f"{title}\nvalue {path.value:.4g}, {len(path.steps)} steps", fontsize=9)
    fig.savefig(png, bbox_inches="tight")
    plt.close(fig)
