"""The patch series: parse, lint, apply as commits, export back with stable output."""
from __future__ import annotations

import email.policy
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from email.parser import HeaderParser
from pathlib import Path

from .base import BASE_TAG, ensure_base, git, read_quilt_series
from .config import PATCHES, REPO, SERIES, Pin, state_dir
from .progress import ToolError, say

BRANCH = "semiring"
FORMAT_PATCH = ["format-patch", "--zero-commit", "--full-index", "--no-signature", "-N",
                "--no-stat", "--no-numbered", "--encode-email-headers"]

# DEP-3 fields, with Yocto's richer Upstream-Status, plus Layer: which patches
# `build --unpatched` keeps (build-system adaptations) and which it drops (the feature).
FIELDS: dict[str, re.Pattern] = {
    "Origin": re.compile(r"(upstream|backport|vendor|other)(, .+)?$"),
    "Forwarded": re.compile(r"(no|not-needed|https?://\S+)$"),
    "Upstream-Status": re.compile(
        r"(Pending|Submitted \[.+\]|Accepted|Backport|Denied|Inappropriate \[.+\])$"),
    "Layer": re.compile(r"(build|feature)$"),
    "Last-Update": re.compile(r"\d{4}-\d{2}-\d{2}$"),
}
OPTIONAL_FIELDS = {"Applied-Upstream", "Bug"}


@dataclass
class PatchHeader:
    subject: str
    description: list[str]
    fields: dict[str, str] = field(default_factory=dict)


def read_series(series: Path = SERIES) -> list[str]:
    """The patch names of a quilt series file (ours is applied with git am, so no options)."""
    if not series.exists():
        return []
    entries = read_quilt_series(series.read_text(), str(series))
    for e in entries:
        if (e.strip, e.reverse) != (1, False):
            raise ToolError(f"{series}: {e.name} carries quilt options; the series is applied with "
                            f"'git am' (-p1), so list plain names")
    return [e.name for e in entries]


def parse_header(text: str) -> PatchHeader:
    """Parse the mail header and commit message of a `git format-patch` file."""
    head, sep, _ = text.partition("\ndiff --git ")
    if not sep:
        raise ValueError("contains no diff ('diff --git' line)")
    if not head.startswith("From "):
        raise ValueError("not a git format-patch file (first line must be 'From <sha> ...')")
    # The standard mail parser: it unfolds long headers and decodes the RFC 2047 words that
    # `format-patch --encode-email-headers` writes for a non-ASCII subject or author.
    msg = HeaderParser(policy=email.policy.default).parsestr(head)
    for name in ("From", "Date", "Subject"):
        if not msg[name]:
            raise ValueError(f"no {name} header")
    hdr = PatchHeader(subject=str(msg["Subject"]).removeprefix("[PATCH] "), description=[])
    for ln in msg.get_payload().splitlines():
        m = re.match(r"^([A-Z][A-Za-z-]+): (.*)$", ln)
        if m and (m.group(1) in FIELDS or m.group(1) in OPTIONAL_FIELDS):
            hdr.fields[m.group(1)] = m.group(2).strip()
        elif ln.strip() or hdr.description:
            hdr.description.append(ln)
    while hdr.description and not hdr.description[-1].strip():
        hdr.description.pop()
    return hdr


def lint_patch(path: Path) -> list[str]:
    """Problems with one patch file, as messages naming it."""
    name = path.name
    text = path.read_text()
    problems = []
    try:
        hdr = parse_header(text)
    except ValueError as e:
        return [f"{name}: does not parse: {e}"]
    if not any(ln.strip() for ln in hdr.description):
        problems.append(f"{name}: no description: say what the patch does and why, below the subject")
    for key, pattern in FIELDS.items():
        value = hdr.fields.get(key)
        if value is None:
            problems.append(f"{name}: missing header field '{key}:'")
        elif not pattern.match(value):
            problems.append(f"{name}: header field '{key}: {value}' is not one of the allowed values "
                            f"({pattern.pattern})")
    for n, ln in enumerate(text.splitlines(), 1):
        # Context and removed lines quote upstream as it is; only what we write must be clean.
        if ln != ln.rstrip() and not ln.startswith((" ", "-")) and ln not in ("+", ""):
            problems.append(f"{name}:{n}: trailing whitespace")
    return problems


