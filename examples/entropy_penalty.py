"""Training with a penalty on the gradient-graph entropy (create_graph=True in a semiring).

A small MLP classifies points of a disc by their distance from its centre. Each example's gradient-graph entropy
is the entropy of the distribution over all paths from its input row to its correct class's
logit (paths weighted by the product of |local derivative|, log_entropy, float32); its
gradient in the weights comes from differentiating through the semiring backward. Trained
twice from the same initialization, without and with `penalty x mean entropy` added to the
cross-entropy loss: the penalized model's entropy falls (its gradient flows along fewer
paths), and its task loss still converges.

    python3 examples/entropy_penalty.py --out figures/
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path

import torch
from torch import nn, Tensor
from torch.autograd import semiring as S


def circles(n: int, seed: int) -> tuple[Tensor, Tensor]:
    """Points of a disc of radius 2, labelled by whether they lie outside radius 1.2; the plane
    embedded in 8 dimensions by a fixed rotation."""
    g = torch.Generator().manual_seed(seed)
    radius = 2 * torch.rand(n, generator=g).sqrt()
    angle = 2 * math.pi * torch.rand(n, generator=g)
    points = torch.stack([radius * torch.cos(angle), radius * torch.sin(angle)], 1)
    labels = (radius > 1.2).long()
    rotation = torch.linalg.qr(torch.randn(8, 8, generator=torch.Generator().manual_seed(0)))[0]
    return torch.cat([points, torch.zeros(n, 6)], 1) @ rotation, labels


def make_model(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 2))


def entropy_per_example(model: nn.Module, x: Tensor, labels: Tensor, create_graph: bool) -> tuple[Tensor, Tensor]:
    """The logits, and each example's entropy of the paths from its input row to its correct
    class's logit, in nats (differentiable in the weights when create_graph)."""
    x = x.detach().requires_grad_()
    logits = model(x)
    correct = logits.gather(1, labels[:, None]).squeeze(1)
    seeds = S.log_entropy.one(correct.shape, dtype=correct.dtype, device=correct.device)
    (m,) = torch.autograd.grad(correct, x, grad_outputs=seeds, semiring="log_entropy",
                               create_graph=create_graph, retain_graph=True)
    return logits, S.log_entropy.finalize(S.log_entropy.sum(m, [1]))


def train(penalty: float, steps: int, seed: int = 1, log=print) -> dict:
    x, y = circles(2048, seed=0)
    model = make_model(seed)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(seed)
    history = {"step": [], "loss": [], "entropy": [], "accuracy": []}
    for step in range(steps + 1):
        batch = torch.randint(0, len(y), (128,), generator=g)
        logits, entropy = entropy_per_example(model, x[batch], y[batch], create_graph=penalty > 0)
        loss = nn.functional.cross_entropy(logits, y[batch])
        if step % 25 == 0:
            with torch.no_grad():
                accuracy = float((model(x).argmax(1) == y).float().mean())
            history["step"].append(step)
            history["loss"].append(float(loss))
            history["entropy"].append(float(entropy.mean()))
            history["accuracy"].append(accuracy)
            log(f"  penalty {penalty}: step {step:4d}  loss {float(loss):.4f}  entropy {float(entropy.mean()):.3f} nats"
                f"  accuracy {accuracy:.3f}")
        if step == steps:
            break
        opt.zero_grad()
        (loss + penalty * entropy.mean() if penalty > 0 else loss).backward()
        opt.step()
    return history


def figure(runs: dict[float, dict], png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_loss, ax_entropy) = plt.subplots(1, 2, figsize=(10, 3.6), dpi=150)
    for penalty, h in runs.items():
        label = "no penalty" if penalty == 0 else f"penalty {penalty} x entropy"
        ax_loss.plot(h["step"], h["loss"], marker="o", markersize=3, label=label)
        ax_entropy.plot(h["step"], h["entropy"], marker="o", markersize=3, label=label)
    ax_loss.set_xlabel("step")
    ax_loss.set_ylabel("cross-entropy (batch)")
    ax_loss.set_title("task loss", fontsize=10)
    ax_entropy.set_xlabel("step")
    ax_entropy.set_ylabel("mean gradient-graph entropy (nats)")
    ax_entropy.set_title("entropy of the paths from an input to its correct logit", fontsize=10)
    ax_loss.legend(fontsize=8)
    ax_entropy.legend(fontsize=8)
    fig.suptitle("Inside or outside a circle, MLP 8-64-64-2: an entropy penalty through create_graph=True "
                 "(log_entropy)", fontsize=10)
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)


def run(out: Path, steps: int = 300, penalty: float = 0.05, log=print) -> dict:
    runs = {}
    for p in (0.0, penalty):
        log(f"training with penalty {p} for {steps} steps")
        runs[p] = train(p, steps, log=log)
    out.mkdir(parents=True, exist_ok=True)
    png = out / "entropy_penalty.png"
    figure(runs, png)
    return {"runs": runs, "png": png}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=Path("figures"))
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--penalty", type=float, default=0.05)
    args = p.parse_args()
    result = run(args.out, args.steps, args.penalty)
    for penalty, h in result["runs"].items():
        print(f"penalty {penalty}: final loss {h['loss'][-1]:.4f}, entropy {h['entropy'][0]:.3f} -> "
              f"{h['entropy'][-1]:.3f} nats, accuracy {h['accuracy'][-1]:.3f}")
    print(f"wrote {result['png']}")


if __name__ == "__main__":
    main()
