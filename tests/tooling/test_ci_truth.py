"""CI tells the truth: the workflow is checked, and the verdict line says which tiers ran."""
import textwrap

import pytest

from conftest import REPO
from semiring_tool import build, buildroot, testing
from semiring_tool.config import load_pin

GOOD_STEP = '      - name: "build: patched"\n        run: echo ok\n'


def _workflow(tmp_path, runs_on="ubuntu-24.04", step=GOOD_STEP):
    path = tmp_path / "wf.yml"
    path.write_text(textwrap.dedent(f"""\
        name: t
        on: [push]
        jobs:
          cpu:
            runs-on: {runs_on}
            steps:
        """) + step)
    return path


def test_project_workflow_passes():
    assert testing.workflow_check(REPO / "ci" / "github-workflow.yml") == 0


def test_workflow_checks_catch_each_mistake(tmp_path):
    assert testing.workflow_check(_workflow(tmp_path)) == 0
    # An unquoted colon in a step name: not YAML.
    assert testing.workflow_check(_workflow(tmp_path, step="      - name: build: patched\n        run: x\n")) == 1
    assert testing.workflow_check(_workflow(tmp_path, runs_on="ubuntu-24.04-16core")) == 1
    # Valid YAML, but not a workflow: a step must have `run` or `uses`.
    assert testing.workflow_check(_workflow(tmp_path, step='      - name: "x"\n')) != 0


def test_without_a_build_the_last_line_says_fast_tier_only(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TORCH_SEMIRING_STATE", str(tmp_path))
    monkeypatch.setattr(testing, "fast_tier", lambda pin, args, prefix: 0)
    ran_full = []
    monkeypatch.setattr(testing, "full_tier", lambda *a: ran_full.append(a) or 0)
    pin = load_pin()
    assert build.build_state(pin)[0] is False
    assert testing.test(pin) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert "PASSED (fast tier only: no build of this series)" in last
    assert not ran_full


def test_a_stale_build_stamp_is_not_a_build(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_SEMIRING_STATE", str(tmp_path))
    pin = load_pin()
    monkeypatch.setattr(buildroot, "host_is", lambda suite: False)
    v = build.variant(pin, unpatched=False, cuda=False)
    root = tmp_path / f"root-{pin.suite}"
    (root / ".torch-semiring-root").parent.mkdir(parents=True)
    (root / ".torch-semiring-root").write_text("x\n")
    stamp = build.stamp_path(build.BuildRoot(root), v)
    stamp.parent.mkdir(parents=True)
    stamp.write_text("0123456789abcdef deadbee\n")
    have, why = build.build_state(pin)
    assert not have and f"is not of {v.local_version}" in why
    stamp.write_text(f"{build.build_stamp(pin, v)} deadbee\n")
    assert build.build_state(pin) == (True, f"the build in {v.name} is of {v.local_version} "
                                            f"(stamp {build.build_stamp(pin, v)})")


def test_arguments_reach_the_tier_that_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_SEMIRING_STATE", str(tmp_path))
    seen = {}
    monkeypatch.setattr(testing, "fast_tier", lambda pin, args, prefix: seen.setdefault("fast", args) and 0)
    monkeypatch.setattr(testing, "full_tier", lambda pin, rebuild, args, prefix: seen.setdefault("full", args) and 0)
    pin = load_pin()
    testing.test(pin, pytest_args=["-k", "x"])
    assert seen == {"fast": ["-k", "x"]}
    seen.clear()
    monkeypatch.setattr(build, "build_state", lambda pin, prefix=None: (True, "current"))
    testing.test(pin, pytest_args=["-k", "x"])
    assert seen == {"fast": [], "full": ["-k", "x"]}


def test_a_prefix_builds_in_the_patched_tree_under_its_own_label():
    pin = load_pin()
    n = len(build.series.read_series())
    full, engine = build.variant(pin, False, False), build.variant(pin, False, False, prefix=4)
    assert (engine.name, engine.patches, engine.local_version) == ("semiring", 4, f"semiring.{pin.series_version}.p4")
    assert engine.build_command == "scripts/semiring build --prefix 4"
    assert build.variant(pin, False, False, prefix=n) == full
    assert build.build_stamp(pin, engine) != build.build_stamp(pin, full)
    with pytest.raises(build.ToolError, match="--prefix takes 2 to"):
        build.variant(pin, False, False, prefix=1)
