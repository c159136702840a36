"""The installed wheel is the patched build and its public surface is what the README says."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import REPO

BUILTINS = ["real", "abs", "log", "max_product", "max_plus", "entropy", "log_entropy", "counting", "boolean"]


def test_version_names_the_series():
    expected = os.environ.get("TORCH_SEMIRING_EXPECTED_VERSION", "+semiring.")
    assert torch.__version__.startswith("2.6.0+semiring."), torch.__version__
    assert torch.__version__.endswith(expected)


def test_builtins_have_exactly_these_names():
    from torch.autograd import semiring

    assert list(semiring.builtin_semirings) == BUILTINS
    for name in BUILTINS:
        assert getattr(semiring, name).name == name
    assert torch.autograd.Semiring is semiring.Semiring


def test_readme_example_runs_and_matches_the_readme():
    example = (REPO / "examples" / "top_gradient_path.py").read_text()
    readme = (REPO / "README.md").read_text()
    block = re.search(r"<!-- example:begin -->\n```python\n(.*?)```\n<!-- example:end -->", readme, re.S)
    assert block is not None, "README lost its example block"
    assert block.group(1) == example.split('"""\n', 2)[-1], "README example and examples/ differ"
    out = subprocess.run([sys.executable, str(REPO / "examples" / "top_gradient_path.py")],
                         capture_output=True, text=True, check=True).stdout
    assert "top path value per input" in out and "gradient-graph entropy" in out
    assert "largest path magnitude" in out and "is the product of its local derivatives" in out
    printed = re.search(r"<!-- example:end -->\n\nIt prints:\n\n```text\n(.*?)```\n", readme, re.S)
    assert printed is not None and printed.group(1) == out, "README's printed output is not the example's"


def test_pip_installs_the_wheel_on_debian_trixie(tmp_path):
    # What `build` tells a Debian trixie host with CPython 3.13 (the build root is one): pip
    # install of the wheel and its pinned requirements into a fresh venv, then the README's
    # example with that venv's python.
    import tomllib

    if "VERSION_CODENAME=trixie" not in Path("/etc/os-release").read_text():
        pytest.skip("not a Debian trixie system")
    wheels = sorted((REPO / "dist").glob(f"torch-{torch.__version__}-cp313-*.whl"))
    assert wheels, f"no wheel of torch {torch.__version__} in {REPO / 'dist'}"
    pins = tomllib.loads((REPO / "upstream.toml").read_text())["runtime"]["requirements"]
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    # The build's pip, pointed at the new venv: trixie's venv module has no bundled pip wheel
    # without python3-pip-whl.
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q",
           "--no-deps", "--disable-pip-version-check"]
    subprocess.run([*pip, "--only-binary=:all:", *pins], check=True)
    subprocess.run([*pip, "--no-index", str(wheels[-1])], check=True)
    out = subprocess.run([str(venv / "bin" / "python"), str(REPO / "examples" / "top_gradient_path.py")],
                         capture_output=True, text=True, check=True, cwd=tmp_path)
    assert "top path value per input" in out.stdout, out.stderr
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import torch; print(torch.__file__)"],
                           capture_output=True, text=True, check=True).stdout
    assert where.startswith(str(venv)), where


def test_semiring_none_adds_no_kwargs_for_torch_function_overrides():
    # __torch_function__ overrides of Tensor.backward see the same call as before the series.
    from torch.overrides import TorchFunctionMode

    seen = []

    class Spy(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func is torch.Tensor.backward:
                seen.append(dict(kwargs or {}))
            return func(*args, **(kwargs or {}))

    x = torch.ones(2, requires_grad=True)
    y = torch.ones(2, requires_grad=True)  # its own .grad: a .grad never mixes semirings
    with Spy():
        (x * 2).sum().backward()
        (y * 2).sum().backward(semiring="counting")
    assert "semiring" not in seen[0]
    assert seen[1]["semiring"] == "counting"
