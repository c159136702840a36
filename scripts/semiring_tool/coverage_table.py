"""docs/derivatives-coverage.md: which derivatives.yaml entries have a semiring rule, and why not.

One row per entry of the patched tree's tools/autograd/derivatives.yaml, loaded with upstream's
own loader (tools.autograd.load_derivatives, as tools/autograd/gen_semiring_rules.py does), so
that node names are the generated ones. An entry's status is, in this order:

1. ``rule: <kind> (<what>)``: the op is declared in tools/autograd/semiring_rules.yaml;
   elementwise, structural and bijective rules are the shared C++ rules of those names
   (torch/csrc/autograd/semiring_rules.h), explicit ones C++ formulas, one per input named.
2. ``no node``: the entry generates no backward node (no input has a formula); the reason says
   whether its outputs are marked non-differentiable, integer/bool valued (by name), or its
   inputs are all ``non_differentiable``. ``decomposes for dense tensors``: the op has a
   CompositeImplicitAutograd kernel, which the dispatcher prefers to the generated autograd
   kernel on every backend without a kernel of its own, so dense CPU and CUDA programs never
   make this node (matmul runs mm, bmm, views...).
3. By name, before any formula is read: nested, sparse-only, quantized and complex-only ops,
   kernels of one backend (cudnn, miopen, mkldnn, mps), and double-backward entries (an op whose
   name ends in ``_backward``: its node exists only when a backward is differentiated).
4. By formula and schema: ``backward not implemented upstream`` (every formula is
   ``not_implemented(...)``); ``in-place variant with its own node`` (an in-place entry gets a
   node of its own, which a rule for the functional op does not cover); ``zero-Jacobian
   candidate`` (every formula is zeros: no edges); ``several output gradients`` (the formula
   reads ``grads`` or named gradients, and the elementwise and structural rules take one
   message); then each formula is read as an expression (below).

The expression reading, and its limits. Comments and string literals are dropped; a formula is
split at its top-level ``? :``, ``+``/``-`` and ``*``/``/``; calls and method chains are
recognised by name:

* structural candidate: every formula only moves ``grad``: ``grad`` itself, or ``grad`` through
  a chain of the movers in ``MOVER_METHODS`` / ``MOVER_FUNCTIONS`` (views, permutations,
  selection, padding, concatenation's split) or zeros written into part of it
  (``ZEROING_FUNCTIONS``), each known to send every input element at most one output element
  with weight 1;
* elementwise candidate: every formula is ``grad`` times or divided by factors that do not read
  ``grad`` (possibly negated, masked with ``where``/``masked_fill`` against zero, scaled by
  ``maybe_multiply``), or the op carries native_functions.yaml's ``pointwise`` tag and no formula
  names a reduction (the tag says that output i depends on input i alone, so an upstream helper
  such as ``threshold_backward(grad, ...)`` is elementwise in ``grad``);
* needs a Jacobian-derived rule: a formula adds or subtracts two terms of which one reads
  ``grad``, or names a reduction or contraction (``REDUCTIONS``: sum, mean, mm, matmul, expand,
  cumsum, norm, ...) or an upstream ``*_backward`` helper (not ``pointwise``-tagged);
* not yet classified: anything else.

Limits: the reading is lexical. It does not look inside upstream's C++ helpers (a helper that
is elementwise but not ``pointwise``-tagged lands in "needs a Jacobian-derived rule" or "not
yet classified"); an index that can repeat (gather, index_select, take) would break the "at
most one" premise, so those are reductions here, and the one mover with indices,
``value_selecting_reduction_backward``, takes the forward's own (distinct per reduced slice);
by-name categories are only as good as their patterns (``BY_NAME``); and a "candidate" is a
hypothesis about the formula, not a rule: declaring it needs an oracle test
(test/autograd/test_semiring.py). On the entries that do have rules the table reports what the
reading alone would have said, as a check of it.

Run with a Python that has pyyaml (the tooling tests' host venv):
``python -m semiring_tool.coverage_table TREE`` prints the table.
"""
from __future__ import annotations

