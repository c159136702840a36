// The GPU check's extension: the series' CUDA kernels, as the applied series has
// them (ATen/native/cuda/SemiringKernel.cu and the headers it includes, rebuilt
// from patches/ by series_files.py), loaded into a stock PyTorch.
//
// A stock libtorch has no stubs of the series, so each REGISTER_DISPATCH of the
// kernel file stores its kernel in this file's table instead, and the operators
// below call the kernels with the stubs' argument structs, built the way
// ATen/native/Semiring.cpp builds them. log's product without argmax runs
// Semiring.cpp's log_mm_blas itself (the definition is copied out of the
// series' Semiring.cpp by the check; LOG_MM_BLAS_SOURCE names that file).

#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/native/Semiring.h>
#include <ATen/native/TensorIterator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/util/irange.h>
#include <torch/library.h>

#include <ATen/ops/amax.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/full.h>
#include <ATen/ops/gt.h>
#include <ATen/ops/index_copy.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/log.h>
#include <ATen/ops/logical_and.h>
#include <ATen/ops/logical_not.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/nonzero.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/where.h>

#include <limits>
#include <map>
#include <string>

namespace semiring_check {

std::map<std::string, void*>& kernels() {
  static std::map<std::string, void*> table;
  return table;
}

bool capture(const char* name, void* fn) {
  kernels()[name] = fn;
  return true;
}

template <typename Fn>
Fn kernel(const char* name) {
  const auto it = kernels().find(name);
  TORCH_CHECK(
      it != kernels().end(),
      "the series' CUDA kernel file registers no ",
      name);
  return reinterpret_cast<Fn>(it->second);
}

} // namespace semiring_check

#undef REGISTER_DISPATCH
#define REGISTER_DISPATCH(name, fn)                    \
  static const bool name##_captured =                  \
      ::semiring_check::capture(#name, reinterpret_cast<void*>(fn));

#include <ATen/native/cuda/SemiringKernel.cu>

namespace at::native {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

bool any(const Tensor& t) {
  return t.any().item<bool>();
}

// Semiring.cpp's run, without its pair planes (log_mm_blas runs log only).
Tensor run(SemiringMMArgs& args, const Tensor& like, int64_t rows, int64_t cols) {
  args.out_hi = at::empty({args.a_hi.size(0), rows, cols}, like.options());
  semiring_check::kernel<semiring_mm_fn>("semiring_mm_stub")(args);
  return args.out_hi;
}

#include LOG_MM_BLAS_SOURCE

} // namespace
} // namespace at::native

