"""How long the rest of a ninja build takes, from ninja's own record of each step.

ninja appends "start_ms<TAB>end_ms<TAB>mtime<TAB>output<TAB>hash" to .ninja_log in the build
directory as each step finishes (one line per output; the outputs of one step share start, end
and hash), and prints "[n/N] ..." as each step finishes: the step's description ("Building CXX
object <output>") or, run verbosely as PyTorch's setup.py runs it, its command ("... -o
<output> ..."). Both name outputs relative to the build directory, as the log does.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .progress import fmt_seconds

STATUS = re.compile(r"^\[(\d+)/(\d+)\] (.*)")
OUTPUT_FLAG = re.compile(r"(?:^|\s)-o\s+(\S+)")


@dataclass(frozen=True)
class Step:
    outputs: frozenset[str]
    seconds: float


def read_log(path: Path | None) -> list[Step]:
    """The steps a .ninja_log (v5 or v6) records, each with its latest duration; [] if none."""
    try:
        lines = path.read_text(errors="replace").splitlines() if path else []
    except OSError:
        return []
    if not lines or not lines[0].startswith("# ninja log v"):
        return []
    latest: dict[str, tuple[str, str, str]] = {}  # a rebuilt output's later line wins
    for line in lines[1:]:
        fields = line.split("\t")
        if len(fields) == 5 and fields[0].isdigit() and fields[1].isdigit():  # a torn line is skipped
            latest[fields[3]] = (fields[0], fields[1], fields[4])
    steps: dict[tuple[str, str, str], set[str]] = {}
    for output, key in latest.items():
        steps.setdefault(key, set()).add(output)
    return [Step(frozenset(outs), (int(end) - int(start)) / 1000) for (start, end, _), outs in steps.items()]


def step_output(text: str) -> str:
    """The output a status line names: what follows its last -o, else its last word."""
    flagged = OUTPUT_FLAG.findall(text)
    return flagged[-1] if flagged else (text.split() or [""])[-1]


def _mean(steps: list[Step]) -> float:
    return sum(s.seconds for s in steps) / len(steps)


class Estimate:
    """The expected rest of a build, fed the build's output line by line.

    `own`: this build directory's log as it was before the build started: its outputs exist
    already. `other`: the log of another build of the same sources: its steps that `own` does
    not have are the ones this build still has to run, each expected to take what it took
    there. Steps that no log names cost the mean recorded step (the mean, not the median: the
    sum of many steps is what matters, and a few long links weigh in it). Recorded times are
    wall times of steps that ran `jobs` at a time, as this build's do. With no log at all,
    every step is expected to cost what this run's steps have cost so far.
    """

    def __init__(self, own: list[Step], other: list[Step], jobs: int) -> None:
        have = {o for s in own for o in s.outputs}
        self.pending = [s for s in other if not s.outputs & have]
        recorded = own + self.pending
        self.by_output = {o: s for s in recorded for o in s.outputs}
        self.mean = _mean(recorded) if recorded else 0.0
        self.jobs = jobs
        self.finished: set[Step] = set()  # over all ninja runs of this build
        self.total = self.done = 0
        self.start = (0.0, 0)  # (elapsed, done) at the first step of this ninja run

    @property
    def basis(self) -> str:
        return "ninja's log" if self.by_output else "this run's rate"

    def feed(self, line: str, elapsed: float) -> str | None:
        """Take one line of build output; when a ninja run starts, return what to expect of it."""
        m = STATUS.match(line)
        if not m:
            return None
        done, total = int(m.group(1)), int(m.group(2))
        news = None
        # setup.py runs ninja more than once (and ninja restarts after re-running cmake): each
        # run counts its own steps, so the estimate starts over with it.
        if total != self.total or done <= self.done:
            # The rate is counted from this first step's end: when it began is unknown.
            self.total, self.done, self.start = total, done - 1, (elapsed, done)
            news = self.expectation()
        self.done = done
        step = self.by_output.get(step_output(m.group(3)))
        if step:
            self.finished.add(step)
        return news

    def remaining(self, elapsed: float) -> float | None:
        """Seconds until ninja is done, or None while there is nothing to estimate from."""
        left = self.total - self.done
        if not self.by_output:
            t0, d0 = self.start
            return (elapsed - t0) * left / (self.done - d0) if self.done > d0 else None
        pending = [s for s in self.pending if s not in self.finished]
        if len(pending) > left:
            # More recorded steps than ninja has left (another configuration's log): which
            # of them remain is unknown, so each remaining step costs their mean.
            return left * _mean(pending) / self.jobs
        return (sum(s.seconds for s in pending) + (left - len(pending)) * self.mean) / self.jobs

    def expectation(self) -> str:
        left = self.total - self.done
        if not self.by_output:
            return (f"ninja has {left} steps to run; no ninja log of an earlier build, so the estimate "
                    f"follows this run's rate, as if all steps cost the same")
        known = min(left, len([s for s in self.pending if s not in self.finished]))
        return (f"ninja has {left} steps to run, expected ~{fmt_seconds(self.remaining(0.0) or 0.0)} "
                f"from ninja's log: {known} at the time recorded for them, {left - known} at the mean "
                f"recorded step ({self.mean:.1f}s), {self.jobs} at a time")
