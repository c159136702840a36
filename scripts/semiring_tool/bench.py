"""scripts/semiring bench: ordinary backward under the patched and the unpatched build, side by side.

Two measures of the workloads in benchmarks/real_path.py:
* instructions: callgrind counts the instructions of each workload's steady-state steps. A
  count repeats exactly for the same process image, so differences far below 1% are visible
  on a noisy machine; the rounds vary the memory layout to show how much it moves the count.
* time: two server processes per build, pinned to the same core, run single steps in
  lock-step; steps timed back to back give a ratio (the machine's speed drifts by tens of
  percent over seconds here, which cancels within a round). Twins of one build are the
  control. The table shows median ratios with a distribution-free 95% confidence interval.
"""
from __future__ import annotations

import itertools
import json
import math
import os
import statistics
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from . import build
from .build import Variant
from .buildroot import REPO_BIND, BuildRoot, ensure_root
from .config import REPO, Pin
from .progress import Stopwatch, ToolError, say

# One thread everywhere: OpenBLAS's own pool would otherwise spin on the other core (and under
# valgrind, which runs threads one at a time, the spinning is counted as work). A fixed hash
# seed makes the interpreter's own work repeatable.
BENCH_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
SCRATCH = "/tmp/torch-semiring-bench"
LIMIT = 0.01  # the target: ordinary backward costs at most 1% more (faster is layout luck, not cost)
# The command line's defaults (about 15 minutes), which `metrics` runs too.
BENCH_DEFAULTS = {"groups": 24, "samples": 120, "count_runs": 3, "steps": 5}
ROLES = (0, 1, 0, 1)  # the lock-step servers: indexes into (patched, unpatched)
ORDERS = list(itertools.permutations(range(len(ROLES))))
CONTROL = "control_"  # workloads running no changed code: they show the floor, not the verdict


def _benchmark(name: str) -> str:
    """Where benchmarks/`name` appears to the build's python (the repository is at its own path)."""
    return f"{REPO}/benchmarks/{name}"


def _check_version(result: dict, v: Variant) -> None:
    # --system-site-packages venvs: make sure the wheel, not another torch, was measured.
    if not result["version"].endswith(f"+{v.local_version}"):
        raise ToolError(f"{v.name} venv imported torch {result['version']}, "
                        f"expected +{v.local_version}; run '{v.build_command}' again")


def count_instructions(br: BuildRoot, variants: list[Variant], runs: int,
                       steps: int) -> dict[str, dict[str, list[int]]]:
    """Instructions per step of each workload, per build: one callgrind run per build and round."""
    markers, dumps = f"{SCRATCH}/callgrind_markers.so", f"{SCRATCH}/callgrind"
    br.run(["sh", "-c", f"rm -rf {dumps} && mkdir -p {dumps}"])
    br.run(["cc", "-O2", "-shared", "-fPIC", "-o", markers, _benchmark("callgrind_markers.c")],
           binds=REPO_BIND)
    counts: dict[str, dict[str, list[int]]] = {v.name: {} for v in variants}
    for r in range(runs):
        clock = Stopwatch()
        # Counts shift by a few tenths of a percent with the memory layout (hash tables keyed by
        # address): each round moves the initial stack by a different amount.
        layout = {"TORCH_SEMIRING_BENCH_PAD": "x" * (1 + 997 * r)}
        for v in variants if r % 2 == 0 else variants[::-1]:
            tag = f"{v.name}.{r}"
            out = br.run(["valgrind", "--quiet", "--tool=callgrind", "--instr-atstart=no",
                          f"--callgrind-out-file={dumps}/{tag}.%p", build.venv_python(br, v),
                          _benchmark("real_path.py"), "--instructions", markers, "--steps", str(steps)],
                         cwd="/tmp", env={**BENCH_ENV, **layout}, binds=REPO_BIND, capture=True).stdout
            _check_version(json.loads(out.strip().splitlines()[-1]), v)
            for name, n in _read_dumps(br.path(dumps), tag, steps).items():
                counts[v.name].setdefault(name, []).append(n)
        say(f"callgrind round {r + 1}/{runs} done ({clock.elapsed / 60:.1f} min)")
    return counts


def _read_dumps(dumps: Path, prefix: str, steps: int) -> dict[str, int]:
    """Each measure_stop() of callgrind_markers.c left a dump named by its workload."""
    counts = {}
    for f in sorted(dumps.glob(f"{prefix}.*")):
        fields = dict(line.split(": ", 1) for line in f.read_text().splitlines()
                      if line.startswith(("desc: Trigger:", "totals:")))
        trigger = fields.get("desc", "")
        if trigger.startswith("Trigger: Client Request: "):
            counts[trigger.removeprefix("Trigger: Client Request: ")] = int(fields["totals"]) // steps
    if not counts:
        raise ToolError(f"callgrind left no workload dumps in {dumps}")
    return counts


