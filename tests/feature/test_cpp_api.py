"""torch::autograd::backward/grad take a semiring too (a C++ extension built against the wheel)."""
import functools

import torch
from torch.utils.cpp_extension import load_inline

SOURCE = r"""
#include <torch/extension.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/semiring.h>

using torch::autograd::Node;
using torch::autograd::Semiring;

// The counting semiring, with the one rule that elementwise and reduction nodes share here:
// run the node's real formula on ones and keep the nonzero entries as edges of weight 1.
struct Counting final : Semiring {
  std::string name() const override { return "cpp_counting"; }
  std::vector<int64_t> element_shape() const override { return {}; }
  at::Tensor one_like(const at::Tensor& t) const override { return at::ones_like(t); }
  at::Tensor plus(const at::Tensor& a, const at::Tensor& b) const override { return a + b; }
  at::Tensor sum_to(const at::Tensor& m, c10::IntArrayRef shape) const override {
    return at::sum_to(m, shape);
  }
  std::vector<at::Tensor> apply(const std::shared_ptr<Node>& fn, std::vector<at::Tensor>&& ms)
      const override {
    if (fn->name() == "torch::autograd::AccumulateGrad") {
      return (*fn)(std::move(ms));
    }
    auto local = (*fn)({at::ones_like(ms.at(0))});
    std::vector<at::Tensor> out;
    for (const auto& d : local) {
      out.push_back(d.defined() ? ms.at(0) * d.ne(0).to(ms.at(0).dtype()) : at::Tensor());
    }
    return out;
  }
};

// The longest path, in edges: (max, +) with every edge weighing 1. Its one is 0, so a seed
// the caller leaves undefined must be 0, not the real ring's 1.
struct Longest final : Semiring {
  std::string name() const override { return "cpp_longest"; }
  std::vector<int64_t> element_shape() const override { return {}; }
  at::Tensor one_like(const at::Tensor& t) const override { return at::zeros_like(t); }
  at::Tensor plus(const at::Tensor& a, const at::Tensor& b) const override {
    return at::maximum(a, b);
  }
  at::Tensor sum_to(const at::Tensor& m, c10::IntArrayRef shape) const override {
    TORCH_CHECK(m.sizes() == shape, "cpp_longest: no broadcasting in this test");
    return m;
  }
  std::vector<at::Tensor> apply(const std::shared_ptr<Node>& fn, std::vector<at::Tensor>&& ms)
      const override {
    // The root hands out the seeds; AccumulateGrad plus-accumulates in the semiring.
    if (fn->name() == "torch::autograd::GraphRoot" ||
        fn->name() == "torch::autograd::AccumulateGrad") {
      return (*fn)(std::move(ms));
    }
    auto local = (*fn)({at::ones_like(ms.at(0))});
    std::vector<at::Tensor> out;
    for (const auto& d : local) {
      out.push_back(d.defined()
          ? at::where(d.ne(0), ms.at(0).expand_as(d) + 1, -std::numeric_limits<double>::infinity())
          : at::Tensor());
    }
    return out;
  }
};

at::Tensor longest_with_partial_seeds(const at::Tensor& x) {
  pybind11::gil_scoped_release no_gil;
  auto y1 = (x * 2).sum();  // scalar: its undefined seed is the semiring's one
  auto y2 = x * 3;
  return torch::autograd::grad({y1, y2}, {x}, {at::Tensor(), at::zeros_like(y2)}, std::nullopt,
                               false, false, std::make_shared<Longest>())[0];
}

// A C++ hook cannot opt in to semiring messages: the backward fails before anything runs.
std::string cpp_hook_refused(const at::Tensor& x) {
  pybind11::gil_scoped_release no_gil;
  auto h = x * 2;
  h.register_hook([](const at::Tensor& g) { return g; });
  try {
    torch::autograd::grad({h.sum()}, {x}, {}, std::nullopt, false, false,
                          std::make_shared<Counting>());
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  }
  return "";
}

std::vector<at::Tensor> count_paths(const at::Tensor& x, const at::Tensor& w) {
  pybind11::gil_scoped_release no_gil;  // the engine runs without the GIL
  auto y = (x * w).sum() + (x * 2).sum();
  auto grads = torch::autograd::grad({y}, {x, w}, {}, std::nullopt, false, false,
                                     std::make_shared<Counting>());
  auto z = (x * w).sum();
  torch::autograd::backward({z}, {}, std::nullopt, false, {}, std::make_shared<Counting>());
  return {grads[0], grads[1], x.grad()};
}
"""


@functools.cache
def _ext():
    return load_inline("semiring_cpp_api", cpp_sources=[SOURCE],
                       functions=["count_paths", "longest_with_partial_seeds", "cpp_hook_refused"], verbose=False)


def test_cpp_api_counts_paths():
    ext = _ext()
    x = torch.tensor([1.0, 0.0, 3.0], requires_grad=True)
    w = torch.tensor([2.0, 5.0, 0.0], requires_grad=True)
    gx, gw, x_grad = ext.count_paths(x, w)
    # x reaches y through x*w (an edge where w != 0) and through x*2 (always).
    assert gx.tolist() == [2.0, 2.0, 1.0]
    assert gw.tolist() == [1.0, 0.0, 1.0]
    assert x_grad.tolist() == [1.0, 1.0, 0.0]


def test_cpp_api_undefined_seed_is_the_semirings_one():
    ext = _ext()
    x = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64, requires_grad=True)
    # From y1: two edges (sum, then mul) after a seed of 0; from y2: one edge after a seed of 0.
    assert ext.longest_with_partial_seeds(x).tolist() == [2.0, 2.0, 2.0]


def test_cpp_hooks_refuse_semiring_messages():
    x = torch.ones(3, requires_grad=True)
    assert ("backward in semiring 'cpp_counting' would pass its messages to a C++ hook "
            "(torch::autograd::CppFunctionTensorPreHook) (on node MulBackward1)") in _ext().cpp_hook_refused(x)