import contextlib
import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

from . import series
from .base import BASE_TAG, git
from .config import REPO, Pin
from .progress import ToolError, say

DOC = REPO / "docs" / "derivatives-coverage.md"

# Summary order. All four are kinds of rule; `explicit` ones are C++ formulas.
RULE_KINDS = ("elementwise", "structural", "bijective", "explicit")
NO_NODE = "no node"
COMPOSITE = "decomposes for dense tensors"
NESTED = "nested"
SPARSE = "sparse-only"
QUANTIZED = "quantized"
COMPLEX = "complex-only"
BACKEND = "one backend's kernel"
TEST_ONLY = "upstream test op"
DOUBLE_BACKWARD = "double backward"
NOT_IMPLEMENTED = "backward not implemented upstream"
INPLACE = "in-place variant with its own node"
ZERO = "zero-Jacobian candidate"
SEVERAL_GRADS = "several output gradients: needs an explicit rule"
RING = "formula subtracts or uses the real ring: needs a Jacobian-derived rule"
STRUCTURAL = "structural candidate"
ELEMENTWISE = "elementwise candidate"
UNCLASSIFIED = "not yet classified"
CATEGORIES = tuple(f"rule: {k}" for k in RULE_KINDS) + (
    NO_NODE, COMPOSITE, TEST_ONLY, NESTED, SPARSE, QUANTIZED, COMPLEX, BACKEND, DOUBLE_BACKWARD, NOT_IMPLEMENTED,
    INPLACE, ZERO, SEVERAL_GRADS, RING, STRUCTURAL, ELEMENTWISE, UNCLASSIFIED)

# Outputs that are integer or bool by the op's meaning; the schema only says `Tensor`.
INT_OR_BOOL_OUTPUTS = re.compile(
    r"^(eq|ne|lt|le|gt|ge|any|all|_is_all_true|_is_any_true|isnan|count_nonzero|nonzero|"
    r"multinomial|one_hot|_?indices|crow_indices|col_indices|ccol_indices|row_indices)$")
BY_NAME = (  # (category, pattern on the base name, why)
    (TEST_ONLY, re.compile(r"^_test_"), "an op of upstream's autograd tests"),
    (NESTED, re.compile(r"nested|to_padded_tensor"),
     "nested tensors are refused in a semiring"),
    (SPARSE, re.compile(r"sparse|_coalesce|^_?values$|^_to_dense$|^sparse_mask$"),
     "sparse tensors are refused in a semiring"),
    (QUANTIZED, re.compile(r"quantize|_fq_helper"), "quantization ops: not analysed"),
    (COMPLEX, re.compile(r"^(view_as_real|view_as_complex|complex|polar|_conj|_conj_physical|"
                         r"conj_physical_|_fft_\w+)$"),
     "complex inputs or outputs; lift is defined on real Jacobian entries"),
    (BACKEND, re.compile(r"^_?(cudnn|miopen|mkldnn|mps|_mps|nnpack|thnn)|_mps_|^to_mkldnn$|_mkldnn_|"
                         r"_cpu_fallback$"),
     "a kernel of one backend; the portable op's row is the one to cover first"),
    (DOUBLE_BACKWARD, re.compile(r"_backward(_data)?$"),
     "the node of a backward op: exists only when a backward is differentiated"),
)

# Reading formulas.
MOVER_METHODS = {"t", "mT", "transpose", "permute", "reshape", "reshape_symint", "reshape_as", "view",
                 "view_symint", "squeeze", "unsqueeze", "flip", "roll", "roll_symint", "rot90",
                 "diagonal", "select", "select_symint", "slice", "slice_symint", "narrow",
                 "narrow_symint", "tril", "triu"}
