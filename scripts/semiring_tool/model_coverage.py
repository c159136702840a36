"""scripts/semiring model-coverage: the backward nodes the reference models reach, and their rules.

Runs tests/reference_models.py with the build root's venv (the installed patched wheel): each
model's forward, then torch.autograd.semiring.coverage, which walks the graph and runs no
backward. The Hugging Face models need the test requirements (`scripts/semiring test` installs
them); without them they are reported as not run.
"""
from __future__ import annotations

import subprocess

from . import build
from .buildroot import REPO_BIND, ensure_root
from .config import REPO, Pin


def command(pin: Pin, models: list[str]) -> int:
    br = ensure_root(pin)
    py = build.venv_python(br, build.variant(pin, unpatched=False, cuda=False))
    argv = [py, f"{REPO}/tests/reference_models.py", *models]
    return subprocess.run(br.command(argv, cwd="/tmp", env={"PYTHONDONTWRITEBYTECODE": "1"},
                                     binds=REPO_BIND)).returncode
