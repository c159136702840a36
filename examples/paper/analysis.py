"""The paper's analyses (Du et al., ACL 2023), with the public API of torch.autograd.semiring.

* :func:`branch_flow`: per layer and token, which of the query, key and value projections or
  the skip connection the top gradient path (``max_product``) from the residual stream
  entering the layer's attention leaves by. Credited the paper's way (the token's strongest
  hidden unit's value, credited to that unit's winning branch) and summed per branch (every
  unit's value credited to its own winning branch).
* :func:`token_entropy`: per input token, the entropy of the distribution over all gradient
  paths to its embedding row (``log_entropy``, stable in float32), and per example the mean.
* :func:`brunoflow_graph`: softmax and layer norm built from elementary ops, as the paper's
  framework builds them, so that the graph whose paths are compared is the paper's.

Both take a batch of examples with one scalar each: a backward from ``(B,)`` scalars, each
seeded with the semiring's one, gives every example its own answer (examples share no path).
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Callable, Iterator, Optional, Sequence

import torch
from torch import nn, Tensor
from torch.autograd import semiring as S
from torch.overrides import TorchFunctionMode

BRANCHES = ("query", "key", "value", "skip")


@dataclass
class LayerFlow:
    """One layer's residual stream ``h`` of shape (B, T, H), for each example and token."""

    credited: Tensor  # (B, T, 4): the strongest unit's top path value at its winning branch, else 0
    summed: Tensor  # (B, T, 4): per branch, the sum of the values of the units whose top path leaves by it
    value: Tensor  # (B, T): the strongest unit's top path value
    unit: Tensor  # (B, T): which unit is the strongest
    branch: Tensor  # (B, T): the strongest unit's winning branch (index into BRANCHES; -1: no path)


def bert_layers(model: nn.Module) -> list[nn.Module]:
    """The transformer layers of a Hugging Face BERT model (BertModel or a BertFor... head)."""
    bert = getattr(model, "bert", model)
    return list(bert.encoder.layer)


class _BrunoflowGraph(TorchFunctionMode):
    _SOFTMAX = {torch.nn.functional.softmax, torch.softmax, Tensor.softmax}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func in self._SOFTMAX:
            x = args[0]
            dim = args[1] if len(args) > 1 else kwargs.get("dim")
            # F.softmax(input, dim, _stacklevel, dtype); torch.softmax(input, dim, dtype).
            at = 3 if func is torch.nn.functional.softmax else 2
            dtype = args[at] if len(args) > at else kwargs.get("dtype")
            if dim is None:
                dim = torch.nn.functional._get_softmax_dim("softmax", x.dim(), 3)
            return _softmax(x, dim, dtype)
        if func is torch.nn.functional.layer_norm:
            return _layer_norm(*args, **kwargs)
        return func(*args, **kwargs)


def _softmax(x: Tensor, dim: int, dtype: Optional[torch.dtype]) -> Tensor:
    # brunoflow/func/activations.py: exp(log_softmax(x)), log_softmax = x - logsumexp(x).
    if dtype is not None:
        x = x.to(dtype)
    return torch.exp(x - torch.logsumexp(x, dim, keepdim=True))


def _layer_norm(x: Tensor, normalized_shape: Sequence[int], weight: Optional[Tensor] = None,
                bias: Optional[Tensor] = None, eps: float = 1e-5) -> Tensor:
    # brunoflow/net/layernorm.py: the variance as E[x^2] - E[x]^2.
    dims = tuple(range(-len(normalized_shape), 0))
    mean = x.mean(dims, keepdim=True)
    var = (x**2).mean(dims, keepdim=True) - mean**2
    y = (x - mean) / torch.sqrt(var + eps)
    if weight is not None:
        y = weight * y
    if bias is not None:
        y = y + bias
    return y


@contextlib.contextmanager
def brunoflow_graph() -> Iterator[None]:
    """Inside, softmax and layer norm are computed from elementary ops as the paper's framework
    (brunoflow) computes them: ``exp(x - logsumexp(x))``, and ``(x - E[x]) / sqrt(E[x^2] -
    E[x]^2 + eps) * weight + bias``. The values are the same up to rounding; the graph is not.

    A semiring backward answers about the graph the forward pass recorded. Fused, softmax has one
    edge from score ``x_i`` to probability ``p_j``, weighted by the Jacobian entry
    ``p_j (d_ij - p_i)``; built brunoflow's way, the diagonal entry ``p_i (1 - p_i)`` is two
    paths, ``p_i`` directly and ``-p_i^2`` through the log-sum-exp, and a top path takes the
    undamped one. Which branch a top path leaves by can change with it: in section 5.1 it does
    (examples/paper/synthetic.py).
    """
    with _BrunoflowGraph():
        yield