MOVER_FUNCTIONS = {"permute_backwards", "unsqueeze_to", "select_backward", "select_backward_symint",
                   "slice_backward_wrapper", "diagonal_backward", "diagonal_backward_symint",
                   "cat_tensors_backward", "stack_tensors_backward", "_to_copy_backward",
                   "pixel_shuffle", "pixel_unshuffle", "channel_shuffle_symint",
                   "value_selecting_reduction_backward_symint", "constant_pad_nd_backward"}
# Methods that leave the values (of a real tensor) alone.
TRANSPARENT_METHODS = {"conj", "conj_physical", "resolve_conj", "contiguous", "to", "clone"}
REDUCTIONS = re.compile(
    r"\b(sum|nansum|sum_to|mean|mm|bmm|addmm|matmul|mv|ger|dot|linalg_\w+|expand|expand_symint|"
    r"expand_as|cumsum|cumprod|prod|norm|index_add|index_put|_unsafe_index_put|"
    r"_unsafe_masked_index_put_accumulate|put|scatter_add|gather|take|index_select|repeat|col2im)\w*\(")
# Reading these of grad reads no values.
METADATA = re.compile(r"\bgrad\.(sym_sizes?|sizes?|options|scalar_type|dim|defined|layout|device|dtype)\(\)?")
# Writing zeros into part of grad: what receives nothing gets `zero`.
ZEROING_METHODS = {"masked_fill", "masked_fill_", "index_fill", "scatter"}
ZEROING_FUNCTIONS = {"slice_scatter", "slice_scatter_symint", "select_scatter", "select_scatter_symint",
                     "diagonal_scatter"}
HELPER = re.compile(r"\b\w+_backward\w*\(")
ZERO_CALLS = {"zeros_like", "at::zeros_symint", "at::zeros", "Tensor", "at::scalar_tensor"}


@dataclass(frozen=True)
class Entry:
    """What the table needs of one derivatives.yaml entry (a DifferentiabilityInfo, flattened)."""

    name: str  # the overload name, e.g. mul.Tensor
    nodes: tuple[tuple[str, str], ...] = ()  # (dispatch key, generated node name)
    formulas: tuple[tuple[str, str], ...] = ()  # (input names, formula as written)
    output_differentiability: tuple | None = None
    non_differentiable: tuple[str, ...] = ()
    named_gradients: bool = False  # the formulas read grad_<output name>
    pointwise: bool = False  # native_functions.yaml tags the op `pointwise`
    composite: bool = False  # native_functions.yaml gives it a CompositeImplicitAutograd kernel
    inplace: bool = False


@dataclass
class Row:
    entry: Entry
    category: str
    status: str
    reason: str = ""
    heuristic: str = ""  # for rows with rules: what the formula reading alone says


# ---------------------------------------------------------------- reading one formula

def _clean(formula: str) -> str:
    formula = re.sub(r"/\*.*?\*/", "", formula)
    return re.sub(r'"[^"]*"', '""', formula).strip()


def _top_level(expr: str):
    """Yields (index, char) of the characters of `expr` outside brackets (brackets excluded)."""
    depth = 0
    for i, ch in enumerate(expr):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0:
            yield i, ch


def _strip_parens(expr: str) -> str:
    expr = expr.strip()
    while expr.startswith("(") and _matching(expr, 0) == len(expr) - 1:
        expr = expr[1:-1].strip()
    return expr


def _matching(expr: str, open_at: int) -> int:
    depth = 0
    for i in range(open_at, len(expr)):
        depth += expr[i] in "([{"
        depth -= expr[i] in ")]}"
        if depth == 0:
            return i
    return -1


def _ternary(expr: str) -> tuple[str, str, str] | None:
    """`c ? a : b` at the top level -> (c, a, b); `::` is not a colon."""
    q = next((i for i, ch in _top_level(expr) if ch == "?"), None)
    if q is None:
        return None
    nested = 0
    for j, ch in _top_level(expr):
        if j <= q:
            continue
        if ch == "?":
            nested += 1
        elif ch == ":" and expr[j - 1] != ":" and expr[j + 1:j + 2] != ":":
            if nested == 0:
                return expr[:q], expr[q + 1:j], expr[j + 1:]
            nested -= 1
    return None


