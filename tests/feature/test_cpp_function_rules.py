"""C++ torch::autograd::Functions give their semiring rules with
torch::autograd::register_semiring_rule<F>() (torch/csrc/autograd/semiring_function.h): by kind
and explicitly, checked against the brute-force oracle in every built-in semiring, along
recovered top paths, and refused with a clear error when they have none. The Functions are
in tests/cpp/semiring_function_rules.cpp, built here against the wheel's headers."""
import subprocess
from pathlib import Path

import pytest
import torch
from torch.autograd import semiring as S
from torch.testing._internal.semiring_oracle import SCALAR_SEMIRINGS, Step, build_graph, oracle, top_path
from torch.utils import cpp_extension

from conftest import REPO

SOURCE = REPO / "tests" / "cpp" / "semiring_function_rules.cpp"


@pytest.fixture(scope="module")
def ops(tmp_path_factory):
    lib = tmp_path_factory.mktemp("cpp") / "libsemiring_function_rules.so"
    libdir = cpp_extension.library_paths()[0]
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    cmd = ["g++", "-std=c++17", "-O1", "-shared", "-fPIC", f"-D_GLIBCXX_USE_CXX11_ABI={abi}", str(SOURCE),
           "-o", str(lib), *(f"-I{p}" for p in cpp_extension.include_paths()),
           f"-L{libdir}", "-lc10", "-ltorch_cpu", f"-Wl,-rpath,{libdir}"]
    subprocess.run(cmd, check=True)
    torch.ops.load_library(str(lib))
    return torch.ops.semiring_cpp_test


def t(*shape, seed=0, zeros=False, ties=False, noncontig=False):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(tuple(reversed(shape)) if noncontig else shape, generator=g, dtype=torch.float64)
    if noncontig:
        x = x.permute(*reversed(range(len(shape))))
    if zeros:
        x.view(-1)[::3] = 0.0
    if ties:
        x[0, 1] = x[0, 2]
    return x


def cases(ops):
    # Each op's result is multiplied by a weight with zeros and negative entries, so that the
    # messages reaching the op differ per element.
    def weighted(fn, args, leaves, shape):
        return ([Step("y", fn, args), Step("z", torch.mul, ("y", "w"))],
                {**leaves, "w": t(*shape, seed=9, zeros=True)})

    return {
        "elementwise": weighted(ops.cube, ("a",), {"a": t(3, 4, zeros=True, ties=True)}, (3, 4)),
        "bijective": weighted(ops.flip_rows, ("a",), {"a": t(3, 4, noncontig=True)}, (3, 4)),
        "explicit": weighted(lambda x, v: ops.row_dot(x, v, -2.0), ("x", "v"),
                             {"x": t(3, 4, zeros=True, ties=True), "v": t(4, seed=1)}, (3,)),
    }


def program(steps):
    return steps + [Step("loss", torch.sum, (steps[-1].out,))]


def run(steps, leaves):
    env = dict(leaves)
    for step in steps:
        env[step.out] = step.fn(*[env[a] for a in step.args])
    return env[steps[-1].out]


@pytest.mark.parametrize("case", ["elementwise", "bijective", "explicit"])
@pytest.mark.parametrize("semiring", list(S.builtin_semirings))
def test_rules_against_the_oracle(ops, case, semiring):
    steps, leaves = cases(ops)[case]
    steps = program(steps)
    live = {k: v.detach().requires_grad_() for k, v in leaves.items()}
    got = torch.autograd.grad(run(steps, live), list(live.values()), semiring=semiring)
    expected = oracle(steps, leaves, semiring)
    for name, g in zip(live, got):
        torch.testing.assert_close(g, expected[name], atol=1e-12, rtol=1e-10, msg=f"{case}/{semiring}/{name}")


@pytest.mark.parametrize("case", ["elementwise", "bijective", "explicit"])
@pytest.mark.parametrize("semiring", ["max_product", "max_plus"])
def test_top_paths_against_enumeration(ops, case, semiring):
    steps, leaves = cases(ops)[case]
    steps = program(steps)
    live = {k: v.detach().requires_grad_() for k, v in leaves.items()}
    with S.record_paths() as rec:
        got = torch.autograd.grad(run(steps, live), list(live.values()), semiring=semiring)
    s = SCALAR_SEMIRINGS[semiring]
    graph = build_graph(steps, leaves)
    seeds = [s.one()]
    for (name, leaf), g in zip(live.items(), got):
        final = S.builtin_semirings[semiring].finalize(g)
        for i in range(leaf.numel()):
            index = tuple(int(v) for v in torch.unravel_index(torch.tensor(i), leaf.shape))
            best = top_path(graph, "loss", seeds, s, name, i)
            if best is None:
                with pytest.raises(ValueError, match="no path"):
                    rec.path(leaf, index)
                continue
            path = rec.path(leaf, index)
            assert path.value == pytest.approx(best[0], rel=1e-10, abs=1e-12)
            assert path.value == float(final[index])
            assert path.product() == pytest.approx(path.value, rel=1e-10, abs=1e-12)
            if name != "w":  # the op's inputs' paths pass the Function's node
                assert any("CppNode" in step.name for step in path.steps)


def test_a_function_without_a_rule_is_refused(ops):
    x = torch.ones(3, dtype=torch.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"(?s)CppNode<.*NoRule>.*'log'.*register_semiring_rule<F>\(\)"):
        torch.autograd.grad(ops.no_rule(x).sum(), x, semiring="log")
    (g,) = torch.autograd.grad(ops.no_rule(x).sum(), x)
    assert torch.equal(g, torch.full((3,), 2.0, dtype=torch.float64))


def test_coverage_lists_the_registered_rules(ops):
    x = torch.ones(2, 4, dtype=torch.float64, requires_grad=True)
    report = S.coverage(ops.row_dot(ops.cube(x), torch.ones(4, dtype=torch.float64), 1.0).sum(),
                        semirings=["entropy"])
    assert report.missing["entropy"] == ()
    assert sorted(report.registered.values()) == ["torch::autograd::register_semiring_rule"] * 2
    assert all("CppNode" in name for name in report.registered)
