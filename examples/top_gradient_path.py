"""The README example: top gradient path, entropy, path counts and the gradient of the entropy, on a small MLP."""
import torch
from torch.autograd import semiring

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)).double()
x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)

# Which input element has the strongest single gradient path to the loss, and which path is it?
with semiring.record_paths(model) as rec:
    loss = model(x).sum()
    (g,) = torch.autograd.grad(loss, x, retain_graph=True, semiring="max_product")
print("top path value per input:", semiring.max_product.finalize(g))
path = rec.path(x, (0, 1))
for step in path.steps:
    print(f"  module {step.module or '-':2} {step.name:15} to element {step.index}, local derivative {step.derivative:+.4f}")
print(f"  the path's value {path.value:.4f} is the product of its local derivatives {path.product():.4f}")

# How spread out over paths is each input's influence? (entropy in nats)
(h,) = torch.autograd.grad(loss, x, retain_graph=True, semiring=torch.autograd.semiring.entropy)
print("gradient-graph entropy:", semiring.entropy.finalize(h))

# .backward() works too: .grad holds the semiring's result.
loss.backward(semiring="counting")
print("paths from each input:", x.grad)

# Differentiable too (create_graph=True): how the mean entropy moves with the first layer's weights.
(h,) = torch.autograd.grad(model(x).sum(), x, semiring="log_entropy", create_graph=True)
(dw,) = torch.autograd.grad(semiring.log_entropy.finalize(h).mean(), model[0].weight)
print("d mean entropy / d first weight row:", dw[0])
