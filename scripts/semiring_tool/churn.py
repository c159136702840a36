"""scripts/semiring stats --churn: how much of what the series adds it rewrites itself.

Churn is the count of lines that one patch of the series adds and a later patch deletes or
rewrites (a line changed in place counts as deleted). A series shaped as upstream lands a
feature, one concern per patch with fixes folded into the patch they fix, keeps it low; a work
log does not. Read from git: for each patch, `git blame` of the lines it deletes names the
commit that added them.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from .base import git

HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? ")


@dataclass
class Churn:
    added: int = 0
    rewritten: int = 0
    # (rewriting commit index, rewritten commit index) -> lines, 1-based like the series
    pairs: Counter = field(default_factory=Counter)

    @property
    def percent(self) -> float:
        return 100.0 * self.rewritten / self.added if self.added else 0.0


def _deleted_ranges(repo: Path, commit: str) -> tuple[int, list[tuple[str, int, int]]]:
    """Lines `commit` adds, and the (path, first line, count) ranges of its parent it deletes."""
    diff = git(repo, "diff", "-U0", "--no-renames", "--no-color", f"{commit}^", commit,
               capture=True).stdout
    added, ranges, path = 0, [], None
    for line in diff.splitlines():
        if line.startswith("--- "):
            path = None if line == "--- /dev/null" else line[len("--- a/"):]
        elif line.startswith("+") and not line.startswith("+++ "):
            added += 1
        elif path and (m := HUNK.match(line)) and m.group(2) != "0":
            ranges.append((path, int(m.group(1)), int(m.group(2) or 1)))
    return added, ranges


def measure(repo: Path, base: str, head: str = "HEAD") -> Churn:
    commits = git(repo, "rev-list", "--reverse", f"{base}..{head}", capture=True).stdout.split()
    index = {c: i for i, c in enumerate(commits, 1)}
    result = Churn()
    for i, commit in enumerate(commits, 1):
        added, ranges = _deleted_ranges(repo, commit)
        result.added += added
        for path, first, count in ranges:
            blame = git(repo, "blame", "-l", "-s", f"-L{first},+{count}", f"{commit}^", "--", path,
                        capture=True).stdout
            for line in blame.splitlines():
                origin = index.get(line.split()[0].lstrip("^"))
                if origin is not None:
                    result.rewritten += 1
                    result.pairs[(i, origin)] += 1
    return result


def report(churn: Churn, names: list[str]) -> str:
    lines = [f"added {churn.added} lines; rewritten by a later patch of the series: "
             f"{churn.rewritten} ({churn.percent:.2f}%)"]
    for (later, earlier), n in sorted(churn.pairs.items()):
        lines.append(f"  {n:5d}  {names[later - 1]}  rewrites  {names[earlier - 1]}")
    return "\n".join(lines) + "\n"
