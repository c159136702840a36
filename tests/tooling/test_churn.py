"""scripts/semiring stats --churn counts the lines a later commit rewrites, and only those."""
import subprocess
from pathlib import Path

from semiring_tool import churn


def commit(repo: Path, name: str, text: str, msg: str) -> None:
    (repo / name).write_text(text)
    subprocess.run(["git", "-C", str(repo), "add", name], check=True)
    subprocess.run(["git", "-C", str(repo), "commit", "-q", "-m", msg], check=True)


def test_churn_counts_series_lines_rewritten_by_a_later_patch(tmp_path):
    repo = tmp_path / "r"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "config", "user.email", "t@invalid"], check=True)
    subprocess.run(["git", "-C", str(repo), "config", "user.name", "t"], check=True)
    upstream = "".join(f"u{i}\n" for i in range(5))
    commit(repo, "f.txt", upstream, "upstream")
    subprocess.run(["git", "-C", str(repo), "tag", "base"], check=True)
    # patch 1 adds 4 lines; patch 2 rewrites one of them and one upstream line, adds one more;
    # patch 3 deletes another line of patch 1 in a second file's company.
    p1 = upstream + "a\nb\nc\nd\n"
    commit(repo, "f.txt", p1, "p1")
    p2 = "U0\n" + p1.split("\n", 1)[1].replace("b\n", "B\n") + "e\n"
    commit(repo, "f.txt", p2, "p2")
    commit(repo, "g.txt", "new\n", "p3a")
    commit(repo, "f.txt", p2.replace("c\n", ""), "p3b")
    got = churn.measure(repo, "base")
    # added: p1 4, p2 3 (U0, B, e), g 1 -> 8; rewritten series lines: b (by p2), c (by p3b).
    assert (got.added, got.rewritten) == (8, 2)
    assert got.pairs == {(2, 1): 1, (4, 1): 1}
    assert "2 (25.00%)" in churn.report(got, ["p1", "p2", "p3a", "p3b"])
