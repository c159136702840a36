// C++ torch::autograd::Functions with semiring rules registered through
// torch/csrc/autograd/semiring_function.h, exposed as operators of the library
// semiring_cpp_test. tests/feature/test_cpp_function_rules.py builds it, loads it with
// torch.ops.load_library and checks the rules against the brute-force oracle.
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/semiring_function.h>
#include <torch/library.h>

#include <ATen/ATen.h>

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::SemiringOps;
using torch::autograd::SemiringRuleKind;
using torch::autograd::Variable;
using torch::autograd::variable_list;

// By kind: elementwise.
struct Cube : torch::autograd::Function<Cube> {
  static Variable forward(AutogradContext* ctx, const Variable& x) {
    ctx->save_for_backward({x});
    return x * x * x;
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    const auto x = ctx->get_saved_variables()[0];
    return {3 * x * x * g[0]};
  }
};

// By kind: bijective.
struct FlipRows : torch::autograd::Function<FlipRows> {
  static Variable forward(AutogradContext* ctx, const Variable& x) {
    return x.flip(0);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    return {g[0].flip(0)};
  }
};

// alpha * (x * w).sum(-1), with an explicit rule. The number is an input of
// forward: backward and the rule return an undefined tensor for it.
struct RowDot : torch::autograd::Function<RowDot> {
  static Variable forward(
      AutogradContext* ctx,
      const Variable& x,
      const Variable& w,
      double alpha) {
    ctx->save_for_backward({x, w});
    ctx->saved_data["alpha"] = alpha;
    return (x * w).sum(-1) * alpha;
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    const auto saved = ctx->get_saved_variables();
    const auto alpha = ctx->saved_data["alpha"].toDouble();
    const auto m = g[0].unsqueeze(-1) * alpha;
    return {m * saved[1], m * saved[0], Variable()};
  }
  static variable_list semiring_rule(
      AutogradContext* ctx,
      const SemiringOps& K,
      variable_list m) {
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &w = saved[1];
    const auto alpha = ctx->saved_data["alpha"].toDouble();
    // The message of each row, against each of its elements.
    const auto row = m[0].unsqueeze(m[0].dim() - K.element_dim());
    return {
        K.times(row, K.lift_masked(alpha * w.expand_as(x))),
        K.times(row, K.lift_masked(alpha * x)),
        Variable()};
  }
};

struct NoRule : torch::autograd::Function<NoRule> {
  static Variable forward(AutogradContext* ctx, const Variable& x) {
    return x * 2;
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    return {g[0] * 2};
  }
};

const bool registered = [] {
  torch::autograd::register_semiring_rule<Cube>(SemiringRuleKind::Elementwise);
  torch::autograd::register_semiring_rule<FlipRows>(
      SemiringRuleKind::Bijective);
  torch::autograd::register_semiring_rule<RowDot>(RowDot::semiring_rule);
  return true;
}();

} // namespace

TORCH_LIBRARY(semiring_cpp_test, m) {
  m.def("cube(Tensor x) -> Tensor");
  m.def("flip_rows(Tensor x) -> Tensor");
  m.def("row_dot(Tensor x, Tensor w, float alpha) -> Tensor");
  m.def("no_rule(Tensor x) -> Tensor");
}

TORCH_LIBRARY_IMPL(semiring_cpp_test, CompositeImplicitAutograd, m) {
  m.impl("cube", [](const at::Tensor& x) { return Cube::apply(x); });
  m.impl("flip_rows", [](const at::Tensor& x) { return FlipRows::apply(x); });
  m.impl("row_dot", [](const at::Tensor& x, const at::Tensor& w, double alpha) {
    return RowDot::apply(x, w, alpha);
  });
  m.impl("no_rule", [](const at::Tensor& x) { return NoRule::apply(x); });
}