def lint(patches: Path = PATCHES) -> list[str]:
    series_file = patches / "series"
    if not series_file.exists():
        return [f"{series_file}: missing"]
    entries = read_series(series_file)
    problems = []
    seen: set[str] = set()
    for e in entries:
        if e in seen:
            problems.append(f"series: '{e}' is listed twice")
        seen.add(e)
        if not (patches / e).exists():
            problems.append(f"series: '{e}' is listed but does not exist")
        else:
            problems += lint_patch(patches / e)
    for p in sorted(patches.glob("*.patch")):
        if p.name not in seen:
            problems.append(f"{p.name}: not listed in series")
    layers = [parse_header((patches / e).read_text()).fields.get("Layer")
              for e in entries if (patches / e).exists() and not lint_patch(patches / e)]
    if "build" in layers and "feature" in layers and \
            layers.index("feature") < len(layers) - 1 - layers[::-1].index("build"):
        problems.append("series: every 'Layer: build' patch must come before the first feature patch")
    return problems


def build_layer_count(patches: Path = PATCHES) -> int:
    n = 0
    for e in read_series(patches / "series"):
        if parse_header((patches / e).read_text()).fields.get("Layer") != "build":
            break
        n += 1
    return n


def default_worktree() -> Path:
    return state_dir() / "work" / "pytorch"


def _failed_hunk(output: str) -> str:
    hunks = re.findall(r"error: patch failed: (\S+)", output)
    missing = re.findall(r"error: (\S+): does not exist in index", output)
    if hunks:
        return "hunk at " + ", ".join(hunks)
    if missing:
        return "file missing: " + ", ".join(missing)
    return output.strip().splitlines()[-1] if output.strip() else "unknown reason"


def am(worktree: Path, patch: Path) -> None:
    """Apply one patch as a commit; no fuzz, no three-way merge."""
    proc = git(worktree, "am", "--quiet", "--no-3way", "--whitespace=nowarn", str(patch),
               capture=True, check=False)
    if proc.returncode != 0:
        git(worktree, "am", "--abort", check=False, capture=True)
        raise ToolError(f"patch {patch.name} does not apply without fuzz: {_failed_hunk(proc.stdout)}\n"
                        f"{proc.stdout.strip()}")


def export_to(worktree: Path, out: Path) -> list[str]:
    """Write the branch's commits above the base as patches into `out`; return their names."""
    out.mkdir(parents=True, exist_ok=True)
    proc = git(worktree, *FORMAT_PATCH, "-o", str(out), f"{BASE_TAG}..HEAD", capture=True)
    return [Path(p).name for p in proc.stdout.split()]


def _unexported_changes(worktree: Path, patches: Path) -> str | None:
    if git(worktree, "status", "--porcelain", "--untracked-files=no", capture=True).stdout.strip():
        return "it has uncommitted changes"
    with tempfile.TemporaryDirectory() as tmp:
        names = export_to(worktree, Path(tmp))
        listed = read_series(patches / "series")
        if names != listed:
            return f"its commits ({len(names)}) differ from the series ({len(listed)})"
        for n in names:
            if (Path(tmp) / n).read_bytes() != (patches / n).read_bytes():
                return f"its commit for {n} differs from patches/{n}"
    return None


