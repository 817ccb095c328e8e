"""A seeded MLP with dropout trained for 20 steps, on plain CPU torch (the reference) or torch_xla
on one device (a port): issue 34's random streams. The port draws its dropout masks from XLA's
generator, not CPU torch's, so no faithful port repeats the reference's numbers; the reference's
replicates (WORKBENCH_SEED, which draws the masks: the initial weights are fixed) show how far
the masks alone move them.

    WORKBENCH_SEED=3 python train_dropout.py --reference   # plain torch on the CPU, seed 3
    python train_dropout.py                                # the correct torch_xla port
    python train_dropout.py --variant loss_scale           # a port whose loss is 10% off

Prints `step=S loss=L` each step and `eval_accuracy A` at the end.
"""
import argparse
import os

import torch
import torch.nn.functional as F


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--reference", action="store_true")
    p.add_argument("--variant", default="identical")
    args = p.parse_args()
    sync = lambda: None  # noqa: E731
    if args.reference:
        device = torch.device("cpu")
    else:
        import torch_xla

        device, sync = torch_xla.device(), torch_xla.sync
    data = torch.Generator().manual_seed(1)   # the data is the same for every seed
    x = torch.randn(640, 16, generator=data)
    y = (x[:, :4].sum(dim=1) > 0).long()
    torch.manual_seed(0)   # the initial weights too (as from a checkpoint): the seed draws the masks
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Dropout(0.3),
                                torch.nn.Linear(64, 2)).to(device)
    torch.manual_seed(int(os.environ.get("WORKBENCH_SEED", "0")))
    opt = torch.optim.SGD(model.parameters(), lr=0.2)
    scale = 1.1 if args.variant == "loss_scale" else 1.0
    for step in range(1, 21):
        i = ((step - 1) * 32) % len(x)
        xb, yb = x[i:i + 32].to(device), y[i:i + 32].to(device)
        opt.zero_grad()
        loss = F.cross_entropy(model(xb), yb) * scale
        loss.backward()
        opt.step()
        sync()
        print(f"step={step} loss={loss.item():.6f}")
    model.eval()
    with torch.no_grad():
        acc = (model(x.to(device)).argmax(dim=1) == y.to(device)).float().mean().item()
    print(f"eval_accuracy {acc:.4f}")


if __name__ == "__main__":
    main()
