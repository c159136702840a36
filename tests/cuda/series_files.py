"""The files the series creates, rebuilt from patches/ alone, with no upstream tree.

A GPU machine has a stock PyTorch and this repository, not the pinned upstream source. The
kernels the GPU check builds live in files that the series itself creates (they start from
/dev/null), so replaying every patch's hunks for those paths, in the series' order, yields
exactly what the applied series holds. Hunks must match exactly (the series applies without
fuzz); anything else is an error naming the patch and the line.
"""
from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PATCHES = REPO / "patches"
HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class SeriesFileError(RuntimeError):
    pass


def series_names(patches: Path = PATCHES) -> list[str]:
    lines = (patches / "series").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def _file_diffs(text: str) -> list[tuple[str, bool, list[str]]]:
    """(path, created, diff lines from the first hunk) for each file of a git patch."""
    out: list[tuple[str, bool, list[str]]] = []
    for chunk in text.split("\ndiff --git ")[1:]:
        lines = chunk.split("\n")
        path, created, start = None, False, None
        for i, line in enumerate(lines):
            if line.startswith("new file mode"):
                created = True
            elif line.startswith("+++ "):
                path = None if line == "+++ /dev/null" else line[4:].removeprefix("b/")
            elif line.startswith("@@ "):
                start = i
                break
        if path is not None and start is not None:
            out.append((path, created, lines[start:]))
    return out


def _apply(old: list[str], hunks: list[str], where: str) -> list[str]:
    new: list[str] = []
    pos = 0  # lines of `old` consumed
    i = 0
    while i < len(hunks) and hunks[i].startswith("@@ "):
        m = HUNK.match(hunks[i])
        if not m:
            raise SeriesFileError(f"{where}: unreadable hunk header {hunks[i]!r}")
        old_start, old_len = int(m.group(1)), int(m.group(2) or 1)
        new_len = int(m.group(4) or 1)
        start = old_start - 1 if old_len else old_start  # an empty old side names the line before
        if start < pos:
            raise SeriesFileError(f"{where}: overlapping hunks at line {old_start}")
        new.extend(old[pos:start])
        pos = start
        i += 1
        seen_old = seen_new = 0
        while seen_old < old_len or seen_new < new_len:
            line = hunks[i]
            i += 1
            if line.startswith("\\"):
                continue  # "\ No newline at end of file"
            tag, body = line[:1], line[1:]
            if tag in (" ", "-"):
                if pos >= len(old) or old[pos] != body:
                    got = old[pos] if pos < len(old) else "<end of file>"
                    raise SeriesFileError(f"{where}: hunk at line {old_start} does not match line "
                                          f"{pos + 1}: expected {body!r}, found {got!r}")
                pos += 1
                seen_old += 1
            if tag in (" ", "+"):
                new.append(body)
                seen_new += 1
            if tag not in (" ", "-", "+"):
                raise SeriesFileError(f"{where}: unexpected diff line {line!r}")
        while i < len(hunks) and hunks[i].startswith("\\"):
            i += 1
    new.extend(old[pos:])
    return new


def materialize(paths: list[str], dest: Path, patches: Path = PATCHES) -> dict[str, list[str]]:
    """Writes each of `paths` (files the series creates) under `dest` as the whole series leaves
    it; returns the patches that touched each path."""
    files: dict[str, list[str] | None] = {p: None for p in paths}
    touched: dict[str, list[str]] = {p: [] for p in paths}
    for name in series_names(patches):
        for path, created, hunks in _file_diffs((patches / name).read_text()):
            if path not in files:
                continue
            if created:
                files[path] = []
            elif files[path] is None:
                raise SeriesFileError(f"{name}: changes {path}, which upstream has: the GPU check "
                                      f"can only rebuild files that the series creates")
            files[path] = _apply(files[path], hunks, f"{name}: {path}")
            touched[path].append(name)
    for path, lines in files.items():
        if lines is None:
            raise SeriesFileError(f"no patch of {patches / 'series'} creates {path}")
        out = dest / path
        out.parent.mkdir(parents=True, exist_ok=True)
        text = "\n".join(lines)
        out.write_text(text if text.endswith("\n") else text + "\n")
    return touched


def function_source(text: str, signature: str) -> str:
    """The definition that starts with `signature` at the beginning of a line (the comment
    block above it included), to its closing brace at the start of a line."""
    lines = text.split("\n")
    starts = [i for i, line in enumerate(lines) if line.startswith(signature)]
    if len(starts) != 1:
        raise SeriesFileError(f"expected one definition starting {signature!r}, found {len(starts)}")
    first = starts[0]
    while first > 0 and lines[first - 1].startswith("//"):
        first -= 1
    for end in range(starts[0], len(lines)):
        if lines[end] == "}":
            return "\n".join(lines[first:end + 1]) + "\n"
    raise SeriesFileError(f"no closing brace for {signature!r}")
