"""Train a bag-of-embeddings classifier on synthetic variable-length token sequences.

Batches are grouped by length (sorted, then the batch order shuffled) and padded to the longest
sequence of each batch, which keeps padding small on a GPU. Runs on the GPU when available, else
on the CPU. Everything is seeded.
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, DIM, CLASSES, MAX_LEN = 64, 32, 3, 40


def make_data(n, seed):
    """Token sequences of length 4..40 (0 is padding); the label is a linear teacher's argmax."""
    g = torch.Generator().manual_seed(4321)
    teacher = torch.randn(VOCAB, CLASSES, generator=g)
    teacher[0] = 0
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(4, MAX_LEN + 1, (n,), generator=g)
    x = torch.zeros(n, MAX_LEN, dtype=torch.long)
    for i, n_tok in enumerate(lengths.tolist()):
        x[i, :n_tok] = torch.randint(1, VOCAB, (n_tok,), generator=g)
    y = (teacher[x].sum(1) / lengths[:, None]).argmax(1)
    return x, lengths, y


def length_grouped_batches(lengths, batch_size, seed):
    """Sort by length, cut into batches, shuffle the batch order."""
    order = torch.argsort(lengths, stable=True)
    batches = list(order.split(batch_size))
    g = torch.Generator().manual_seed(seed)
    return [batches[i] for i in torch.randperm(len(batches), generator=g).tolist()]


class BagClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM, padding_idx=0)
        self.head = nn.Sequential(nn.Linear(DIM, DIM), nn.ReLU(), nn.Linear(DIM, CLASSES))

    def forward(self, x):
        mask = (x != 0).float()
        pooled = (self.emb(x) * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
        return self.head(pooled)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=0.01)
    args = p.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    n_dev = torch.cuda.device_count() if device.type == "cuda" else 1
    print(f"hardware {device.type} devices_available {n_dev} devices_used 1")

    x_train, len_train, y_train = make_data(1024, seed=1)
    x_eval, _, y_eval = make_data(512, seed=2)
    batches = length_grouped_batches(len_train, args.batch_size, seed=3)
    torch.manual_seed(0)
    model = BagClassifier().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)

    for step in range(1, args.steps + 1):
        t0 = time.perf_counter()
        idx = batches[(step - 1) % len(batches)]
        width = int(len_train[idx].max())               # pad to the longest in the batch
        xb = x_train[idx, :width].to(device)
        yb = y_train[idx].to(device)
        opt.zero_grad()
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
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


if __name__ == "__main__":
    main()
