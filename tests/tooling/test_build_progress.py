"""The build's progress line estimates from ninja's log of an earlier build, when there is one."""
from semiring_tool.build import run_with_progress
from semiring_tool.buildroot import BuildRoot


def toy_build(area, capsys):
    """Builds a 4-step ninja project laid out as build() lays out a variant; returns what it printed."""
    build_dir = area / "pytorch" / "build"
    build_dir.mkdir(parents=True, exist_ok=True)
    steps = "".join(f"build out{i}: step\n" for i in range(4))
    (build_dir / "build.ninja").write_text("rule step\n  command = sleep 0.2 && touch $out\n" + steps)
    for out in build_dir.glob("out*"):
        out.unlink()
    rc, _ = run_with_progress(BuildRoot(None), ["ninja", "-j1"], str(build_dir), {"PATH": "/usr/bin:/bin"},
                              area / "build.log", "toy build")
    assert rc == 0
    return capsys.readouterr().out


def test_estimate_from_this_or_another_variants_ninja_log(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MAX_JOBS", "1")
    first = toy_build(tmp_path / "semiring", capsys)
    assert "no ninja log of an earlier build" in first and "[4/4]" in first and "(this run's rate)" in first
    again = toy_build(tmp_path / "semiring", capsys)
    assert "ninja has 4 steps to run, expected ~0m0" in again and "(ninja's log)" in again
    # A cold build of another variant: the first variant's log stands in for its own.
    other = toy_build(tmp_path / "unpatched", capsys)
    assert "4 at the time recorded for them" in other and "(ninja's log)" in other
