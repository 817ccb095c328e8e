"""A small seeded MLP classifier: the reference on plain CPU torch, and attempt variants on torch_xla.

    python train.py --reference            # the original: plain torch on the CPU, full batch
    python train.py --variant identical    # torch_xla: one replica per XLA device, gradients
                                           # averaged on the host, the average clipped
Variants: identical, wrong_lr, clip_per_replica, dynamic_shapes, fallback, crash, slow.
Every run prints `step N/T loss L grad_norm G`, then `eval_accuracy A`; XLA runs print
torch_xla's metrics report at exit.
"""
import argparse
import copy
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

FEATURES, HIDDEN, CLASSES = 16, 32, 4


def make_data(n, seed):
    g = torch.Generator().manual_seed(1234)
    w = torch.randn(FEATURES, CLASSES, generator=g)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, FEATURES, generator=g)
    return x, (x @ w).argmax(dim=1)


def build_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, CLASSES))


def batches(args, x, y, step):
    i = ((step - 1) * args.batch_size) % len(x)
    return x[i:i + args.batch_size], y[i:i + args.batch_size]


def reference(args, x, y, xe, ye):
    model = build_model()
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    for step in range(1, args.steps + 1):
        xb, yb = batches(args, x, y, step)
        opt.zero_grad()
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
        grad_norm = torch.stack([p.grad.norm() for p in model.parameters()]).norm()
        opt.step()
        print(f"step {step}/{args.steps} loss {loss.item():.6f} grad_norm {grad_norm.item():.6f}")
    with torch.no_grad():
        acc = (model(xe).argmax(dim=1) == ye).float().mean().item()
    print(f"eval_accuracy {acc:.4f}")


def xla(args, x, y, xe, ye):
    import torch_xla
    import torch_xla.debug.metrics as met
    import torch_xla.runtime as xr

    variant = args.variant
    lr = args.lr * (0.1 if variant == "wrong_lr" else 1.0)
    n_dev = xr.global_runtime_device_count()
    devices = [torch.device(f"xla:{i}") for i in range(n_dev)]
    model = build_model()
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    replicas = [copy.deepcopy(model).to(d) for d in devices]
    for step in range(1, args.steps + 1):
        xb, yb = batches(args, x, y, step)
        losses = []
        for replica, device, xs, ys in zip(replicas, devices, xb.chunk(n_dev), yb.chunk(n_dev)):
            with torch.no_grad():
                for pr, pm in zip(replica.parameters(), model.parameters()):
                    pr.copy_(pm.to(device))
            replica.zero_grad()
            if variant == "dynamic_shapes":
                # pad with a different number of ignored rows every step: same loss, new shapes
                pad = step % 7 + 1
                xs = torch.cat([xs, torch.zeros(pad, FEATURES)])
                ys = torch.cat([ys, torch.full((pad,), -100)])
            xs, ys = xs.to(device), ys.to(device)
            if variant == "fallback":
                keep = torch.nonzero(ys >= 0).squeeze(1)  # every row: the op runs on the CPU
                xs, ys = xs[keep], ys[keep]
            if variant == "crash" and step == 5:
                xs = xs.view(-1, FEATURES + 1)
            loss = F.cross_entropy(replica(xs), ys, ignore_index=-100)
            loss.backward()
            if variant == "clip_per_replica":
                torch.nn.utils.clip_grad_norm_(replica.parameters(), args.max_grad_norm)
            losses.append(loss)
        torch_xla.sync()
        for k, pm in enumerate(model.parameters()):
            pm.grad = torch.stack([list(r.parameters())[k].grad.cpu() for r in replicas]).mean(0)
        if variant != "clip_per_replica":
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
        grad_norm = torch.stack([p.grad.norm() for p in model.parameters()]).norm()
        opt.step()
        loss = torch.stack([l.cpu() for l in losses]).mean()
        if variant == "slow":
            time.sleep(args.slow_seconds)  # a slow input pipeline
        print(f"step {step}/{args.steps} loss {loss.item():.6f} grad_norm {grad_norm.item():.6f}")
    with torch.no_grad():
        acc = (model(xe).argmax(dim=1) == ye).float().mean().item()
    print(f"eval_accuracy {acc:.4f}")
    print(met.metrics_report())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--reference", action="store_true")
    p.add_argument("--variant", default="identical")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.5)
    p.add_argument("--max-grad-norm", type=float, default=0.5)
    p.add_argument("--slow-seconds", type=float, default=2.0)
    args = p.parse_args()
    x, y = make_data(2048, seed=1)
    xe, ye = make_data(1024, seed=2)
    (reference if args.reference else xla)(args, x, y, xe, ye)


if __name__ == "__main__":
    main()
