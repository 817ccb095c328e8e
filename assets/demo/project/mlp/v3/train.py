"""Train a small MLP classifier on synthetic data.

Data parallel over every XLA device of the host (TPU chips, or XLA:CPU devices with
PJRT_DEVICE=CPU CPU_NUM_DEVICES=4): one model replica per device, gradients averaged on the
host. Everything is seeded, so two runs on the same hardware print the same numbers.
"""
import argparse
import copy
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
    # XLA is lazy: cut the graph, run it, and wait for the device so step_time is real
    torch_xla.sync()
    xm.wait_device_ops()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.5)
    p.add_argument("--max-grad-norm", type=float, default=0.5)
    args = p.parse_args()

    n_dev = xr.global_runtime_device_count()
    devices = [torch.device(f"xla:{i}") for i in range(n_dev)]
    assert args.batch_size % n_dev == 0, "batch size must split evenly over the devices"

    x_train, y_train = make_data(2048, seed=1)
    x_eval, y_eval = make_data(1024, seed=2)
    model = build_model()                 # master copy on the host; the optimizer updates it
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    replicas = [copy.deepcopy(model).to(d) for d in devices]
    used = sorted({str(p.device) for r in replicas for p in r.parameters()})
    print(f"hardware {xm.xla_device_hw(devices[0])} devices_available {n_dev} "
          f"devices_used {len(used)} ({', '.join(used)})")

    def broadcast(replica, device):
        with torch.no_grad():
            for pr, pm in zip(replica.parameters(), model.parameters()):
                pr.copy_(pm.to(device))

    for step in range(1, args.steps + 1):
        t0 = time.perf_counter()
        i = ((step - 1) * args.batch_size) % len(x_train)
        xb = x_train[i:i + args.batch_size]
        yb = y_train[i:i + args.batch_size]
        losses = []
        for replica, device, xs, ys in zip(replicas, devices, xb.chunk(n_dev), yb.chunk(n_dev)):
            broadcast(replica, device)
            replica.zero_grad()
            loss = F.cross_entropy(replica(xs.to(device)), ys.to(device))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(replica.parameters(), args.max_grad_norm)
            losses.append(loss)
        torch_xla.sync()
        # all-reduce on the host: the master gradient is the mean of the replicas' gradients
        for k, pm in enumerate(model.parameters()):
            pm.grad = torch.stack([list(r.parameters())[k].grad.cpu() for r in replicas]).mean(0)
        # norm of the gradient the optimizer applies (after clipping)
        grad_norm = torch.stack([p.grad.norm() for p in model.parameters()]).norm()
        opt.step()
        loss = torch.stack([l.cpu() for l in losses]).mean()
        sync(devices[0])
        step_time = time.perf_counter() - t0
        print(f"step {step}/{args.steps} loss {loss.item():.6f} "
              f"grad_norm {grad_norm.item():.6f} step_time {step_time:.4f}")

    broadcast(replicas[0], devices[0])
    replicas[0].eval()
    with torch.no_grad():
        pred = replicas[0](x_eval.to(devices[0])).argmax(dim=1)
        acc = (pred == y_eval.to(devices[0])).float().mean().item()
    print(f"eval_accuracy {acc:.4f}")
    print(met.metrics_report())


if __name__ == "__main__":
    main()