def _split_binary(expr: str, ops: str) -> list[tuple[str, str]]:
    """[(operator before the term, term)] at the top-level binary operators `ops`: a unary sign,
    `->`, `++`, `--`, `op=` and an exponent's sign (1e-5) do not split."""
    terms, start, op, depth, prev = [], 0, "", 0, ""
    for i, ch in enumerate(expr):
        nxt = expr[i + 1:i + 2]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0 and ch in ops and prev and prev not in "(*/+-?:,<>=!&|^%~" \
                and nxt not in ("=", ch, ">") \
                and not (ch in "+-" and prev in "eE" and expr[i - 2:i - 1].isdigit()):
            terms.append((op, expr[start:i].strip()))
            start, op = i + 1, ch
        if not ch.isspace():
            prev = ch
    terms.append((op, expr[start:].strip()))
    return terms


def _call(expr: str) -> tuple[str | None, str, list[str]] | None:
    """`fn(args)` -> (None, fn, args); `recv.method(args)` -> (recv, method, args)."""
    if not expr.endswith(")"):
        return None
    open_at = next((i for i in range(len(expr)) if expr[i] == "(" and _matching(expr, i) == len(expr) - 1),
                   None)
    if open_at is None:
        return None
    head, inner = expr[:open_at], expr[open_at + 1:-1]
    args, start = [], 0
    for j, ch in _top_level(inner):
        if ch == ",":
            args.append(inner[start:j].strip())
            start = j + 1
    if inner.strip():
        args.append(inner[start:].strip())
    m = re.fullmatch(r"(.+)\.(\w+)", head, re.S)
    if m:
        return m.group(1).strip(), m.group(2), args
    if re.fullmatch(r"[\w:]+", head):
        return None, head, args
    return None


def _reads_grad(expr: str) -> bool:
    """Whether `expr` reads the values of grad (its sizes, options and dtype do not count)."""
    return re.search(r"\bgrads?\b", METADATA.sub("", expr)) is not None


def _zeroish(expr: str) -> bool:
    expr = _strip_parens(expr)
    if re.fullmatch(r"0\.?0*|0\.", expr):
        return True
    c = _call(expr)
    return bool(c) and c[0] is None and c[1] in ZERO_CALLS and \
        (c[1] != "at::scalar_tensor" or bool(c[2]) and _zeroish(c[2][0]))


# A formula's kind: "move" (only moves grad), "elementwise", "zero", "ring", "unknown".
# "identity" is a move that changes nothing (grad itself). Combination: the worst wins.
_ORDER = ["zero", "identity", "move", "elementwise", "unknown", "ring"]


def _worst(*kinds: tuple[str, str]) -> tuple[str, str]:
    return max(kinds, key=lambda k: _ORDER.index(k[0]))


def read_formula(formula: str) -> tuple[str, str]:
    """(kind, why) of one backward formula; see the module docstring."""
    return _read(_clean(formula))


