"""An interrupted build resumes where it stopped (the runner around ninja)."""
import os
import signal
import subprocess
import sys
import textwrap
import time

from conftest import REPO

RUNNER = textwrap.dedent("""
    import sys
    from pathlib import Path
    sys.path.insert(0, {scripts!r})
    from semiring_tool.build import run_with_progress
    from semiring_tool.buildroot import BuildRoot
    from semiring_tool.progress import ToolError
    d = Path({d!r})
    try:
        rc, _ = run_with_progress(BuildRoot(None), ["ninja", "-j1"], str(d), {{"PATH": "/usr/bin:/bin"}},
                                  d / "build.log", "toy build")
    except ToolError as e:
        print("interrupted:", e)
        sys.exit(130)
    sys.exit(rc)
""")


def _project(d, steps=6):
    rules = "rule step\n  command = sleep 0.4 && touch $out\n"
    builds = "".join(f"build out{i}: step\n" for i in range(steps))
    (d / "build.ninja").write_text(rules + builds)


def test_interrupted_build_resumes(tmp_path):
    _project(tmp_path)
    script = RUNNER.format(scripts=str(REPO / "scripts"), d=str(tmp_path))
    # A background job (CI) may start us with SIGINT ignored; the child must see Ctrl-C.
    first = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 20
    while len(list(tmp_path.glob("out*"))) < 2 and time.time() < deadline:
        time.sleep(0.05)
    first.send_signal(signal.SIGINT)
    out, _ = first.communicate(timeout=20)
    assert first.returncode == 130, out
    assert "run the same command again to resume" in out
    time.sleep(1)  # a killed step must not finish behind our back
    done_before = len(list(tmp_path.glob("out*")))
    # ninja removes the outputs of the steps it interrupts, and a step may have touched its
    # output without having exited when the signal came: so at least one of the two seen.
    assert 1 <= done_before < 6
    second = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert second.returncode == 0, second.stdout
    assert len(list(tmp_path.glob("out*"))) == 6
    # ninja only ran what was left: its progress counts the remaining steps.
    assert f"[{6 - done_before}/{6 - done_before}]" in second.stdout