def apply(pin: Pin, worktree: Path | None = None, patches: Path = PATCHES,
          upto: int | None = None, force: bool = False) -> Path:
    """A fresh work tree: base layer + the series (or its first `upto` patches), one commit each."""
    worktree = worktree or default_worktree()
    base = ensure_base(pin)
    entries = read_series(patches / "series")
    if upto is not None:
        entries = entries[:upto]
    if worktree.exists():
        if (worktree / ".git").exists() and not force:
            reason = _unexported_changes(worktree, patches)
            if reason:
                raise ToolError(f"refusing to replace the work tree {worktree}: {reason}. "
                                f"Run 'scripts/semiring export' to keep that work, or pass --force to drop it.")
        shutil.rmtree(worktree)
    worktree.parent.mkdir(parents=True, exist_ok=True)
    git(base, "clone", "-q", "--no-checkout", str(base), str(worktree))
    git(worktree, "checkout", "-q", "-b", BRANCH, BASE_TAG)
    for i, e in enumerate(entries, 1):
        say(f"apply [{i}/{len(entries)}] {e}")
        am(worktree, patches / e)
    say(f"work tree {worktree}: branch '{BRANCH}' = {BASE_TAG} + {len(entries)} patches")
    return worktree


def export(worktree: Path | None = None, patches: Path = PATCHES) -> list[str]:
    """Write the work tree's series back into patches/ and patches/series."""
    worktree = worktree or default_worktree()
    if not (worktree / ".git").exists():
        raise ToolError(f"no work tree at {worktree}; run 'scripts/semiring apply' first")
    if git(worktree, "status", "--porcelain", "--untracked-files=no", capture=True).stdout.strip():
        raise ToolError(f"{worktree} has uncommitted changes; commit them (one concern per commit) first")
    with tempfile.TemporaryDirectory() as tmp:
        names = export_to(worktree, Path(tmp))
        old = set(read_series(patches / "series"))
        patches.mkdir(exist_ok=True)
        for n in names:
            shutil.copyfile(Path(tmp) / n, patches / n)
        for stale in old - set(names):
            (patches / stale).unlink(missing_ok=True)
    header = "# The series, in order. Written by 'scripts/semiring export'.\n"
    (patches / "series").write_text(header + "".join(n + "\n" for n in names))
    say(f"exported {len(names)} patches to {patches}")
    return names


def check(pin: Pin, patches: Path = PATCHES, upto: int | None = None) -> Path:
    """Lint, then apply (the first `upto` patches) into a scratch work tree and check the
    export round trip; returns the scratch tree."""
    problems = lint(patches)
    if problems:
        raise ToolError("the series does not pass lint:\n  " + "\n  ".join(problems))
    say(f"lint: {len(read_series(patches / 'series'))} patches OK")
    scratch = state_dir() / "work" / "check"
    apply(pin, scratch, patches, upto=upto, force=True)
    with tempfile.TemporaryDirectory() as tmp:
        names = export_to(scratch, Path(tmp))
        for n in names:
            if (Path(tmp) / n).read_bytes() != (patches / n).read_bytes():
                raise ToolError(f"{n}: apply then export does not reproduce it byte for byte; "
                                f"run 'scripts/semiring apply && scripts/semiring export' and commit the result")
    say(f"check: {'the series' if upto is None else f'its first {upto} patches'} "
        f"applies without fuzz and round-trips byte for byte")
    return scratch


def status_table(patches: Path = PATCHES) -> str:
    """docs/building.md's upstreaming table, generated from the patch headers."""
    rows = ["| # | patch | layer | upstream status | forwarded |", "|---|---|---|---|---|"]
    for i, e in enumerate(read_series(patches / "series"), 1):
        h = parse_header((patches / e).read_text())
        rows.append(f"| {i} | {h.subject} | {h.fields.get('Layer', '?')} | "
                    f"{h.fields.get('Upstream-Status', '?')} | {h.fields.get('Forwarded', '?')} |")
    return "\n".join(rows) + "\n"


STATUS_BLOCK = re.compile(r"(<!-- status:begin -->\n).*?(<!-- status:end -->)", re.S)
STATUS_DOC = REPO / "docs" / "building.md"


def with_status(text: str) -> str:
    return STATUS_BLOCK.sub(lambda m: m.group(1) + status_table() + m.group(2), text)


def write_status() -> None:
    STATUS_DOC.write_text(with_status(STATUS_DOC.read_text()))
