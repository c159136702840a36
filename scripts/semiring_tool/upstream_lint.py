"""Upstream's own linters on what the series adds, as v2.6.0's lintrunner runs them.

For FLAKE8, PYFMT (isort, usort, then black or ruff format) and CLANGFORMAT, the files the
series adds or changes that the linter's include and exclude patterns in the applied tree's
.lintrunner.toml select are given to the linter's own adapter (tools/linter/adapters/), with
the tool versions its init_command pins, installed in a venv of their own. C++ files the series
adds are clang-formatted too, wherever they are (upstream formats only listed directories), and
no added C++ line may pass 80 columns. A finding is printed as lintrunner prints it; `apply`
writes the formatters' replacements instead (how the series was formatted).
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from .base import git
from .config import state_dir
from .progress import run, say

# v2.6.0's .lintrunner.toml init_command pins (torchfix only below Python 3.13 there; left out).
LINT_PACKAGES = [
    "flake8==6.1.0", "flake8-bugbear==23.3.23", "flake8-comprehensions==3.15.0",
    "flake8-executable==2.1.3", "flake8-logging-format==0.9.0", "flake8-pyi==23.3.1",
    "flake8-simplify==0.19.3", "mccabe==0.7.0", "pycodestyle==2.11.1", "pyflakes==3.1.0",
    "black==23.12.1", "usort==1.0.8.post1", "isort==5.13.2", "ruff==0.7.4",
    # tools/linter/adapters/s3_init_config.json's clang-format, as PyPI's wheel of that release
    "clang-format==17.0.6",
]
CXX = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh")
COLUMNS = 80
# Code generators' templates: C++ with ${...} placeholders, not for clang-format.
TEMPLATES = "tools/autograd/templates/"


@dataclass
class Finding:
    path: str
    line: int | None
    code: str
    name: str
    description: str
    replacement: str | None = None

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.code} {self.name}: {self.description}"


def lint_python() -> str:
    venv = state_dir() / "lint-venv"
    py = venv / "bin" / "python"
    marker = venv / "packages.txt"
    if not py.exists() or not marker.exists() or marker.read_text() != "\n".join(LINT_PACKAGES):
        say(f"creating {venv} with upstream's pinned linters ({len(LINT_PACKAGES)} packages)")
        run([sys.executable, "-m", "venv", "--clear", str(venv)])
        run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", *LINT_PACKAGES])
        marker.write_text("\n".join(LINT_PACKAGES))
    return str(py)


def glob_regex(pattern: str) -> re.Pattern:
    """lintrunner's glob: `**/` any directories (or none), `*` within a name, `?` one character."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out + r"\Z")


def selected(config: dict, paths: list[str]) -> list[str]:
    inc = [glob_regex(p) for p in config.get("include_patterns", [])]
    exc = [glob_regex(p) for p in config.get("exclude_patterns", [])]
    return [p for p in paths if any(r.match(p) for r in inc) and not any(r.match(p) for r in exc)]


def long_added_lines(diff: str, columns: int = COLUMNS) -> list[Finding]:
    """Added C++ lines longer than `columns`, from a unified diff with -U0."""
    found, path, line = [], None, 0
    for text in diff.splitlines():
        if text.startswith("+++ "):
            path = text[len("+++ b/"):] if text != "+++ /dev/null" else None
        elif text.startswith("@@"):
            line = int(re.match(r"@@ -\S+ \+(\d+)", text).group(1))
        elif text.startswith("+") and path and path.endswith(CXX) and not path.startswith(TEMPLATES):
            if len(text) - 1 > columns:
                found.append(Finding(path, line, "COLUMNS", "80", f"{len(text) - 1} columns"))
            line += 1
    return found


def _adapter(py: str, tree: Path, adapter: str, files: list[str], extra: list[str]) -> list[Finding]:
    if not files:
        return []
    proc = subprocess.run([py, f"tools/linter/adapters/{adapter}", *extra, "--", *files],
                          cwd=tree, capture_output=True, text=True)
    found = []
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            m = json.loads(line)
            found.append(Finding(m["path"], m.get("line"), m["code"], m["name"],
                                 (m.get("description") or "").splitlines()[0] if m.get("description") else "",
                                 m.get("replacement")))
    if proc.returncode != 0 and not found:
        found.append(Finding(adapter, None, "LINTER", "error", proc.stderr.strip()[-500:]))
    return found


def check(tree: Path, base: str, head: str = "HEAD") -> list[Finding]:
    """What upstream's linters find in the files the series (base..head) adds or changes."""
    py = lint_python()
    changed = git(tree, "diff", "--name-only", "--diff-filter=AM", f"{base}..{head}",
                  capture=True).stdout.split()
    added = set(git(tree, "diff", "--name-only", "--diff-filter=A", f"{base}..{head}",
                    capture=True).stdout.split())
    config = {c["code"]: c for c in tomllib.loads((tree / ".lintrunner.toml").read_text())["linter"]}
    clang = sorted(set(selected(config["CLANGFORMAT"], changed)) |
                   {p for p in added if p.endswith(CXX) and not p.startswith(TEMPLATES)})
    found = _adapter(py, tree, "flake8_linter.py", selected(config["FLAKE8"], changed), [])
    found += _adapter(py, tree, "pyfmt_linter.py", selected(config["PYFMT"], changed), [])
    found += _adapter(py, tree, "clangformat_linter.py", clang,
                      [f"--binary={Path(py).parent / 'clang-format'}"])
    diff = git(tree, "diff", "-U0", "--no-color", f"{base}..{head}", capture=True).stdout
    return found + long_added_lines(diff)


def apply(tree: Path, found: list[Finding]) -> list[str]:
    """Writes the formatters' replacements into the tree; returns the paths written."""
    written = []
    for f in found:
        if f.replacement is not None:
            (tree / f.path).write_text(f.replacement)
            written.append(f.path)
    return written


def command(tree: Path, base: str) -> int:
    found = check(tree, base)
    for f in found:
        say(f"lint: {f}")
    say(f"upstream linters (flake8, pyfmt, clang-format, {COLUMNS} columns): "
        f"{len(found)} finding(s) in what the series adds")
    return 1 if found else 0
