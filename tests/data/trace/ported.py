"""One small training traced by the probe, for the comparison of a run's trace with the
reference's: `reference` (plain torch on the CPU) and ports on torch_xla (XLA:CPU): `correct`,
`accumulate` (two micro-batches per optimizer step, done right: the loss halved, one step),
`spmd` (the batch sharded over every device of a mesh), and faults: `lr` (the schedule lost),
`skip` (the optimizer steps every other iteration), `batch` (a doubled batch), `eval_mode`
(training goes on in eval mode after the first evaluation), `eval_in_train` (evaluation without
`model.eval()`), `placement` (the first layer left on the host), `float64`, `nan` (the loss turns
NaN at step 12), `compile` (a new graph every step)."""
import os
import sys

import torch

mode = sys.argv[1]
torch.manual_seed(0)
shard = sync = None
if mode == "reference":
    device = torch.device("cpu")
else:
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    import torch_xla

    if mode == "spmd":
        import numpy as np
        import torch_xla.distributed.spmd as xs
        import torch_xla.runtime as xr

        xr.use_spmd()
        n = xr.global_runtime_device_count()
        mesh = xs.Mesh(np.arange(n), (n, 1), ("data", "model"))

        def shard(t):
            xs.mark_sharding(t, mesh, ("data",) + (None,) * (t.dim() - 1))
            return t
    device, sync = torch_xla.device(), torch_xla.sync


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder, self.head = torch.nn.Linear(8, 16), torch.nn.Linear(16, 1)
        self.drop = torch.nn.Dropout(0.1)

    def forward(self, x):
        h = self.encoder(x.to(self.encoder.weight.device)).relu()
        return self.head(self.drop(h).to(self.head.weight.device))


model = Net()
if mode == "float64":
    model = model.double()
model.head.to(device)
if mode != "placement":
    model.encoder.to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
sched = torch.optim.lr_scheduler.StepLR(opt, 5, 0.5)
g = torch.Generator().manual_seed(1)
dtype = torch.float64 if mode == "float64" else torch.float32
x, y = torch.randn(640, 8, generator=g, dtype=dtype), torch.randn(640, 1, generator=g, dtype=dtype)
batch = 32 if mode == "batch" else 16
parts = 2 if mode == "accumulate" else 1
for step in range(1, 21):
    i = (step - 1) * batch
    xb, yb = x[i:i + batch].to(device), y[i:i + batch].to(device)
    if shard is not None:
        xb, yb = shard(xb), shard(yb)
    opt.zero_grad()
    for xp, yp in zip(xb.chunk(parts), yb.chunk(parts)):
        loss = torch.nn.functional.mse_loss(model(xp), yp) / parts
        if mode == "nan" and step >= 12:
            loss = loss * float("nan")
        if mode == "compile":
            loss = loss + 0 * model(xb[: 1 + step % 12]).sum()
        loss.backward()
    if mode != "skip" or step % 2 == 0:
        opt.step()
    if mode != "lr":
        sched.step()
    if sync is not None:
        sync()
    if step % 5 == 0:
        if mode != "eval_in_train":
            model.eval()
        with torch.no_grad():
            held = model(x[:64].to(device)).sum()
        if sync is not None:
            sync()
        if mode != "eval_mode":
            model.train()
        print(f"step {step} held {held.item():.6f}")