# The graphs an analysis can run on: the ops as the forward pass records them (fused softmax
# and layer norm, their exact Jacobians), and the paper's (brunoflow_graph).
GRAPHS = {"fused": contextlib.nullcontext, "brunoflow": brunoflow_graph}
GRAPH_TITLES = {"fused": "fused softmax and layer norm (this project's graph)",
                "brunoflow": "softmax and layer norm from elementary ops (the paper's graph)"}


def classify(module: Optional[str], node: str, layer: str) -> int:
    """Which branch a consumer of the residual stream entering ``layer`` is (-1: none), from the
    module that made its node.

    Hugging Face BERT: ``...attention.self.query`` / ``key`` / ``value``, and the skip
    connection's add in ``...attention.output`` (BertSelfOutput: LayerNorm(dense(x) + input)).
    A layer that adds its input itself (the torch.nn reference encoder: ``x + self.out(ctx)``):
    an add made by the layer's own forward. A fused projection ``qkv`` is split by
    :func:`branch_flow`.
    """
    if module is None:
        return -1
    last = module.rsplit(".", 1)[-1]
    if last in ("query", "key", "value"):
        return BRANCHES.index(last)
    if module.endswith("attention.output") or (module == layer and node.startswith("AddBackward")):
        return BRANCHES.index("skip")
    return -1


def _capture(modules: Sequence[nn.Module], output: bool) -> tuple[list[Tensor], list]:
    captured: list[Tensor] = []
    if output:
        handles = [m.register_forward_hook(lambda m, args, out: captured.append(out)) for m in modules]
    else:
        def grab(module, args, kwargs):
            captured.append(args[0] if args else kwargs["hidden_states"])

        handles = [m.register_forward_pre_hook(grab, with_kwargs=True) for m in modules]
    return captured, handles


def record(model: nn.Module, scalars: Callable[[], Tensor], layers: Sequence[nn.Module],
           outputs_of: Sequence[nn.Module] = ()) -> tuple:
    """Runs ``scalars()`` (the forward pass, returning one scalar per example, or one scalar) and a
    max_product backward from it to the residual stream entering each of ``layers``, inside
    ``record_paths(model)``. Returns the record, the layers' inputs, and the outputs of the modules
    ``outputs_of``."""
    captured, handles = _capture(layers, output=False)
    outputs, more = _capture(outputs_of, output=True)
    try:
        with S.record_paths(model) as rec:
            out = scalars()
            seeds = S.max_product.one(out.shape, dtype=out.dtype, device=out.device)
            torch.autograd.grad(out, captured, grad_outputs=seeds, semiring="max_product")
    finally:
        for h in handles + more:
            h.remove()
    return rec, captured, outputs


def branch_flow(model: nn.Module, scalars: Callable[[], Tensor], layers: Sequence[nn.Module]) -> list[LayerFlow]:
    """Where the top paths go at the input of each of ``layers`` (the residual stream entering its
    attention), for the max_product backward of :func:`record`."""
    names = {m: n for n, m in model.named_modules()}
    fused = [getattr(layer, "qkv", None) for layer in layers]
    fused = [m if isinstance(m, nn.Linear) else None for m in fused]
    rec, captured, qkv_out = record(model, scalars, layers, [m for m in fused if m is not None])
    flows, outs = [], iter(qkv_out)
    for layer, h, qkv in zip(layers, captured, fused):
        values = _branch_values(rec, rec.branches(h), names[layer], qkv, next(outs) if qkv is not None else None)
        flows.append(_layer_flow(values))
    return flows