def _read(expr: str) -> tuple[str, str]:
    expr = _strip_parens(expr)
    if _zeroish(expr):
        return "zero", "zeros"
    if not _reads_grad(expr):
        return "unknown", "does not read grad"
    if re.fullmatch(r"grad|grads\[\w+\]", expr):
        return "identity", "grad"
    t = _ternary(expr)
    if t is not None:
        branches = [b for b in t[1:] if _reads_grad(b) or not re.search(r"std::\w+<|\(\)$", b.strip())]
        return _worst(*(_read(b) for b in branches))
    terms = _split_binary(expr, "+-")
    if len(terms) > 1:
        if any(_reads_grad(t) for _, t in terms):
            return "ring", "adds or subtracts a term that reads grad"
    factors = _split_binary(expr, "*/")
    if len(factors) > 1:
        with_grad = [(op, f) for op, f in factors if _reads_grad(f)]
        if len(with_grad) != 1 or with_grad[0][0] == "/":
            return "ring", "grad is not a single multiplied factor"
        kind, why = _read(with_grad[0][1])
        if kind in ("identity", "elementwise"):
            return "elementwise", "grad * f(inputs)"
        return (kind, why) if kind == "ring" else ("unknown", f"a product with {why}")
    if expr.startswith("-"):
        kind, why = _read(expr[1:])
        return ("elementwise", "-grad") if kind == "identity" else (kind, why)
    c = _call(expr)
    if c is None:
        return "unknown", "not a call the reading knows"
    recv, fn, args = c
    bare = fn.removeprefix("at::")
    if recv is not None and _reads_grad(recv) and not any(_reads_grad(a) for a in args):
        inner = _read(recv)
        if bare in TRANSPARENT_METHODS:
            return inner
        if bare in MOVER_METHODS and inner[0] in ("identity", "move"):
            return "move", f".{bare}()"
        if bare in ZEROING_METHODS and args and _zeroish(args[-1]) \
                and inner[0] in ("identity", "move", "elementwise"):
            return "elementwise", f".{bare}(..., 0)"
        if bare in ("div", "mul", "neg") and inner[0] in ("identity", "elementwise"):
            return "elementwise", f"grad.{bare}(...)"
    if recv is None:
        grad_args = [i for i, a in enumerate(args) if _reads_grad(a)]
        if bare == "handle_r_to_c" and grad_args == [1]:
            return _read(args[1])
        if bare == "maybe_multiply" and grad_args == [0]:
            kind, why = _read(args[0])
            return ("elementwise", "maybe_multiply(grad, ...)") if kind in ("identity", "elementwise") \
                else (kind, why)
        if bare == "where" and len(args) == 3 and 0 not in grad_args:
            sides = [_read(a) for a in args[1:] if _reads_grad(a)]
            zero = all(_reads_grad(a) or _zeroish(a) for a in args[1:])
            if sides and all(k in ("identity", "elementwise") for k, _ in sides) and (zero or len(sides) == 2):
                return "elementwise", "where(cond, grad, 0)"
        if bare in MOVER_FUNCTIONS and grad_args == [0] and _read(args[0])[0] in ("identity", "move"):
            return "move", f"{bare}(grad, ...)"
        if bare in ZEROING_FUNCTIONS and grad_args == [0] and len(args) > 1 and _zeroish(args[1]) \
                and _read(args[0])[0] in ("identity", "move"):
            return "move", f"{bare}(grad, zeros, ...)"
    m = REDUCTIONS.search(expr)
    if m:
        return "ring", f"`{m.group(0)}`"
    m = HELPER.search(expr)
    if m:
        return "ring", f"upstream helper `{m.group(0)}`"
    return "unknown", f"`{bare}(`"


# ---------------------------------------------------------------- classifying entries

def _base(name: str) -> str:
    return name.split(".", 1)[0]


def _code(text: str) -> str:
    return f"`{text}`"


def _no_node_reason(e: Entry) -> str:
    od = e.output_differentiability
    if INT_OR_BOOL_OUTPUTS.match(_base(e.name).rstrip("_")):
        return "integer/bool outputs (by name)" + (": output_differentiability all False" if od else "")
    if od is not None and not any(od):
        return "not differentiable: output_differentiability all False"
    if e.non_differentiable and not e.formulas:
        return "not differentiable: every input is `non_differentiable` upstream"
    if not e.formulas:
        return "no backward formula for any input"
    return "no input has a backward formula"


