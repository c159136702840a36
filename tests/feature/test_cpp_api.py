"""torch::autograd::backward/grad take a semiring too (a C++ extension built against the wheel)."""
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


def test_cpp_api_counts_paths():
    ext = load_inline("semiring_cpp_api", cpp_sources=[SOURCE], functions=["count_paths"], verbose=False)
    x = torch.tensor([1.0, 0.0, 3.0], requires_grad=True)
    w = torch.tensor([2.0, 5.0, 0.0], requires_grad=True)
    gx, gw, x_grad = ext.count_paths(x, w)
    # x reaches y through x*w (an edge where w != 0) and through x*2 (always).
    assert gx.tolist() == [2.0, 2.0, 1.0]
    assert gw.tolist() == [1.0, 0.0, 1.0]
    assert x_grad.tolist() == [1.0, 1.0, 0.0]
