"""Two replicas under torchrun (gloo): `correct` (DDP, a shard each; under one process, the
reference), `no_allreduce` (no DDP: each replica trains alone), `same_data` (DDP, every replica
reads the whole batch) or `undivided` (DDP, each replica reads a whole batch of its own: twice the
samples per step); without DDP, gradients averaged by hand with all_reduce and clipped after it
(`clip_after`) or, as the study's pinned library did, before it (`clip_first`)."""
import sys

import torch
import torch.distributed as dist

mode = sys.argv[1]
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
if mode not in ("no_allreduce", "clip_first", "clip_after"):
    model = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
g = torch.Generator().manual_seed(1)
x, y = torch.randn(512, 8, generator=g), torch.randn(512, 1, generator=g)
for step in range(1, 25):
    i = ((step - 1) * (world if mode == "undivided" else 1) + (rank if mode == "undivided" else 0)) * 16 % 512
    xb, yb = x[i:i + 16], y[i:i + 16]
    if mode not in ("same_data", "undivided"):
        xb, yb = xb.chunk(world)[rank], yb.chunk(world)[rank]
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(xb), yb).backward()
    if mode == "clip_first":
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
    if mode in ("clip_first", "clip_after"):
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= world
    if mode == "clip_after":
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
    opt.step()
    if rank == 0 and step % 8 == 0:
        print(f"step {step} done")
dist.destroy_process_group()
