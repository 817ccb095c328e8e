"""A seeded MLP trained for 30 steps with an evaluation every 5, on plain CPU torch (the
reference) or torch_xla on one device: issue 34's siblings.

    python train_evals.py --reference                  # plain torch on the CPU
    python train_evals.py                              # the correct torch_xla port
    python train_evals.py --variant eval_recompile     # each evaluation on a batch of another size: a new graph each time
    python train_evals.py --variant host_sync          # a dozen `.item()` calls in every step

Prints `step=S loss=L step_time_ms=T` each step and `eval_accuracy A` after each evaluation.
"""
import argparse
import time

import torch
import torch.nn.functional as F
from train_mesh import build_model, make_data


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--reference", action="store_true")
    p.add_argument("--variant", default="identical")
    p.add_argument("--steps", type=int, default=30)
    args = p.parse_args()
    sync = lambda: None  # noqa: E731
    if args.reference:
        device = torch.device("cpu")
    else:
        import torch_xla

        device, sync = torch_xla.device(), torch_xla.sync
    x, y = make_data(2048, seed=1)
    xe, ye = make_data(1024, seed=2)
    model = build_model().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    for step in range(1, args.steps + 1):
        start = time.perf_counter()
        i = ((step - 1) * 32) % len(x)
        xb, yb = x[i:i + 32].to(device), y[i:i + 32].to(device)
        opt.zero_grad()
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        if args.variant == "host_sync":  # a debugging leftover: every gradient read on the host
            [p.grad.abs().max().item() for p in model.parameters() for _ in range(3)]
        opt.step()
        sync()
        print(f"step={step} loss={loss.item():.6f} step_time_ms={(time.perf_counter() - start) * 1e3:.3f}")
        if step % 5 == 0:
            n = 1024 - 8 * (step // 5) if args.variant == "eval_recompile" else 1024
            with torch.no_grad():
                acc = (model(xe[:n].to(device)).argmax(dim=1) == ye[:n].to(device)).float().mean().item()
            print(f"eval_accuracy {acc:.4f}")


if __name__ == "__main__":
    main()
