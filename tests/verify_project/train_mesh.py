"""Issue 18's runs: the seeded MLP on plain CPU torch (the reference) and on torch_xla, logged the
way real training scripts log, with nothing else for the verifier to read.

    python train_mesh.py --reference             # plain torch on the CPU
    python train_mesh.py --mode spmd             # torch_xla SPMD: one process, a mesh over every device
    python train_mesh.py --mode single           # torch_xla on one device (also each torchrun process)
    python train_mesh.py --mode spawn            # xmp.spawn with an all-reduce: aborts on XLA:CPU

Variants: identical, host_sync (a dozen `.item()` calls in every step), crash (at step 25, after
the eval at step 20), skip_steps (the optimizer steps every other step only, a gradient
accumulation leftover whose gradients are zeroed each step anyway), bf16 (the model and its inputs
cast to bfloat16: weights without float32 masters, so updates round away and the loss drifts). Each run prints `rank=R world_size=W device_count=N` at start (SPMD adds
`mesh_shape=(N, 1)`), `step=S loss=L step_time_ms=T` each step, `eval_accuracy A` every 10 steps,
and torch_xla's metrics report at exit.
"""
import argparse
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


def train(args, device, shard=lambda t: t, sync=lambda: None):
    x, y = make_data(2048, seed=1)
    xe, ye = make_data(1024, seed=2)
    model = build_model().to(device)
    if args.variant == "bf16":
        model = model.to(torch.bfloat16)
        x, xe = x.to(torch.bfloat16), xe.to(torch.bfloat16)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    for step in range(1, args.steps + 1):
        start = time.perf_counter()
        i = ((step - 1) * args.batch_size) % len(x)
        xb, yb = shard(x[i:i + args.batch_size].to(device)), shard(y[i:i + args.batch_size].to(device))
        opt.zero_grad()
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
        if args.variant == "host_sync":  # a debugging leftover: every gradient read on the host
            [p.grad.abs().max().item() for p in model.parameters() for _ in range(3)]
        if args.variant != "skip_steps" or step % 2 == 0:
            opt.step()
        sync()
        if args.variant == "crash" and step == 25:
            raise RuntimeError("shape mismatch in the input pipeline at step 25")
        value = loss.item()
        print(f"step={step} loss={value:.6f} step_time_ms={(time.perf_counter() - start) * 1e3:.3f}")
        if step % 10 == 0:
            with torch.no_grad():
                acc = (model(xe.to(device)).argmax(dim=1) == ye.to(device)).float().mean().item()
            print(f"eval_accuracy {acc:.4f}")


def xla(args):
    import torch_xla
    import torch_xla.debug.metrics as met
    import torch_xla.runtime as xr

    shard = lambda t: t  # noqa: E731
    if args.mode == "spmd":
        import numpy as np
        import torch_xla.distributed.spmd as xs

        xr.use_spmd()
        n = xr.global_runtime_device_count()
        mesh = xs.Mesh(np.arange(n), (n, 1), ("data", "model"))

        def shard(t):
            xs.mark_sharding(t, mesh, ("data",) + (None,) * (t.dim() - 1))
            return t

    print(f"rank={xr.global_ordinal()} world_size={xr.world_size()} "
          f"device_count={xr.global_runtime_device_count()}")
    if args.mode == "spmd":
        print(f"mesh_shape=({n}, 1)")
    train(args, torch_xla.device(), shard, torch_xla.sync)
    print(met.metrics_report())


def spawned(index, args):
    import torch_xla
    import torch_xla.core.xla_model as xm
    import torch_xla.runtime as xr

    print(f"rank={xr.global_ordinal()} world_size={xr.world_size()} device_count={xr.global_runtime_device_count()}",
          flush=True)
    xm.all_reduce(xm.REDUCE_SUM, torch.ones(2, device=torch_xla.device())).cpu()
    train(args, torch_xla.device(), sync=torch_xla.sync)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--reference", action="store_true")
    p.add_argument("--mode", default="single", choices=["single", "spmd", "spawn"])
    p.add_argument("--variant", default="identical")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.5)
    p.add_argument("--max-grad-norm", type=float, default=0.5)
    args = p.parse_args()
    if args.reference:
        print("rank=0 world_size=1 device_count=1")
        train(args, torch.device("cpu"))
    elif args.mode == "spawn":
        import torch_xla.distributed.xla_multiprocessing as xmp

        xmp.spawn(spawned, args=(args,))
    else:
        xla(args)


if __name__ == "__main__":
    main()
