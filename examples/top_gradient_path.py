"""The README example: the top gradient path, the gradient-graph entropy and a semiring of your own, on a small MLP."""
import torch
from torch.autograd import semiring

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)).double()
x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)

# 1. Which input element has the strongest single gradient path to the output, and which path is it?
with semiring.record_paths(model) as rec:
    (g,) = torch.autograd.grad(model(x).sum(), x, semiring="max_product")
print("top path value per input:", semiring.max_product.finalize(g))
path = rec.path(x, (0, 1))
for step in path.steps:
    print(f"  module {step.module or '-':2} {step.name:15} to element {step.index}, local derivative {step.derivative:+.4f}")
print(f"  the path's value {path.value:.4f} is the product of its local derivatives {path.product():.4f}")
for p in rec.paths(x, (0, 1), 3):  # the 3 best paths, best first (the first is the top path)
    print(f"  a path of value {p.value:+.4f} through hidden unit {p.steps[0].index[1]}")

# 2. How spread out over paths is each input's influence? (entropy in nats; log_entropy is
# the entropy semiring carried in log space, stable in float32.) .backward() works too.
model(x).sum().backward(semiring="log_entropy")
print("gradient-graph entropy:", semiring.log_entropy.finalize(x.grad))


# 3. A semiring of your own: the largest path magnitude, in plain reals.
class MaxAbs(torch.autograd.Semiring):
    name = "max_abs"

    def zero(self, shape, *, dtype, device):
        return torch.zeros(shape, dtype=dtype, device=device)

    def one(self, shape, *, dtype, device):
        return torch.ones(shape, dtype=dtype, device=device)

    def plus(self, a, b):
        return torch.maximum(a, b)

    def times(self, a, b):
        return a * b

    def lift(self, w):
        return w.abs()


(m,) = torch.autograd.grad(model(x).sum(), x, semiring=MaxAbs())
print("largest path magnitude:", m)
