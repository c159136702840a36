"""Built-in semirings need no Python: a C++ program linked against the wheel's libtorch_cpu
only (tests/cpp/semiring_builtins.cpp) runs every built-in's backward through an MLP and a
small attention block, and its results equal the Python API's bit for bit."""
import math
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.utils import cpp_extension

from conftest import REPO

SOURCE = REPO / "tests" / "cpp" / "semiring_builtins.cpp"

SHAPES = {
    "mlp": {"x": (4, 8), "w1": (16, 8), "b1": (16,), "w2": (8, 16)},
    "attention": {"x": (2, 5, 8), "wq": (8, 8), "wk": (8, 8), "wv": (8, 8)},
}


def mlp(x, w1, b1, w2):
    r = torch.relu(F.linear(torch.tanh(F.linear(x, w1, b1)), w2))
    return (r * r).sum()


def attention(x, wq, wk, wv):
    q, k, v = x.matmul(wq), x.matmul(wk), x.matmul(wv)
    e = (q.matmul(k.transpose(1, 2)) / math.sqrt(8.0)).exp()
    return (e / e.sum(-1, keepdim=True)).matmul(v).sum()


MODELS = {"mlp": mlp, "attention": attention}


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cpp") / "semiring_builtins"
    lib = cpp_extension.library_paths()[0]
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    cmd = ["g++", "-std=c++17", "-O1", f"-D_GLIBCXX_USE_CXX11_ABI={abi}", str(SOURCE), "-o", str(out),
           *(f"-I{p}" for p in cpp_extension.include_paths()),
           f"-L{lib}", "-lc10", "-ltorch_cpu", f"-Wl,-rpath,{lib}"]
    subprocess.run(cmd, check=True)
    return out


def test_the_program_links_no_python(program):
    deps = subprocess.run(["ldd", str(program)], capture_output=True, text=True, check=True).stdout
    assert "libtorch_cpu" in deps
    assert "libpython" not in deps and "libtorch_python" not in deps, deps


def test_cpp_results_equal_python_bit_for_bit(program, tmp_path):
    gen = torch.Generator().manual_seed(0)
    inputs = {}
    for model, shapes in SHAPES.items():
        for name, shape in shapes.items():
            t = torch.randn(shape, generator=gen, dtype=torch.float64)
            t[t.abs() < 0.1] = 0.0  # zero derivatives: not edges
            inputs[(model, name)] = t
            t.numpy().tofile(tmp_path / f"{model}.{name}.bin")
    run = subprocess.run([str(program), str(tmp_path)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == [w for s in torch.autograd.semiring.builtin_semirings for w in (s, "ok")]
    for semiring, s in torch.autograd.semiring.builtin_semirings.items():
        for model, forward in MODELS.items():
            leaves = [inputs[(model, n)].clone().requires_grad_() for n in SHAPES[model]]
            expected = torch.autograd.grad(forward(*leaves), leaves, semiring=semiring)
            for name, leaf, e in zip(SHAPES[model], leaves, expected):
                got = np.fromfile(tmp_path / f"{semiring}.{model}.{name}.bin", dtype=np.float64)
                got = torch.from_numpy(got).reshape(leaf.shape + s.element_shape)
                assert torch.equal(got.isnan(), e.isnan()), f"{semiring} {model} {name}"
                assert torch.equal(got.nan_to_num(), e.nan_to_num()), f"{semiring} {model} {name}"