def _branch_values(rec, table, layer: str, qkv: Optional[nn.Linear], qkv_out: Optional[Tensor]) -> Tensor:
    """(4, *h.shape): the top path value through each branch (-inf where none leaves by it)."""
    shape = table.values.shape[1:]
    values = torch.full((len(BRANCHES),) + shape, -math.inf, dtype=table.values.dtype)
    for c, (node, _, module) in enumerate(table.consumers):
        kind = classify(module, node, layer)
        if kind >= 0:
            values[kind] = torch.maximum(values[kind], table.values[c])
        elif qkv is not None and module == f"{layer}.qkv":
            # One projection makes query, key and value: its output's column blocks. The value
            # through a block is the plus over its columns c of message[c] TIMES lift(W[c, d]).
            m = rec.message(qkv_out)
            width = qkv.in_features
            for b in range(3):
                block = m[..., b * width:(b + 1) * width, :].reshape(-1, width, 2)
                w = S.max_product.lift_masked(qkv.weight[b * width:(b + 1) * width].detach().to(m.dtype))
                through = S.max_product.finalize(S.max_product.mm(block, w)).reshape(shape)
                values[b] = torch.maximum(values[b], through)
        else:
            raise ValueError(f"{node} (made by module {module!r}) consumes the residual stream entering "
                             f"{layer!r} but is none of query, key, value or the skip connection")
    return values


def _layer_flow(values: Tensor) -> LayerFlow:
    top, branch = values.max(0)  # the top path value at each element and its branch (first of ties)
    value, unit = top.max(-1)  # the strongest unit of each token
    top_branch = branch.gather(-1, unit[..., None]).squeeze(-1)
    n = len(BRANCHES)
    reached = torch.isfinite(value)
    credited = torch.zeros(value.shape + (n,), dtype=values.dtype)
    credited[reached] = torch.nn.functional.one_hot(top_branch[reached], n).to(values.dtype) * value[reached][:, None]
    finite = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    summed = torch.stack([torch.where(branch == b, finite, torch.zeros_like(finite)).sum(-1) for b in range(n)], -1)
    return LayerFlow(credited, summed, value, unit, torch.where(reached, top_branch, -1))


def token_entropy(scalars: Callable[[], Tensor], embedding: nn.Module) -> Tensor:
    """(B, T): the gradient-graph entropy of each token's embedding row, in nats.

    Runs ``scalars()`` (the forward pass, one scalar per example) and a log_entropy backward to
    the output of ``embedding`` (the token embedding lookup, (B, T, H)). The pairs of a row's H
    units are plus-reduced before finalizing: each token's entropy is over all paths from its
    row. log_entropy carries (log Z, H~/Z), so float32 stays in range in deep models.
    """
    captured, handles = _capture([embedding], output=True)
    try:
        out = scalars()
    finally:
        handles[0].remove()
    seeds = S.log_entropy.one(out.shape, dtype=out.dtype, device=out.device)
    (m,) = torch.autograd.grad(out, captured[0], grad_outputs=seeds, semiring="log_entropy")
    return S.log_entropy.finalize(S.log_entropy.sum(m, [2]))


def token_path(model: nn.Module, scalars: Callable[[], Tensor], layer: nn.Module, example: int, token: int):
    """The top path (max_product) from the strongest hidden unit of ``token`` of ``example`` in the
    residual stream entering ``layer``, to that example's scalar: a
    :class:`torch.autograd.semiring.Path` whose steps name their modules."""
    rec, (h,), _ = record(model, scalars, [layer])
    values = S.max_product.finalize(rec.message(h))[example, token]
    return rec.path(h, (example, token, int(values.argmax())))


def describe(path) -> str:
    """The path one line per step: module, node, the element it enters, the local derivative."""
    lines = [f"value {path.value:.6g} (product of the {len(path.steps)} local derivatives: {path.product():.6g})"]
    for step in path.steps:
        lines.append(f"  {step.module or '-':45} {step.name:32} {str(step.index):16} {step.derivative:+.4f}")
    return "\n".join(lines)


def path_figure(path, png, title: str) -> None:
    """The path as a figure: the running product's magnitude after each step (log scale), each
    step labelled with its module (once per module) and node."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    running, product = [abs(path.seed) if path.seed else 1.0], 1.0
    for step in path.steps:
        product *= abs(step.derivative)
        running.append(product)
    fig, ax = plt.subplots(figsize=(max(6.4, 0.28 * len(path.steps)), 4.2), dpi=150)
    ax.plot(range(len(running)), running, marker="o", markersize=3)
    ax.set_yscale("log")
    labels, last = [""], None
    for step in path.steps:
        module = step.module or ""
        short = step.name.replace("Backward0", "").replace("Backward1", "")
        labels.append(f"{module}  {short}" if module != last else short)
        last = module
    ax.set_xticks(range(len(running)), labels, rotation=90, fontsize=6)
    ax.set_ylabel("|product of the local\nderivatives so far|", fontsize=8)
    ax.set_title(f"{title}\nvalue {path.value:.4g} over {len(path.steps)} steps", fontsize=9)
    ax.grid(True, axis="y", linewidth=0.3)
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)