def read_entry(e: Entry) -> tuple[str, str]:
    """(category, reason) of an entry from its formulas and schema alone: no rules, no names."""
    formulas = [(names, _clean(f)) for names, f in e.formulas]
    if all(f.startswith("not_implemented(") for _, f in formulas):
        return NOT_IMPLEMENTED, "every formula is `not_implemented(...)`"
    live = [(n, f) for n, f in formulas if not f.startswith("not_implemented(")]
    partial = " (other inputs: `not_implemented`)" if len(live) < len(formulas) else ""
    kinds = [(names, read_formula(f)) for names, f in live]
    if all(k == "zero" for _, (k, _) in kinds):
        return ZERO, "every formula is zeros: no edges" + partial
    if e.named_gradients or any(re.search(r"\bgrads\b", f) for _, f in live):
        return SEVERAL_GRADS, "reads `grads` or named output gradients; the generic rules take one message"
    ring = [(n, why) for n, (k, why) in kinds if k == "ring"]
    reductions = [(n, why) for n, why in ring if not why.startswith("upstream helper")]
    if reductions:
        return RING, _per_input(reductions) + partial
    if all(k in ("identity", "move", "zero") for _, (k, _) in kinds):
        moves = sorted({why for _, (k, why) in kinds if k == "move"} or {"grad"})
        return STRUCTURAL, "only moves grad: " + ", ".join(_code(m) for m in moves) + partial
    if all(k in ("identity", "move", "zero", "elementwise") for _, (k, _) in kinds):
        whys = sorted({why for _, (k, why) in kinds if k == "elementwise"})
        return ELEMENTWISE, "elementwise in grad: " + ", ".join(_code(w) for w in whys) + partial
    if e.pointwise:
        return ELEMENTWISE, "op tagged `pointwise` in native_functions.yaml; no reduction in the formula" + partial
    if ring:
        return RING, _per_input(ring) + partial
    return UNCLASSIFIED, _per_input([(n, why) for n, (k, why) in kinds if k == "unknown"]) + partial


def _per_input(whys: list[tuple[str, str]]) -> str:
    return "; ".join(f"{names}: {why}" for names, why in whys)


def classify(entries: list[Entry], rules: dict[str, tuple[str, str]]) -> list[Row]:
    """One row per entry. `rules`: op name -> (kind, rule function), from semiring_rules.yaml."""
    by_name = {e.name: e for e in entries}
    missing = sorted(set(rules) - set(by_name))
    if missing:
        raise ValueError(f"semiring_rules.yaml declares ops derivatives.yaml lacks: {missing}")
    rows: dict[str, Row] = {}

    def row_of(e: Entry) -> Row:
        if e.name in rows:
            return rows[e.name]
        rows[e.name] = row = _row(e)
        return row

    def _row(e: Entry) -> Row:
        default = [node for key, node in e.nodes if key == "Default"]
        if e.name in rules:
            kind, fn = rules[e.name]
            heuristic, _ = read_entry(e)
            return Row(e, f"rule: {kind}", f"rule: {kind} ({_code(fn)})",
                       "declared in semiring_rules.yaml", heuristic)
        if not e.nodes:
            return Row(e, NO_NODE, NO_NODE, _no_node_reason(e))
        if e.composite:
            return Row(e, COMPOSITE, COMPOSITE, "a CompositeImplicitAutograd kernel: on dense tensors the op "
                       "runs the ops it decomposes into (their rows); this node only on backends with a "
                       "kernel of their own (e.g. nested, MPS)")
        base = _base(e.name)
        for category, pattern, why in BY_NAME:
            if pattern.search(base):
                return Row(e, category, category, why + " (by name)")
        if not default:
            keys = ", ".join(key for key, _ in e.nodes)
            return Row(e, UNCLASSIFIED, UNCLASSIFIED, f"no Default node, only nodes for {keys}")
        if not e.inplace:
            category, reason = read_entry(e)
            return Row(e, category, category, reason)
        f = _functional_of(e, entries)
        if f is None:
            about = "no entry for the functional op"
        else:
            same = "same formulas" if sorted(f.formulas) == sorted(e.formulas) else "other formulas"
            about = f"functional {_code(f.name)}: {row_of(f).status}; {same}"
            e = replace(e, pointwise=e.pointwise or f.pointwise)  # native_functions.yaml tags one of them
        return Row(e, INPLACE, INPLACE, f"{about}; this entry's formulas read as: {read_entry(e)[0]}")

    return [row_of(e) for e in entries]


