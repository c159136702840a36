"""What a semiring backward costs, side by side with ordinary backward, on the patched build.

float32, this machine's threads. For each workload it prints the best time of one run
(backward only: the graph is built once and kept) over --repeat rounds that take the workload's
semirings and its baseline in turn, each run for about 50 ms a round; the ratio to the
baseline; and the peak memory of one run: the peak resident set (VmHWM) of a fresh process
that builds the graph and runs it once, above its resident set just before the run.

* chain_1000: a chain of 1000 elementwise nodes on 64 floats (per-node cost); baseline:
  ordinary backward of the same chain.
* mlp_4x256: 4 x (Linear(256) + tanh), batch 64, grad of every parameter and the input;
  baseline: ordinary backward.
* mm_512: backward through one 512 x 512 mm; baseline: ordinary backward.
* bert_L6_H512: the BERT-style encoder of tests/reference_models.py in the shape of
  bert_uncased_L-6_H-512_A-8, batch 8, sequence 128, grad of every parameter; baseline:
  ordinary backward.
* resnet_w32: tests/reference_models.py's SmallResNet at width 32 (convolutions, batch norm in
  eval mode, max and adaptive average pooling), batch 16 of 32 x 32 images, grad of every
  parameter; baseline: ordinary backward.
* lstm_h256: its LSTMLanguageModel, vocabulary 1000, width 256, two layers, batch 16, sequence
  64 (the nodes the CPU path of nn.LSTM records), grad of every parameter; baseline: ordinary
  backward.
* qwen2_h256: a decoder-only Hugging Face model (Qwen2ForCausalLM, sdpa attention), hidden 256,
  4 layers, 4 heads (2 key-value heads), intermediate 1024, vocabulary 1000, batch 4, sequence
  128, its next-token loss, grad of every parameter; baseline: ordinary backward.
* qwen2_eager: the same model with eager attention (the math path written out: scores,
  softmax, weighted sum); sdpa's CPU flash node answers as that math path too, run on
  messages from what it saved.

With --nodes, instead: where the model families' backward (resnet_w32, lstm_h256,
qwen2_h256, or the workloads named) spends its time, by kind of node, ordinary backward and
every semiring side by side. With --ops, instead: the same by ATen op, each op timed where it
runs (inclusive of what it calls), with the elements it writes: what the rest of a ratio
(below) is made of.
* products, for the model families (bert_L6_H512, resnet_w32, lstm_h256, qwen2_h256,
  qwen2_eager): the matrix products each backward ran (real mm, bmm, addmm, baddbmm, their
  out= and in-place forms, convolution_backward; a semiring's kernel: `_semiring_mm_lifted`),
  replayed alone with the operands they had; the ratio to ordinary backward split into the
  products' time and the rest's, each against ordinary's whole time. Where the products alone
  come near the ratio, they bound it: the kernel rows below compare one semiring product with
  one BLAS product; `entropy` and `log_entropy` multiply a pair by a real matrix in three real
  products (P A, then P B + H A in one of twice the depth).
* smollm2_512, smollm2_512_sdpa: SmolLM2-135M-Instruct (examples/decoder/smollm2.py), one
  prompt of 512 tokens, eager or sdpa attention, the backward benchmarks/decoder_lengths.py
  times (from the last position's next-token logit to the input embeddings); baseline:
  ordinary backward. Not in the default workloads (name them): they need the model packages
  `scripts/semiring test` or `demo` installs.
* semiring_mm_1024: the semiring mm kernel on 1024^3 as a rule calls it: a message times a
  real weight matrix (`_semiring_mm_lifted`, what the built-ins' mm rules run); baseline:
  float32 BLAS mm (torch.mm) of the same sizes. semiring_mm_mlp: the same at a decoder MLP's
  down projection, 512 tokens x 1536 times a 1536 x 576 weight (SmolLM2's).
* plus_1M, step_1M: a semiring's plus of two messages of 2^20 elements, and its step (a
  message times a real local derivative, `times_lifted`, every elementwise rule's); baselines:
  ordinary backward's sum of two gradients (add) and its product with the local derivative
  (mul), float32. Where a family's rest (above) is most of its ratio, these rows are its cost
  per element.
* blocked_mm_256: the blocked formulation of the Python default (Semiring.mm, what every
  semiring ran before the kernels) against the kernel, at 256^3 (1024^3 takes minutes).
* norm_group_4096: the plus-product of one normalization group's messages with its Jacobian
  (what layer_norm's, batch_norm's and group_norm's rules run) for a group of 4096, per group;
  baseline: the same semiring at 1024. Work in O(n^2) grows 16x from 1024 to 4096, in
  O(n log n) 4.8x; max_product and max_plus take 1024 entry by entry (they divide from 2048
  and 3072), so their rows mix the two forms.
* --keep-freed-memory: the same in a process whose glibc malloc keeps the memory it frees
  (KEEP_FREED_MEMORY). With glibc's defaults, the temporaries of a pair semiring's rules can
  be fresh pages on every backward (docs/design.md: the allocator's cost).
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Callable

import torch
from torch.autograd import semiring as S
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from proc_status import status_kib

DTYPE = torch.float32
ROUND_SECONDS = 0.05
# glibc malloc told to keep what it frees: a fixed mmap threshold (blocks under 32 MiB come from
# the heap), a heap that is never trimmed, and grown 1 GiB at a time.
KEEP_FREED_MEMORY = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(1 << 40),
                     "MALLOC_TOP_PAD_": str(1 << 30)}
KEPT_FREED_MEMORY = "glibc keeping the memory it frees (" + " ".join(
    f"{k}={v}" for k, v in KEEP_FREED_MEMORY.items()) + ")"
NORM_GROUPS = 8  # norm_group_*'s times are per group
FAMILIES = ("bert_L6_H512", "resnet_w32", "lstm_h256", "qwen2_h256", "qwen2_eager", "smollm2_512",
            "smollm2_512_sdpa")


def best_times(fns: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """The best time of one call of each fn, over `repeat` rounds that take the fns in turn.

    Interleaved, so that a slow spell of the machine (a shared host's) reaches every fn
    of a ratio alike; within a round each fn is called for about ROUND_SECONDS.
    """
    calls = {}
    for name, fn in fns.items():
        t0 = time.perf_counter()
        fn()  # warm-up
        calls[name] = max(1, int(ROUND_SECONDS / max(time.perf_counter() - t0, 1e-6)))
    best = dict.fromkeys(fns, math.inf)
    for _ in range(repeat):
        for name, fn in fns.items():
            for _ in range(calls[name]):
                t0 = time.perf_counter()
                fn()
                best[name] = min(best[name], time.perf_counter() - t0)
    return best


def peak_mib(workload: str, name: str) -> float:
    """One run in a fresh process: its peak resident set above the set before the run."""
    out = subprocess.run([sys.executable, __file__, "--peak-of", workload, name],
                         capture_output=True, text=True, check=True).stdout
    return float(out.split()[-1])


def backward(out, inputs):
    """grad of `out` for `inputs` in a semiring, the graph kept for the next run."""
    return lambda s: torch.autograd.grad(out, inputs, semiring=s, retain_graph=True)


def chain(length: int = 1000):
    x = torch.rand(64, dtype=DTYPE, requires_grad=True)
    y = x
    for i in range(length):
        y = y * 1.0001 if i % 2 else torch.tanh(y)
    return backward(y.sum(), [x])


def mlp(width: int = 256, depth: int = 4, batch: int = 64):
    torch.manual_seed(0)
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.Tanh()]
    model = torch.nn.Sequential(*layers).to(DTYPE)
    x = torch.randn(batch, width, dtype=DTYPE, requires_grad=True)
    return backward(model(x).sum(), [x, *model.parameters()])


def mm(n: int = 512):
    torch.manual_seed(0)
    a = torch.randn(n, n, dtype=DTYPE, requires_grad=True)
    b = torch.randn(n, n, dtype=DTYPE, requires_grad=True)
    return backward(a.mm(b).sum(), [a, b])


def _reference_models():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    import reference_models as M

    return M


def bert(batch: int = 8, seq: int = 128):
    M = _reference_models()
    model, data = M.bert_model(DTYPE, M.BertShape(), batch, seq)
    return backward(model(*data), list(model.parameters()))


def resnet(batch: int = 16):
    M = _reference_models()
    torch.manual_seed(0)
    model = M.SmallResNet(width=32).eval().to(DTYPE)
    images = torch.randn(batch, 3, 32, 32, dtype=DTYPE)
    labels = torch.randint(0, 5, (batch,))
    return backward(torch.nn.functional.cross_entropy(model(images), labels), list(model.parameters()))


def lstm(batch: int = 16, seq: int = 64):
    M = _reference_models()
    torch.manual_seed(0)
    model = M.LSTMLanguageModel(vocab=1000, width=256).to(DTYPE)
    return backward(model(torch.randint(0, 1000, (batch, seq + 1))), list(model.parameters()))


def qwen2(batch: int = 4, seq: int = 128, attention: str = "sdpa"):
    import transformers

    torch.manual_seed(0)
    config = transformers.Qwen2Config(vocab_size=1000, hidden_size=256, num_hidden_layers=4,
                                      num_attention_heads=4, num_key_value_heads=2, intermediate_size=1024,
                                      max_position_embeddings=seq, sliding_window=None,
                                      attn_implementation=attention)
    model = transformers.Qwen2ForCausalLM(config).to(DTYPE).eval()
    ids = torch.randint(0, 1000, (batch, seq))
    return backward(model(input_ids=ids, labels=ids).loss, list(model.parameters()))


def smollm2(seq: int = 512, attention: str = "eager"):
    here = Path(__file__).resolve().parent
    sys.path[:0] = [str(here.parent / "examples" / "decoder"), str(here)]
    import smollm2 as model_files
    from decoder_lengths import prompt_ids

    tokenizer, model = model_files.load(attention)
    for p in model.parameters():
        p.requires_grad_(False)
    embeds = model.model.embed_tokens(prompt_ids(tokenizer, seq)).detach().requires_grad_()
    logits = model(inputs_embeds=embeds, logits_to_keep=1).logits[0, -1]
    return backward(logits[int(logits.argmax())], [embeds])


class RecordProducts(TorchDispatchMode):
    """Records the matrix products that run under it, real or a semiring's, with their operands."""

    PRODUCTS = {getattr(op, overload) for op in (torch.ops.aten.mm, torch.ops.aten.bmm, torch.ops.aten.addmm,
                                                 torch.ops.aten.baddbmm)
                for overload in ("default", "out")} | {
        torch.ops.aten.addmm_.default, torch.ops.aten.baddbmm_.default,
        torch.ops.aten.convolution_backward.default, torch.ops.aten._semiring_mm_lifted.default}

    def __init__(self) -> None:
        super().__init__()
        self.calls: list = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in self.PRODUCTS:
            self.calls.append((func, args, kwargs))
        return func(*args, **kwargs)


def products_of(run: Callable[[object], object], semiring: str | None) -> Callable[[], None]:
    """The matrix products of one backward (ordinary where `semiring` is None), replayed."""
    with RecordProducts() as recorded:
        run(semiring)
    assert recorded.calls, f"backward in {semiring} ran no matrix product"

    def replay() -> None:
        for func, args, kwargs in recorded.calls:
            func(*args, **kwargs)  # dropped, as backward drops a consumed message
    return replay


def operands(name: str, n: int, k: int | None = None, m: int | None = None):
    """A semiring, a message (n x k) and a real weight matrix (k x m); square by default."""
    k, m = k or n, m or n
    g = torch.Generator().manual_seed(0)
    s = S.builtin_semirings[name]
    message = s.lift_masked(torch.randn(n, k, generator=g, dtype=DTYPE))
    return s, message, torch.randn(k, m, generator=g, dtype=DTYPE)


def semiring_mm(name: str, n: int, k: int | None = None, m: int | None = None):
    """The kernel as a rule calls it: a message (n x k) times a real weight matrix (k x m)."""
    if name == "BLAS mm":
        k, m = k or n, m or n
        x, y = torch.randn(n, k, dtype=DTYPE), torch.randn(k, m, dtype=DTYPE)
        return lambda: torch.mm(x, y)
    _, message, weight = operands(name, n, k, m)
    return lambda: torch._semiring_mm_lifted(message, weight, False, name)


def blocked_mm(name: str, n: int):
    """The blocked formulation every semiring ran before the kernels (Semiring.mm's default)."""
    s, message, weight = operands(name, n)
    lifted = s.lift_masked(weight)
    return lambda: S._blocked_mm(s, message, lifted)


def norm_group(name: str, n: int):
    """semiring_norm_jacobian_mm over NORM_GROUPS groups of n."""
    g = torch.Generator().manual_seed(0)
    s = S.builtin_semirings[name]
    xhat, scale = torch.randn(2, NORM_GROUPS, n, generator=g, dtype=DTYPE)
    message = s.lift_masked(torch.randn(NORM_GROUPS, n, generator=g, dtype=DTYPE))
    return lambda: s._native.norm_jacobian_mm(message, xhat, scale)


GRAPHS = {"chain_1000": chain, "mlp_4x256": mlp, "mm_512": mm, "bert_L6_H512": bert, "resnet_w32": resnet,
          "lstm_h256": lstm, "qwen2_h256": qwen2, "qwen2_eager": partial(qwen2, attention="eager"),
          "smollm2_512": smollm2, "smollm2_512_sdpa": partial(smollm2, attention="sdpa")}
# Workloads that need more than the build (the model packages): run when named.
NAMED_ONLY = ("smollm2_512", "smollm2_512_sdpa")


def elementwise(name: str, op: str, n: int = 1 << 20):
    """plus of two messages, or step (times_lifted) of a message and a real tensor; `ordinary`:
    add or mul of real tensors."""
    g = torch.Generator().manual_seed(0)
    a, w = torch.randn(2, n, generator=g, dtype=DTYPE)
    if name == "ordinary":
        return (lambda: a + w) if op == "plus" else (lambda: a * w)
    s = S.builtin_semirings[name]._native
    m = s.lift_masked(a)
    if op == "plus":
        other = s.lift_masked(w)
        return lambda: s.plus(m, other)
    return lambda: s.times_lifted(m, w)


KERNELS = {"semiring_mm_1024": lambda name: semiring_mm(name, 1024),
           "semiring_mm_mlp": lambda name: semiring_mm(name, 512, 1536, 576),
           "plus_1M": lambda name: elementwise(name, "plus"),
           "step_1M": lambda name: elementwise(name, "step"),
           "blocked_mm_256": lambda name: blocked_mm(name, 256),
           "norm_group_1024": lambda name: norm_group(name, 1024),
           "norm_group_4096": lambda name: norm_group(name, 4096)}


def one_run(workload: str, name: str) -> Callable[[], object]:
    if workload in GRAPHS:
        run = GRAPHS[workload]()
        return lambda: run(None if name == "ordinary" else name)
    if workload == "kernel_mm_256":
        return semiring_mm(name, 256)
    return KERNELS[workload](name)


def node_times(workload: str, names: list[str], repeat: int = 3) -> None:
    """Where a workload's backward spends its time: each kind of node's total (from a hook
    before and after it runs; the engine runs a CPU graph's nodes one at a time), ordinary
    backward and each semiring side by side, the mean of `repeat` runs after a warm-up."""
    from torch.autograd.semiring import accepts_messages

    run = GRAPHS[workload]()
    out = dict(zip(run.__code__.co_freevars, (c.cell_contents for c in run.__closure__)))["out"]
    nodes, stack, seen = [], [out.grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        nodes.append(node)
        stack += [fn for fn, _ in node.next_functions]
    kinds = Counter(node.name() for node in nodes)
    totals: dict[str, float] = {}
    started: dict = {}

    def before(node):
        return accepts_messages(lambda grad_outputs: started.__setitem__(node, time.perf_counter()))

    def after(node):
        def hook(grad_inputs, grad_outputs):
            totals[node.name()] = totals.get(node.name(), 0.0) + time.perf_counter() - started[node]
        return accepts_messages(hook)

    for node in nodes:
        node.register_prehook(before(node))
        node.register_hook(after(node))
    per: dict[str, dict[str, float]] = {}
    whole: dict[str, float] = {}
    for name in ["ordinary", *names]:
        run(None if name == "ordinary" else name)
        totals.clear()
        t0 = time.perf_counter()
        for _ in range(repeat):
            run(None if name == "ordinary" else name)
        whole[name] = (time.perf_counter() - t0) / repeat
        per[name] = {k: v / repeat for k, v in totals.items()}
    print(f"{workload}: ms per backward by node (hooks), " + ", ".join(
        f"{n} {whole[n] * 1e3:.1f}" for n in whole))
    print(f"{'node':44} {'count':>5} " + " ".join(f"{n:>12}" for n in whole))
    order = sorted(set().union(*per.values()),
                   key=lambda k: -max(p.get(k, 0.0) for p in per.values()))
    for k in order[:12]:
        print(f"{k:44} {kinds.get(k, 0):5d} " + " ".join(f"{per[n].get(k, 0.0) * 1e3:12.2f}" for n in whole))
    # The engine's own work between nodes: chiefly the plus of the messages of a tensor with
    # several consumers (a weight used at every step of a recurrence), ordinary's add.
    print(f"{'outside the nodes (the engine, its plus)':44} {'':5} " + " ".join(
        f"{(whole[n] - sum(per[n].values())) * 1e3:12.2f}" for n in whole))


class TimeOps(TorchDispatchMode):
    """Times every ATen op that runs under it, where it runs, and counts the elements it writes
    (none for a view).

    The time of an op includes the ops it calls (they run below the mode), so the ops' times
    do not overlap; what the engine and the rules do between ops is not in them.
    """

    def __init__(self) -> None:
        super().__init__()
        self.seconds: Counter = Counter()
        self.calls: Counter = Counter()
        self.elements: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        t0 = time.perf_counter()
        out = func(*args, **(kwargs or {}))
        self.seconds[func] += time.perf_counter() - t0
        self.calls[func] += 1
        returns = func._schema.returns
        outs = out if len(returns) > 1 else (out,)
        # A view writes nothing; an in-place or out= op writes its (aliased) result.
        self.elements[func] += sum(t.numel() for ret, o in zip(returns, outs)
                                   if ret.alias_info is None or ret.alias_info.is_write
                                   for t in tree_leaves(o) if isinstance(t, torch.Tensor))
        return out


def op_times(workload: str, names: list[str], repeat: int = 3) -> None:
    """Where a workload's backward spends its time, by ATen op: ms per backward (the mean of
    `repeat` runs under TimeOps, after a warm-up) and millions of elements written, ordinary
    backward and each semiring side by side; the whole backward timed without the mode."""
    run = GRAPHS[workload]()
    runs = {name: partial(run, None if name == "ordinary" else name) for name in ["ordinary", *names]}
    whole = best_times(runs, repeat)
    per: dict[str, TimeOps] = {}
    for name, fn in runs.items():
        fn()
        with TimeOps() as timed:
            for _ in range(repeat):
                fn()
        per[name] = timed
    print(f"{workload}: ms per backward (Melements written) by ATen op, timed where it runs; "
          "the whole backward, untimed: " + ", ".join(f"{n} {whole[n] * 1e3:.1f}" for n in whole))
    print(f"{'op':36} " + " ".join(f"{n:>16}" for n in whole))
    ops = set().union(*(t.seconds for t in per.values()))
    for op in sorted(ops, key=lambda o: -max(t.seconds[o] for t in per.values()))[:14]:
        print(f"{str(op).removeprefix('aten.'):36} " + " ".join(
            f"{per[n].seconds[op] / repeat * 1e3:8.2f} ({per[n].elements[op] / repeat / 1e6:5.1f})"
            for n in whole))
    print(f"{'every op':36} " + " ".join(
        f"{sum(per[n].seconds.values()) / repeat * 1e3:8.2f} ({sum(per[n].elements.values()) / repeat / 1e6:5.1f})"
        for n in whole))


def print_peak_of(workload: str, name: str) -> None:
    fn = one_run(workload, name)
    before = status_kib("VmRSS")
    fn()
    print((status_kib("VmHWM") - before) / 1024)


# Every row printed, for --json (scripts/semiring metrics reads them).
ROWS: list[dict] = []


def row(workload: str, name: str, t: float, base: float, baseline: str) -> dict:
    peak = peak_mib(workload, name)
    ROWS.append({"workload": workload, "semiring": name, "ms": t * 1e3, "ratio": t / base,
                 "baseline": baseline, "peak_mib": peak})
    print(f"{workload:18} {name:12} {t * 1e3:10.2f} {t / base:8.2f}x {baseline:14} {peak:9.1f}", flush=True)
    return ROWS[-1]


def keeps_freed_memory() -> bool:
    return all(os.environ.get(k) == v for k, v in KEEP_FREED_MEMORY.items())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--semirings", nargs="*", default=[n for n in S.builtin_semirings if n != "real"])
    ap.add_argument("--workloads", nargs="*", default=[*(w for w in GRAPHS if w not in NAMED_ONLY), "kernels", "norms"],
                    help=f"of {', '.join(GRAPHS)}, kernels (the mm kernel rows) and norms (the "
                         f"normalization kernel's rows); default: all but {', '.join(NAMED_ONLY)}")
    ap.add_argument("--nodes", nargs="*", metavar="WORKLOAD",
                    help="instead of the table: where each workload's backward spends its time, by "
                         "kind of node, ordinary and every semiring of --semirings")
    ap.add_argument("--ops", nargs="*", metavar="WORKLOAD",
                    help="instead of the table: the same by ATen op, with the elements each writes")
    ap.add_argument("--json", type=Path, help="also write the rows to this file")
    ap.add_argument("--keep-freed-memory", action="store_true",
                    help=f"run in a process with {KEPT_FREED_MEMORY}")
    ap.add_argument("--peak-of", nargs=2, metavar=("WORKLOAD", "SEMIRING"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.keep_freed_memory and not keeps_freed_memory():
        # The settings are read when the process starts.
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **KEEP_FREED_MEMORY})
    if args.peak_of:
        print_peak_of(*args.peak_of)
        return
    for breakdown, by in ((args.nodes, node_times), (args.ops, op_times)):
        if breakdown is not None:
            print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {DTYPE}")
            for workload in breakdown or ("resnet_w32", "lstm_h256", "qwen2_h256"):
                by(workload, args.semirings)
            return
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {DTYPE}"
          + (f", {KEPT_FREED_MEMORY}" if keeps_freed_memory() else ""))
    table(args)
    if args.json:
        args.json.write_text(json.dumps({"torch": torch.__version__, "threads": torch.get_num_threads(),
                                         "rows": ROWS}, indent=1))


def table(args: argparse.Namespace) -> None:
    print(f"{'workload':18} {'semiring':12} {'ms':>10} {'ratio':>9} {'baseline':14} {'peak MiB':>9}")
    for workload in (w for w in GRAPHS if w in args.workloads):
        run = GRAPHS[workload]()
        names = ["ordinary", *args.semirings]
        fns = {n: partial(run, None if n == "ordinary" else n) for n in names}
        products = names if workload in FAMILIES else []
        fns.update({f"products {n}": products_of(run, None if n == "ordinary" else n) for n in products})
        times = best_times(fns, args.repeat)
        rows = {name: row(workload, name, times[name], times["ordinary"], "ordinary") for name in names}
        for name in products:
            p, base = times[f"products {name}"], times["ordinary"]
            rows[name].update(products_ms=p * 1e3, products_ratio=p / base, rest_ratio=(times[name] - p) / base)
            print(f"{workload:18} {name:12} {times[name] / base:5.2f}x ordinary = products {p / base:5.2f}x + "
                  f"the rest {(times[name] - p) / base:5.2f}x", flush=True)
    if "norms" in args.workloads:
        for name in args.semirings:
            times = best_times({n: one_run(f"norm_group_{n}", name) for n in (1024, 4096)}, args.repeat)
            row("norm_group_4096", name, times[4096] / NORM_GROUPS, times[1024] / NORM_GROUPS, "n=1024")
    if "kernels" not in args.workloads:
        return
    for workload, baseline in (("plus_1M", "add"), ("step_1M", "mul")):
        times = best_times({n: one_run(workload, n) for n in ["ordinary", *args.semirings]}, args.repeat)
        for name in args.semirings:
            row(workload, name, times[name], times["ordinary"], baseline)
    names = ["BLAS mm", "max_plus", "max_product", "log"]
    for workload in ("semiring_mm_1024", "semiring_mm_mlp"):
        times = best_times({n: one_run(workload, n) for n in names}, args.repeat)
        for name in names:
            row(workload, name, times[name], times["BLAS mm"], "BLAS mm")
    for name in names[1:]:
        times = best_times({"kernel": one_run("kernel_mm_256", name), "blocked": one_run("blocked_mm_256", name)}, 2)
        row("blocked_mm_256", name, times["blocked"], times["kernel"], "kernel")


if __name__ == "__main__":
    main()
