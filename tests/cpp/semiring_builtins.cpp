// Every built-in semiring's backward through an MLP and a small attention block, from C++
// alone: linked against the wheel's libtorch_cpu and libc10, with no Python interpreter.
// tests/feature/test_cpp_only.py runs it and checks its results against the Python API's,
// bit for bit.
//
// usage: semiring_builtins DIR
//   reads the float64 inputs DIR/<name>.bin (raw, shapes below), writes each result to
//   DIR/<semiring>.<model>.<input>.bin (raw float64, shape input.shape + element_shape).
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/builtin_semirings.h>
#include <torch/torch.h>

#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace {

std::string dir;

torch::Tensor read(const std::string& name, std::vector<int64_t> shape) {
  auto t = torch::empty(shape, torch::kFloat64);
  std::ifstream in(dir + "/" + name + ".bin", std::ios::binary);
  in.read(reinterpret_cast<char*>(t.data_ptr<double>()), t.numel() * sizeof(double));
  TORCH_CHECK(in.gcount() == static_cast<std::streamsize>(t.numel() * sizeof(double)),
              "short read of ", name);
  return t.requires_grad_(true);
}

void write(const std::string& name, const torch::Tensor& t) {
  auto c = t.contiguous();
  std::ofstream out(dir + "/" + name + ".bin", std::ios::binary);
  out.write(reinterpret_cast<const char*>(c.data_ptr<double>()), c.numel() * sizeof(double));
}

using Inputs = std::vector<std::pair<std::string, torch::Tensor>>;

torch::Tensor mlp(const Inputs& in) {
  const auto& x = in[0].second;
  auto h = torch::tanh(torch::nn::functional::linear(x, in[1].second, in[2].second));
  auto r = torch::relu(torch::nn::functional::linear(h, in[3].second));
  return (r * r).sum();
}

torch::Tensor attention(const Inputs& in) {
  const auto& x = in[0].second;
  auto q = x.matmul(in[1].second);
  auto k = x.matmul(in[2].second);
  auto v = x.matmul(in[3].second);
  auto scores = q.matmul(k.transpose(1, 2)) / std::sqrt(8.0);
  // softmax from ops that have rules: exp, then a sum over the keys.
  auto e = scores.exp();
  auto weights = e / e.sum(-1, /*keepdim=*/true);
  return weights.matmul(v).sum();
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: semiring_builtins DIR\n";
    return 2;
  }
  dir = argv[1];
  std::map<std::string, std::pair<Inputs, torch::Tensor (*)(const Inputs&)>> models;
  models["mlp"] = {
      {{"mlp.x", read("mlp.x", {4, 8})},
       {"mlp.w1", read("mlp.w1", {16, 8})},
       {"mlp.b1", read("mlp.b1", {16})},
       {"mlp.w2", read("mlp.w2", {8, 16})}},
      mlp};
  models["attention"] = {
      {{"attention.x", read("attention.x", {2, 5, 8})},
       {"attention.wq", read("attention.wq", {8, 8})},
       {"attention.wk", read("attention.wk", {8, 8})},
       {"attention.wv", read("attention.wv", {8, 8})}},
      attention};
  for (const auto& name : torch::autograd::builtin_semiring_names()) {
    // As torch.autograd does: the real semiring is ordinary backward.
    const auto semiring =
        name == "real" ? nullptr : torch::autograd::builtin_semiring(name);
    for (const auto& [model, spec] : models) {
      const auto& [inputs, forward] = spec;
      std::vector<torch::Tensor> leaves;
      for (const auto& [_, t] : inputs) {
        leaves.push_back(t);
      }
      auto results = torch::autograd::grad(
          {forward(inputs)}, leaves, {}, std::nullopt, false, false, semiring);
      for (size_t i = 0; i < results.size(); ++i) {
        write(name + "." + inputs[i].first, results[i]);
      }
    }
    std::cout << name << " ok\n";
  }
  return 0;
}