def _functional_of(e: Entry, entries: list[Entry]) -> Entry | None:
    """The functional entry of an in-place one: the same overload name without the `_`, else the
    overload with the same formulas (transpose_ -> transpose.int)."""
    base = _base(e.name).removesuffix("_")
    same_base = [x for x in entries if _base(x.name) == base and not x.inplace]
    exact = [x for x in same_base if x.name == base + e.name[len(base) + 1:]]
    return (exact or [x for x in same_base if sorted(x.formulas) == sorted(e.formulas)] or [None])[0]


# ---------------------------------------------------------------- the document

def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(rows: list[Row], extra_note: str = "") -> str:
    n = len(rows)
    counts = Counter(r.category for r in rows)
    with_rule = sum(counts[f"rule: {k}"] for k in RULE_KINDS)
    with_node = sum(1 for r in rows if any(key == "Default" for key, _ in r.entry.nodes))
    out = [
        "# derivatives.yaml coverage by semiring rules",
        "",
        "<!-- @generated by `python3 scripts/semiring coverage-table --write` from the patched tree's",
        "tools/autograd/derivatives.yaml and semiring_rules.yaml; the fast tests check it is current. -->",
        "",
        f"Every entry of upstream's `tools/autograd/derivatives.yaml` ({n} entries), with the backward",
        "node(s) it generates and whether a backward in a semiring can run through that node. Only",
        "`rule:` rows have a rule: every other node raises an error naming it (see",
        "[semantics](semantics.md)). The other categories are read automatically from the formula and",
        "the schema (the heuristic and its limits: `scripts/semiring_tool/coverage_table.py`).",
        "A *candidate* is a hypothesis from the formula's shape, not a rule: declaring one in",
        "`semiring_rules.yaml` needs an oracle test first.",
        "",
        f"**{with_rule} of {n} entries have a rule ({100 * with_rule / n:.1f}%); "
        f"{with_rule} of the {with_node} that generate a Default backward node "
        f"({100 * with_rule / with_node:.1f}%).**",
        "",
        "| category | entries | share |",
        "|---|---|---|",
    ]
    out += [f"| {c} | {counts[c]} | {100 * counts[c] / n:.1f}% |" for c in CATEGORIES if counts[c]]
    out += [f"| total | {n} | 100% |", ""]
    ruled = [r for r in rows if r.heuristic]
    if ruled:
        agree = Counter((r.category.removeprefix("rule: "), r.heuristic) for r in ruled)
        out += ["The formula reading alone, on the entries that have rules (a check of the heuristic):",
                "", "| rule | the reading says | entries |", "|---|---|---|"]
        out += [f"| {k} | {h} | {c} |" for (k, h), c in sorted(agree.items())]
        out.append("")
    if extra_note:
        out += [extra_note, ""]
    out += ["| # | op | node(s) | status | reason |", "|---|---|---|---|---|"]
    for i, r in enumerate(rows, 1):
        nodes = ", ".join(_code(node) if key == "Default" else f"{_code(node)} ({key})"
                          for key, node in r.entry.nodes) or "-"
        reason = r.reason + (f"; the reading alone: {r.heuristic}" if r.heuristic else "")
        out.append(f"| {i} | {_code(r.entry.name)} | {nodes} | {_cell(r.status)} | {_cell(reason)} |")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- from a patched tree