namespace semiring_check {

using namespace at::native;
using at::Tensor;

SemiringKind mm_kind(c10::string_view name) {
  if (name == "max_plus") {
    return SemiringKind::MaxPlus;
  }
  if (name == "max_product") {
    return SemiringKind::MaxProduct;
  }
  if (name == "log") {
    return SemiringKind::Log;
  }
  if (name == "entropy") {
    return SemiringKind::Entropy;
  }
  TORCH_CHECK(false, "semiring_check: unknown semiring '", name, "'");
}

NormSemiring norm_kind(c10::string_view name) {
  static const std::map<std::string, NormSemiring> kinds{
      {"real", NormSemiring::Real},
      {"abs", NormSemiring::Abs},
      {"counting", NormSemiring::Counting},
      {"boolean", NormSemiring::Boolean},
      {"log", NormSemiring::Log},
      {"max_plus", NormSemiring::MaxPlus},
      {"max_product", NormSemiring::MaxProduct},
      {"entropy", NormSemiring::Entropy}};
  const auto it = kinds.find(std::string(name));
  TORCH_CHECK(it != kinds.end(), "semiring_check: unknown semiring '", name, "'");
  return it->second;
}

// The kernel of _semiring_mm on (batch, n, k) x (batch, k, m) planes:
// [out_hi, out_lo (max_product), argmax (when asked)].
std::vector<Tensor> check_mm(
    c10::string_view semiring,
    const Tensor& a_hi,
    const std::optional<Tensor>& a_lo,
    const Tensor& b_hi,
    const std::optional<Tensor>& b_lo,
    bool scaled_a,
    bool argmax,
    bool term_by_term) {
  c10::cuda::CUDAGuard guard(a_hi.device());
  SemiringMMArgs args{mm_kind(semiring)};
  args.a_hi = a_hi;
  args.a_lo = a_lo.value_or(Tensor());
  args.b_hi = b_hi;
  args.b_lo = b_lo.value_or(Tensor());
  args.scaled_a = scaled_a;
  args.term_by_term = term_by_term;
  const auto sizes = {a_hi.size(0), a_hi.size(1), b_hi.size(2)};
  args.out_hi = at::empty(sizes, a_hi.options());
  if (args.kind == SemiringKind::MaxProduct) {
    args.out_lo = at::empty(sizes, a_hi.options());
  }
  if (argmax) {
    args.argmax = at::empty(sizes, a_hi.options().dtype(at::kLong));
  }
  // An empty result has nothing to launch (a grid of no blocks is an error);
  // k == 0 runs, as the kernel's zero.
  if (args.out_hi.numel() > 0) {
    semiring_check::kernel<semiring_mm_fn>("semiring_mm_stub")(args);
  }
  std::vector<Tensor> out{args.out_hi};
  if (args.out_lo.defined()) {
    out.push_back(args.out_lo);
  }
  if (argmax) {
    out.push_back(args.argmax);
  }
  return out;
}

// Broadcast sizes (ATen/ExpandUtils.h would bring at::any, which log_mm_blas's
// own `any` would then meet).
std::vector<int64_t> broadcast(at::IntArrayRef a, at::IntArrayRef b) {
  const auto dims = std::max(a.size(), b.size());
  std::vector<int64_t> out(dims, 1);
  for (const auto i : c10::irange(dims)) {
    const int64_t x = i < dims - a.size() ? 1 : a[i - (dims - a.size())];
    const int64_t y = i < dims - b.size() ? 1 : b[i - (dims - b.size())];
    TORCH_CHECK(x == y || x == 1 || y == 1, "semiring_check: ", a, " and ", b,
                " do not broadcast");
    out[i] = x == 1 ? y : x;
  }
  return out;
}

// The kernel of _semiring_times_lifted: the planes of the message (one, or
// two for the pair semirings) times lift(w), into planes of the broadcast
// shape, through Semiring.cpp's TensorIterator of outputs then inputs.
std::vector<Tensor> check_times_lifted(
    c10::string_view semiring,
    at::TensorList planes,
    const Tensor& w) {
  c10::cuda::CUDAGuard guard(w.device());
  const auto kind = mm_kind(semiring);
  TORCH_CHECK(
      planes.size() == (has_pair_elements(kind) ? 2u : 1u),
      "semiring_check: wrong number of message planes");
  const auto sizes = broadcast(planes[0].sizes(), w.sizes());
  std::vector<Tensor> outputs;
  auto config = at::TensorIteratorConfig();
  for (const auto i : c10::irange(planes.size())) {
    (void)i;
    outputs.push_back(at::empty(sizes, w.options()));
    config.add_output(outputs.back());
  }
  for (const auto& p : planes) {
    config.add_const_input(p);
  }
  config.add_const_input(w);
  auto iter = config.build();
  semiring_check::kernel<semiring_times_lifted_fn>("semiring_times_lifted_stub")(
      iter, kind);
  return outputs;
}

// The kernel of semiring_norm_jacobian_mm on dense (groups, n) planes.
std::vector<Tensor> check_norm(
    c10::string_view semiring,
    const Tensor& m,
    const std::optional<Tensor>& m2,
    const Tensor& s,
    const Tensor& c) {
  c10::cuda::CUDAGuard guard(s.device());
  SemiringNormArgs args{norm_kind(semiring)};
  args.m = m.contiguous();
  args.s = s.contiguous();
  args.c = c.contiguous();
  args.out = at::empty(s.sizes(), s.options());
  if (m2) {
    args.m2 = m2->contiguous();
    args.out2 = at::empty(s.sizes(), s.options());
  }
  if (s.numel() > 0) {
    semiring_check::kernel<semiring_norm_fn>("semiring_norm_stub")(args);
  }
  std::vector<Tensor> out{args.out};
  if (args.out2.defined()) {
    out.push_back(args.out2);
  }
  return out;
}

Tensor check_log_mm(const Tensor& a, const Tensor& b) {
  c10::cuda::CUDAGuard guard(a.device());
  if (a.numel() == 0 || b.numel() == 0) {
    // Semiring.cpp answers an empty product with the zero before log_mm_blas.
    return at::full(
        {a.size(0), a.size(1), b.size(2)},
        -std::numeric_limits<double>::infinity(),
        a.options());
  }
  return log_mm_blas(a, b);
}

} // namespace semiring_check

TORCH_LIBRARY(semiring_check, m) {
  m.def(
      "mm(str semiring, Tensor a_hi, Tensor? a_lo, Tensor b_hi, Tensor? b_lo, "
      "bool scaled_a, bool argmax, bool term_by_term) -> Tensor[]",
      &semiring_check::check_mm);
  m.def(
      "times_lifted(str semiring, Tensor[] planes, Tensor w) -> Tensor[]",
      &semiring_check::check_times_lifted);
  m.def(
      "norm(str semiring, Tensor m, Tensor? m2, Tensor s, Tensor c) -> Tensor[]",
      &semiring_check::check_norm);
  m.def("log_mm(Tensor a, Tensor b) -> Tensor", &semiring_check::check_log_mm);
}
