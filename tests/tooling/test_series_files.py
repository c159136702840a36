"""Debian's quilt series and git's mail headers, read by the rules of the tools that write them."""
import pytest

from semiring_tool import series
from semiring_tool.base import QuiltEntry, apply_quilt_entry, git, read_quilt_series
from semiring_tool.progress import ToolError


def test_quilt_series_comments_blank_lines_and_options():
    text = ("# Debian's patches, in order\n"
            "\n"
            "0001-fix.patch\n"
            "  1020-hack.patch   # a comment after whitespace\n"
            "issue#12.patch\n"
            "2000-version.patch -p0\n"
            "revert.patch -R -p2\n"
            "\t\n")
    assert read_quilt_series(text) == [
        QuiltEntry("0001-fix.patch"), QuiltEntry("1020-hack.patch"), QuiltEntry("issue#12.patch"),
        QuiltEntry("2000-version.patch", strip=0), QuiltEntry("revert.patch", strip=2, reverse=True)]


def test_quilt_series_option_quilt_does_not_take_names_the_line():
    with pytest.raises(ToolError, match=r"series:2: option '--fuzz=3' of b.patch"):
        read_quilt_series("a.patch\nb.patch --fuzz=3\n")


def test_quilt_options_are_honoured_when_applying(tmp_path):
    tree, patches = tmp_path / "tree", tmp_path / "patches"
    tree.mkdir()
    patches.mkdir()
    (tree / "f.txt").write_text("one\n")
    # A -p0 patch (no a/ b/ prefixes) and one that is in the series to be reverted (-R).
    (patches / "p0.patch").write_text("--- f.txt\n+++ f.txt\n@@ -1 +1 @@\n-one\n+two\n")
    (patches / "undo.patch").write_text("--- a/f.txt\n+++ b/f.txt\n@@ -1 +1 @@\n-three\n+two\n")
    for e in read_quilt_series("p0.patch -p0\nundo.patch -R\n"):
        apply_quilt_entry(tree, patches, e)
    assert (tree / "f.txt").read_text() == "three\n"


def test_project_series_takes_no_options(tmp_path):
    (tmp_path / "series").write_text("a.patch -p0\n")
    with pytest.raises(ToolError, match="git am"):
        series.read_series(tmp_path / "series")


# Long enough that git folds the encoded header over several lines.
SUBJECT = "autograd: the semiring's ⊕ and ⊗ in naïve backward — one more word to fold the header"


def _export_non_ascii_commit(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "f.txt").write_text("one\n")
    git(repo, "add", "f.txt")
    git(repo, "commit", "-q", "-m", "base")
    git(repo, "tag", series.BASE_TAG)
    (repo / "f.txt").write_text("two\n")
    message = (f"{SUBJECT}\n\nWhy: the commit message's body, in UTF-8 (Ärger).\n\n"
               "Origin: vendor, torch-semiring\nForwarded: no\nUpstream-Status: Pending\n"
               "Layer: feature\nLast-Update: 2026-11-22\n")
    git(repo, "commit", "-q", "-am", message)
    (name,) = series.export_to(repo, tmp_path / "out")
    return repo, tmp_path / "out" / name


def test_non_ascii_subject_is_decoded_and_round_trips(tmp_path):
    repo, patch = _export_non_ascii_commit(tmp_path)
    text = patch.read_text()
    assert "Subject: [PATCH] =?UTF-8?q?" in text and "\n =?UTF-8?q?" in text  # encoded and folded
    hdr = series.parse_header(text)
    assert hdr.subject == SUBJECT
    assert hdr.description == ["Why: the commit message's body, in UTF-8 (Ärger)."]
    assert hdr.fields["Upstream-Status"] == "Pending" and hdr.fields["Layer"] == "feature"
    # git am reads it back to the same commit, which exports to the same bytes.
    git(repo, "reset", "-q", "--hard", series.BASE_TAG)
    series.am(repo, patch)
    assert git(repo, "log", "-1", "--format=%s", capture=True).stdout.strip() == SUBJECT
    (again,) = series.export_to(repo, tmp_path / "again")
    assert (tmp_path / "again" / again).read_bytes() == patch.read_bytes()


def test_header_without_from_does_not_parse(tmp_path):
    _, patch = _export_non_ascii_commit(tmp_path)
    text = "".join(ln for ln in patch.read_text().splitlines(True) if not ln.startswith("From: "))
    with pytest.raises(ValueError, match="no From header"):
        series.parse_header(text)
