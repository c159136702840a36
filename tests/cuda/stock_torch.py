"""The headers of the pinned stock PyTorch wheel from PyPI, for the compile step without a GPU.

The GPU machines run a stock PyTorch of this version (with CUDA 13, as the nvcc here); the
extension is compiled here against the same headers, so that it cannot rot between GPU runs.
The wheel is fetched once with pip (hash-checked) and its include/ unpacked into a cache.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

VERSION = "2.11.0"
WHEEL = f"torch-{VERSION}-cp312-cp312-manylinux_2_28_x86_64.whl"
SHA256 = "0f68f4ac6d95d12e896c3b7a912b5871619542ec54d3649cf48cc1edd4dd2756"
CACHE = Path(os.environ.get("TORCH_SEMIRING_CACHE", "/var/cache/torch-semiring")) / "stock-torch"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def include_dir() -> Path:
    """torch/include of the pinned wheel, fetched and unpacked when missing."""
    root = CACHE / f"torch-{VERSION}"
    include = root / "torch" / "include"
    if (root / ".complete").exists():
        return include
    CACHE.mkdir(parents=True, exist_ok=True)
    wheel = CACHE / WHEEL
    if not wheel.exists() or _sha256(wheel) != SHA256:
        print(f"stock torch: fetching {WHEEL} from PyPI (about 530 MB, once)", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                        "--python-version", "3.12", "--implementation", "cp",
                        "--platform", "manylinux_2_28_x86_64", "-d", str(CACHE), f"torch=={VERSION}"],
                       check=True)
    if _sha256(wheel) != SHA256:
        raise RuntimeError(f"{wheel}: sha256 differs from the pinned {SHA256}")
    with zipfile.ZipFile(wheel) as z:
        z.extractall(root, [n for n in z.namelist() if n.startswith("torch/include/")])
    (root / ".complete").write_text(f"{WHEEL}\n")
    return include
