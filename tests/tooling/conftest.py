import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))


@pytest.fixture
def patches_copy(tmp_path):
    """A copy of the project's patches/ directory to break in a test."""
    import shutil

    dst = tmp_path / "patches"
    shutil.copytree(REPO / "patches", dst)
    return dst