class _Server:
    """benchmarks/real_path.py --serve in one build's venv, pinned to one core."""

    def __init__(self, br: BuildRoot, v: Variant, core: int) -> None:
        argv = ["taskset", "-c", str(core), build.venv_python(br, v), _benchmark("real_path.py"), "--serve"]
        self.proc = subprocess.Popen(br.command(argv, "/tmp", BENCH_ENV, REPO_BIND),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        hello = json.loads(self._line())
        _check_version(hello, v)
        self.workloads: list[str] = hello["workloads"]

    def _line(self) -> str:
        line = self.proc.stdout.readline()
        if not line:
            raise ToolError(f"benchmark server exited ({self.proc.wait()}); run benchmarks/real_path.py "
                            f"--serve by hand in that venv to see why")
        return line

    def step(self, workload: str) -> float:
        self.proc.stdin.write(workload + "\n")
        self.proc.stdin.flush()
        return float(self._line())

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def time_lockstep(br: BuildRoot, variants: list[Variant], groups: int,
                  samples: int) -> dict[str, dict[str, list[float]]]:
    """Per comparison and workload, one median step-time ratio per group of server processes.

    A group is two servers of each build, so that each build's code runs equally often (the
    servers of one build share its libraries' pages, and so their caches). "patched" compares
    each patched server with an unpatched one; "control" each server with its twin of the same
    build: what two identical processes differ by here. Within a process the ratio is steady;
    between processes it moves with the memory layout each one drew, so the group, not the
    step, is the unit the interval is computed over.
    """
    core = os.cpu_count() - 1
    medians: dict[str, dict[str, list[float]]] = {"patched": {}, "control": {}}
    comparisons = {"patched": [(0, 1), (2, 3)], "control": [(2, 0), (3, 1)]}
    for g in range(groups):
        clock = Stopwatch()
        started: dict[int, _Server] = {}
        try:
            # Rotate the start order too, so that no build always starts first.
            for k in ((g + j) % len(ROLES) for j in range(len(ROLES))):
                started[k] = _Server(br, variants[ROLES[k]], core)
            servers = [started[k] for k in range(len(ROLES))]
            for name in servers[0].workloads:
                ratios: dict[str, list[float]] = {which: [] for which in comparisons}
                for i in range(samples):
                    # Every order in turn: each server follows each other one (whose run evicts
                    # its caches) equally often.
                    t = {k: servers[k].step(name) for k in ORDERS[i % len(ORDERS)]}
                    for which, pairs in comparisons.items():
                        ratios[which] += [t[a] / t[b] for a, b in pairs]
                for which, xs in ratios.items():
                    medians[which].setdefault(name, []).append(statistics.median(xs))
        finally:
            for s in started.values():
                s.close()
        say(f"timing: group {g + 1}/{groups} done ({clock.elapsed:.0f} s)")
    return medians


def median_interval(xs: list[float], level: float = 0.95) -> tuple[float, float, float]:
    """Median and a distribution-free confidence interval for it (binomial order statistics)."""
    xs, n = sorted(xs), len(xs)
    # j: how many order statistics lie below the interval; P(Binomial(n, 1/2) < j) <= (1-level)/2.
    j, tail = 0, 0.0
    while tail + math.comb(n, j) / 2 ** n <= (1 - level) / 2:
        tail += math.comb(n, j) / 2 ** n
        j += 1
    if j == 0:
        raise ToolError(f"{n} values are too few for a {level:.0%} interval (6 or more are needed)")
    return statistics.median(xs), xs[j - 1], xs[n - j]


@dataclass
class BenchResult:
    within: bool  # every workload shown to cost at most LIMIT more
    # workload: (median ratio, lowest, highest) of the instruction counts, patched / unpatched
    instructions: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    # workload: {"patched" or "control": (median ratio, 95% interval low, high)}
    time: dict[str, dict[str, tuple[float, float, float]]] = field(default_factory=dict)


def bench(pin: Pin, measures: set[str], groups: int, samples: int, count_runs: int, steps: int) -> BenchResult:
    """Prints the tables and returns their figures."""
    if "time" in measures and groups < 6:
        raise ToolError("--groups must be 6 or more: the time interval is taken over groups")
    br = ensure_root(pin)
    variants = [build.variant(pin, unpatched=False, cuda=False), build.variant(pin, unpatched=True, cuda=False)]
    for v in variants:
        if not br.path(build.venv_python(br, v)).exists():
            raise ToolError(f"no installed {v.name} build; run '{v.build_command}' first")
    result = BenchResult(within=True)
    if "instructions" in measures:
        counts = count_instructions(br, variants, count_runs, steps)
        patched, unpatched = (counts[v.name] for v in variants)
        print(f"{'instructions per step':28} {'patched':>14} {'unpatched':>14} {'ratio':>8} {'bounds':>19}")
        for name in patched:
            p, u = patched[name], unpatched[name]
            # Bounds: the extreme runs against each other (the counts vary slightly between runs).
            ratio, lo, hi = statistics.median(p) / statistics.median(u), min(p) / max(u), max(p) / min(u)
            result.instructions[name] = (ratio, lo, hi)
            result.within &= name.startswith(CONTROL) or hi <= 1 + LIMIT
            print(f"{name:28} {statistics.median(p):14,.0f} {statistics.median(u):14,.0f} {ratio:8.5f}"
                  f"   [{lo:.5f}, {hi:.5f}]")
        print(f"(callgrind, steady state: median over {count_runs} runs per build of the mean of {steps} steps "
              f"after a warm-up; bounds: fewest vs most instructions of any two runs)")
    if "time" in measures:
        medians = time_lockstep(br, variants, groups, samples)
        print(f"{'time ratio':28} {'patched/unpatched':>30}   {'control: same build':>30}")
        for name in medians["patched"]:
            cells = []
            for which in ("patched", "control"):
                median, lo, hi = median_interval(medians[which][name])
                result.time.setdefault(name, {})[which] = (median, lo, hi)
                cells.append(f"{median:.4f} [{lo:.4f}, {hi:.4f}]")
                if which == "patched" and not name.startswith(CONTROL):
                    result.within &= hi <= 1 + LIMIT
            print(f"{name:28} {cells[0]:>30}   {cells[1]:>30}")
        print(f"(one step's time over its counterpart's step in the same lock-step round, one core: median "
              f"over {groups} groups of 2+2 servers of each group's median over {samples} rounds, with a "
              f"95% interval)")
    print(f"patched costs at most {LIMIT:.0%} more (upper bounds): {'yes' if result.within else 'not shown'}")
    return result
