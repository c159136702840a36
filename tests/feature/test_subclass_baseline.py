"""benchmarks/subclass_baseline.py --check: the __torch_dispatch__ baseline and the native engine
against the benchmark's own brute-force oracle, on the patched wheel."""
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "subclass_baseline.py"


def test_subclass_baseline_and_native_match_the_oracle():
    r = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True,
                       env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "check: all passed" in r.stdout
    assert "native" in r.stdout  # the patched engine was compared too, not only the subclass
