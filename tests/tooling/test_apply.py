"""apply/export round trip and strict (fuzz-free) application."""
import subprocess

import pytest

from semiring_tool import series
from semiring_tool.base import git
from semiring_tool.config import PATCHES, load_pin
from semiring_tool.progress import ToolError


def test_apply_then_export_is_byte_identical(tmp_path):
    pin = load_pin()
    work = series.apply(pin, tmp_path / "work")
    out = tmp_path / "exported"
    names = series.export_to(work, out)
    assert names == series.read_series()
    for n in names:
        assert (out / n).read_bytes() == (PATCHES / n).read_bytes(), n


def _toy_repo(tmp_path):
    repo = tmp_path / "toy"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "f.txt").write_text("".join(f"line {i}\n" for i in range(1, 21)))
    git(repo, "add", "f.txt")
    git(repo, "commit", "-q", "-m", "base")
    return repo


def _patch_changing_line_10(repo, tmp_path):
    text = (repo / "f.txt").read_text().replace("line 10\n", "line ten\n")
    (repo / "f.txt").write_text(text)
    git(repo, "commit", "-q", "-am", "change line 10")
    out = tmp_path / "p"
    git(repo, "format-patch", "-q", "-1", "-o", str(out))
    git(repo, "reset", "-q", "--hard", "HEAD~1")
    return next(out.iterdir())


def test_fuzz_is_refused_naming_patch_and_hunk(tmp_path):
    repo = _toy_repo(tmp_path)
    patch = _patch_changing_line_10(repo, tmp_path)
    # One context line differs: GNU patch would apply this with fuzz 1.
    (repo / "f.txt").write_text((repo / "f.txt").read_text().replace("line 8\n", "line eight\n"))
    git(repo, "commit", "-q", "-am", "drift")
    assert subprocess.run(["patch", "-p1", "--dry-run", "-i", str(patch)], cwd=repo,
                          capture_output=True, text=True).stdout.count("fuzz") == 1
    with pytest.raises(ToolError) as e:
        series.am(repo, patch)
    assert patch.name in str(e.value)
    assert "hunk at f.txt:" in str(e.value)
    # Nothing half-applied is left behind.
    assert git(repo, "status", "--porcelain", capture=True).stdout == ""


def test_offset_without_fuzz_applies(tmp_path):
    repo = _toy_repo(tmp_path)
    patch = _patch_changing_line_10(repo, tmp_path)
    (repo / "f.txt").write_text("new first line\n" + (repo / "f.txt").read_text())
    git(repo, "commit", "-q", "-am", "shift")
    series.am(repo, patch)
    assert "line ten" in (repo / "f.txt").read_text()


def test_apply_refuses_to_drop_unexported_work(tmp_path):
    pin = load_pin()
    work = series.apply(pin, tmp_path / "work", upto=1)
    (work / "README.md").write_text("local edit\n")
    with pytest.raises(ToolError, match="uncommitted changes"):
        series.apply(pin, work)
    assert (work / "README.md").read_text() == "local edit\n"
