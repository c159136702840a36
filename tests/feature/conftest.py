"""Project tests that drive the installed patched wheel (run by 'scripts/semiring test')."""
import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The patched source tree the wheel was built from (for the upstream tests).
TREE = Path(os.environ.get("TORCH_SEMIRING_TREE", "/nonexistent"))
