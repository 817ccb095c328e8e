"""Train a small MLP classifier on synthetic data.

Runs on an XLA device (a TPU, or XLA:CPU with PJRT_DEVICE=CPU). Everything is seeded, so two
runs on the same hardware print the same numbers.
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
import torch_xla.runtime as xr

FEATURES, HIDDEN, CLASSES = 16, 64, 4


def make_data(n, seed):
    """Synthetic 4-class problem: labels from a fixed random linear 'teacher'."""
    g = torch.Generator().manual_seed(1234)          # the teacher is the same for every split
    w = torch.randn(FEATURES, CLASSES, generator=g)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, FEATURES, generator=g)
    y = (x @ w).argmax(dim=1)
    return x, y


def build_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, CLASSES))


def sync(device):
    if device.type in ("cuda", "xla"):
        torch.cuda.synchronize(device)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.5)
    p.add_argument("--max-grad-norm", type=float, default=0.5)
    args = p.parse_args()

    device = torch_xla.device()
    n_dev = xr.global_runtime_device_count()
    print(f"hardware {xm.xla_device_hw(device)} devices_available {n_dev} devices_used 1")

    x_train, y_train = make_data(2048, seed=1)
    x_eval, y_eval = make_data(1024, seed=2)
    model = build_model().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)

    for step in range(1, args.steps + 1):
        t0 = time.perf_counter()
        i = ((step - 1) * args.batch_size) % len(x_train)
        xb = x_train[i:i + args.batch_size].to(device)
        yb = y_train[i:i + args.batch_size].to(device)
        opt.zero_grad()
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
        # norm of the gradient the optimizer applies (after clipping)
        grad_norm = torch.stack([p.grad.norm() for p in model.parameters()]).norm()
        opt.step()
        sync(device)
        step_time = time.perf_counter() - t0
        print(f"step {step}/{args.steps} loss {loss.item():.6f} "
              f"grad_norm {grad_norm.item():.6f} step_time {step_time:.4f}")

    model.eval()
    with torch.no_grad():
        pred = model(x_eval.to(device)).argmax(dim=1)
        acc = (pred == y_eval.to(device)).float().mean().item()
    print(f"eval_accuracy {acc:.4f}")
    print(met.metrics_report())


if __name__ == "__main__":
    main()
