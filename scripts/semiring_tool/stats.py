"""scripts/semiring stats: lines added and removed per upstream file, per patch and in total.

Read from the patch files alone (no work tree, no build): each file diff's hunks are counted
the way `git apply --numstat` counts them, and the result is a Markdown table for the RFC's
cost-to-maintainers section.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .config import PATCHES
from .series import parse_header, read_series

HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
TEST_DIRS = ("test/", "tools/test/", "torch/testing/")


@dataclass
class FileStat:
    path: str
    added: int = 0
    removed: int = 0
    new: bool = False
    deleted: bool = False
    generated: bool = False


def _diff_path(line: str) -> str:
    # "diff --git a/X b/X": the b/ side. Only the fallback for diffs without "+++" or
    # "rename to" lines (mode-only changes, binary files).
    rest = line[len("diff --git "):]
    half = (len(rest) - 1) // 2
    a, b = rest[:half], rest[half + 1:]
    if a.removeprefix("a/") == b.removeprefix("b/"):
        return b.removeprefix("b/")
    return rest.split(" b/", 1)[-1]


def numstat(text: str) -> list[FileStat]:
    """Lines added and removed per file of one patch (a `git format-patch` file), in patch order."""
    stats: list[FileStat] = []
    cur: FileStat | None = None
    old_left = new_left = 0
    for line in text.splitlines():
        if old_left or new_left:
            # Inside a hunk: its header says how many lines it has, so content lines that
            # look like headers ("--- x", "+++ y", "diff --git") are counted as content.
            tag = line[:1]
            if tag == "\\":  # "\ No newline at end of file"
                continue
            if tag == "+":
                cur.added += 1
                new_left -= 1
                if cur.new and cur.added <= 3 and "@generated" in line:
                    cur.generated = True
            elif tag == "-":
                cur.removed += 1
                old_left -= 1
            else:
                old_left -= 1
                new_left -= 1
            continue
        if line.startswith("diff --git "):
            cur = FileStat(_diff_path(line))
            stats.append(cur)
        elif cur is None:
            continue
        elif line.startswith("new file mode"):
            cur.new = True
        elif line.startswith("deleted file mode"):
            cur.deleted = True
        elif line.startswith("+++ ") and line != "+++ /dev/null":
            cur.path = line[len("+++ "):].removeprefix("b/")
        elif line.startswith("rename to "):
            cur.path = line[len("rename to "):]
        elif line.startswith("--- ") and cur.deleted:
            cur.path = line[len("--- "):].removeprefix("a/")
        elif (m := HUNK.match(line)):
            old_left = int(m.group(1)) if m.group(1) is not None else 1
            new_left = int(m.group(2)) if m.group(2) is not None else 1
    return stats


def kind(f: FileStat) -> str:
    if f.path.startswith(TEST_DIRS):
        return "tests"
    return "generated" if f.generated else "code"


def collect(patches: Path = PATCHES, layer: str | None = None) -> list[tuple[str, list[FileStat]]]:
    """[(patch file name, its per-file stats)] for the patches of the series (optionally one Layer)."""
    out = []
    for name in read_series(patches / "series"):
        text = (patches / name).read_text()
        if layer is not None and parse_header(text).fields.get("Layer") != layer:
            continue
        out.append((name, numstat(text)))
    return out


def _cell(added: int, removed: int) -> str:
    return f"+{added} -{removed}"


def table(patches: Path = PATCHES, layer: str | None = None) -> str:
    """The Markdown table: one row per upstream file, one column per patch, and totals."""
    per_patch = collect(patches, layer)
    if not per_patch:
        return "no patches" + (f" with Layer: {layer}" if layer else "") + "\n"
    labels = [name.split("-", 1)[0] for name, _ in per_patch]
    files: dict[str, dict[str, FileStat]] = {}
    for label, (_, stats) in zip(labels, per_patch):
        for f in stats:
            files.setdefault(f.path, {})[label] = f
    head = ["file", *labels, "total"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    sums = {label: [0, 0] for label in labels}
    by_kind: dict[str, list[int]] = {}
    for path in sorted(files):
        cells, added, removed = [], 0, 0
        for label in labels:
            f = files[path].get(label)
            if f is None:
                cells.append("")
                continue
            cells.append(_cell(f.added, f.removed))
            added, removed = added + f.added, removed + f.removed
            sums[label][0] += f.added
            sums[label][1] += f.removed
        first = next(iter(files[path].values()))
        note = " (new)" if any(f.new for f in files[path].values()) else ""
        note += " (deleted)" if any(f.deleted for f in files[path].values()) else ""
        k = by_kind.setdefault(kind(first), [0, 0, 0])
        k[0], k[1], k[2] = k[0] + added, k[1] + removed, k[2] + 1
        rows.append(f"| `{path}`{note} | " + " | ".join(cells) + f" | {_cell(added, removed)} |")
    total = [sum(v[0] for v in sums.values()), sum(v[1] for v in sums.values())]
    rows.append("| **total** | " + " | ".join(_cell(*sums[label]) for label in labels)
                + f" | **{_cell(*total)}** |")
    summary = "; ".join(f"{name}: {_cell(a, r)} in {n} file{'s' if n != 1 else ''}"
                        for name in ("code", "tests", "generated") if name in by_kind
                        for a, r, n in [by_kind[name]])
    scope = f"the patches with Layer: {layer}" if layer else "every patch of the series"
    flag = f" --layer {layer}" if layer else ""
    return ("\n".join(rows) + "\n\n"
            f"{len(files)} files; {summary}. Generated by `python3 scripts/semiring stats{flag}` "
            f"from {scope} ({', '.join(labels)}).\n")
