"""scripts/semiring test: the fast tier always, the full tier when a build cache exists."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from . import build, series
from .buildroot import ensure_root
from .config import REPO, Pin, state_dir
from .progress import Stopwatch, ToolError, fmt_seconds, run, say

PYTEST = "pytest==8.3.5"


def host_python() -> str:
    """A venv on the host with pytest, for the tooling tests (the host Python may lack it)."""
    venv = state_dir() / "host-venv"
    py = venv / "bin" / "python"
    if not py.exists() or subprocess.run([str(py), "-c", "import pytest, yaml"],
                                         capture_output=True).returncode != 0:
        say(f"creating {venv} with {PYTEST} for the tooling tests")
        run([sys.executable, "-m", "venv", str(venv)])
        run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", PYTEST, "pyyaml",
             "typing_extensions"])
    return str(py)


def codegen(pin: Pin) -> None:
    """Runs the autograd code generator on the patched tree (no build needed)."""
    tree = state_dir() / "work" / "check"
    with tempfile.TemporaryDirectory() as out:
        run([host_python(), "-B", "-m", "tools.autograd.gen_autograd",
             "aten/src/ATen/native/native_functions.yaml", "aten/src/ATen/native/tags.yaml",
             out, "tools/autograd"], cwd=tree, capture=True)
        n = len(list(Path(out).iterdir()))
    say(f"codegen: tools/autograd generated {n} files from the patched tree")


def fast_tier(pin: Pin, pytest_args: list[str]) -> int:
    series.check(pin)
    codegen(pin)
    say("tooling tests (tests/tooling)")
    return subprocess.run([host_python(), "-m", "pytest", "-q", "tests/tooling", *pytest_args],
                          cwd=REPO).returncode


def full_tier(pin: Pin, rebuild: bool, pytest_args: list[str]) -> int:
    br = ensure_root(pin)
    v = build.variant(pin, unpatched=False, cuda=False)
    if rebuild:
        build.build(pin)
    py = build.venv_python(br, v)
    repo = br.expose(REPO, "/repo")
    tree = f"{v.area(br)}/pytorch"
    env = {"PYTHONDONTWRITEBYTECODE": "1", "HOME": "/root", "LC_ALL": "C.UTF-8",
           "TORCH_SEMIRING_EXPECTED_VERSION": f"+{v.local_version}",
           "TORCH_SEMIRING_TREE": tree}
    rc = 0
    steps = [
        ("project tests (tests/feature) against the installed wheel",
         [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"{repo}/tests/feature", *pytest_args]),
        ("upstream-style tests in the patch (test/autograd/test_semiring.py)",
         [py, f"{tree}/test/autograd/test_semiring.py"]),
    ]
    for label, argv in steps:
        say(label)
        proc = subprocess.run(br.command(argv, cwd="/tmp", env=env, binds={REPO: "/repo"}))
        rc = rc or proc.returncode
    return rc


def test(pin: Pin, fast: bool = False, rebuild: bool = True, pytest_args: list[str] | None = None) -> int:
    pytest_args = pytest_args or []
    watch = Stopwatch()
    say("tier 1 (fast): lint, apply, round trip, codegen, tooling tests")
    rc = fast_tier(pin, pytest_args if fast else [])
    ran = ["fast"]
    if fast:
        say("tier 2 (full) not run: --fast")
    elif not build.have_build(pin):
        say("tier 2 (full) SKIPPED: no build cache for this pin and configuration; "
            "run 'scripts/semiring build' first (about 95 minutes cold on 2 cores)")
    else:
        say("tier 2 (full): incremental build, then every test against the patched build")
        rc = full_tier(pin, rebuild, pytest_args) or rc
        ran.append("full")
    say(f"tiers run: {' + '.join(ran)}; {'PASSED' if rc == 0 else 'FAILED'} in {fmt_seconds(watch.elapsed)}")
    return rc