def load(tree: Path) -> tuple[list[Entry], dict[str, tuple[str, str]], int]:
    """Entries (derivatives.yaml order), declared rules, and how many loader infos are not
    entries (the {view}_copy ops that load_derivatives derives from their view's entry).
    Needs pyyaml and imports the tree's tools/ and torchgen/."""
    import yaml

    sys.path.insert(0, str(tree))
    from tools.autograd.load_derivatives import load_derivatives

    autograd = tree / "tools" / "autograd"
    native = tree / "aten" / "src" / "ATen" / "native"
    infos, _ = load_derivatives(str(autograd / "derivatives.yaml"), str(native / "native_functions.yaml"),
                                str(native / "tags.yaml"))
    by_schema = {str(schema): per_key for schema, per_key in infos.items()}
    with open(autograd / "derivatives.yaml") as f:
        names = [d["name"] for d in yaml.safe_load(f)]
    entries = []
    for spec in names:
        per_key = by_schema[spec]
        info = per_key.get("Default") or next(iter(per_key.values()))
        od = info.output_differentiability
        entries.append(Entry(
            name=str(info.func.func.name),
            nodes=tuple(sorted(((k, i.op) for k, i in per_key.items() if i.op),
                               key=lambda kn: (kn[0] != "Default", kn))),
            formulas=tuple((", ".join(d.var_names), d.original_formula) for d in info.derivatives),
            output_differentiability=None if od is None else tuple(od),
            non_differentiable=tuple(info.non_differentiable_arg_names),
            named_gradients=bool(info.used_named_gradients),
            pointwise="pointwise" in info.func.tags,
            composite=info.func.has_composite_implicit_autograd_kernel,
            inplace=info.func.func.name.name.inplace,
        ))
    with open(autograd / "semiring_rules.yaml") as f:
        spec = yaml.safe_load(f)
    rules = {op: (kind, kind) for kind in RULE_KINDS if kind != "explicit" for op in spec.get(kind) or []}
    explicit = spec.get("explicit") or {}
    if isinstance(explicit, dict):  # prefixes where an explicit rule named a Python function
        rules.update({op: ("explicit", fn) for op, fn in explicit.items()})
    else:  # a C++ formula per differentiable input
        rules.update({e["name"]: ("explicit", ", ".join(k for k in e if k != "name")) for e in explicit})
    return entries, rules, len(infos) - len(names)


def table(tree: Path) -> str:
    entries, rules, derived = load(tree)
    note = (f"Not rows: the {derived} `{{view}}_copy` ops to which upstream's loader gives their view's "
            f"formulas (nodes `<view node>_copy`, which no rule names); and in-place ops without an entry "
            f"of their own, which run their functional op's node (and rule).") if derived else ""
    return render(classify(entries, rules), note)


def generate(tree: Path) -> str:
    """The table, computed in the host venv (pyyaml; the tree's tools/ on the path)."""
    from .testing import host_python  # testing imports this module

    proc = subprocess.run([host_python(), "-B", "-m", "semiring_tool.coverage_table", str(tree)],
                          cwd=REPO / "scripts", capture_output=True, text=True)
    if proc.returncode != 0:
        raise ToolError(f"coverage table: generating it failed:\n{proc.stderr.strip()}")
    return proc.stdout


def command(pin: Pin, write: bool) -> None:
    """scripts/semiring coverage-table: the series applied in check's scratch tree, then the table
    on stdout (progress on stderr), or written to docs/."""
    with contextlib.redirect_stdout(sys.stderr):
        text = generate(series.check(pin))
    if write:
        DOC.write_text(text)
        say(f"wrote {DOC.relative_to(REPO)}")
    else:
        sys.stdout.write(text)


def check(tree: Path) -> int:
    """0 if docs/derivatives-coverage.md is what the tree gives; a prefix of the series is not checked."""
    applied = int(git(tree, "rev-list", "--count", f"{BASE_TAG}..HEAD", capture=True).stdout.strip())
    if applied != len(series.read_series()):
        say(f"coverage table: not checked ({applied} patches applied; it describes the whole series)")
        return 0
    current = DOC.exists() and DOC.read_text() == generate(tree)
    say("coverage table docs/derivatives-coverage.md " + ("is current" if current else
        "is STALE: run python3 scripts/semiring coverage-table --write"))
    return 0 if current else 1


if __name__ == "__main__":
    sys.stdout.write(table(Path(sys.argv[1]).resolve()))
