#!/usr/bin/env python3
"""pytorch_models.py - the same three models in PyTorch on the CPU, timed per step as ringside times them (one rank).

usage: pytorch_models.py MODEL BATCH STEPS WARMUP THREADS [--vocab V]
  MODEL: mlp (784-1024-1024-10, SGD momentum 0.9), lenet (as model/model_lenet.c, SGD momentum 0.9)
         or gpt (as model/model_gpt.c: L 2, H 4, C 64, T 64, tied head, AdamW)
Prints one line: "MODEL step_median_s S samples_per_s X params P". Synthetic inputs made once before
timing (ringside's synthetic data is in memory too); a step is zero_grad, forward, loss, backward,
optimizer step, timed with the wall clock after WARMUP untimed steps.
"""
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Mlp(nn.Module):
    def __init__(self, widths):
        super().__init__()
        self.fc = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths, widths[1:]))

    def forward(self, x):
        for i, f in enumerate(self.fc):
            x = f(x)
            if i + 1 < len(self.fc):
                x = F.relu(x)
        return x


class Lenet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(1, 6, 5, padding=2), nn.Conv2d(6, 16, 5)
        self.f1, self.f2, self.f3 = nn.Linear(400, 120), nn.Linear(120, 84), nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x.view(-1, 1, 28, 28))), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2).flatten(1)
        return self.f3(F.relu(self.f2(F.relu(self.f1(x)))))


class Block(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.H = H
        self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.fc, self.fcproj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.H, C // self.H).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, C)
        x = x + self.proj(y)
        return x + self.fcproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self, V, T=64, C=64, H=4, L=2):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        self.blocks = nn.ModuleList(Block(C, H) for _ in range(L))
        self.lnf = nn.LayerNorm(C)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for b in self.blocks:
            x = b(x)
        return self.lnf(x) @ self.wte.weight.t()  # the head tied to the token embedding


def main(argv):
    if len(argv) < 6:
        sys.exit(__doc__)
    name, B, steps, warmup, threads = argv[1], int(argv[2]), int(argv[3]), int(argv[4]), int(argv[5])
    V = int(argv[argv.index("--vocab") + 1]) if "--vocab" in argv else 256
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    if name == "gpt":
        T = 64
        model = Gpt(V, T)
        x, y = torch.randint(0, V, (B, T)), torch.randint(0, V, (B, T))
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
        loss_fn = lambda out: F.cross_entropy(out.view(-1, V), y.view(-1))  # noqa: E731
    else:
        model = Mlp([784, 1024, 1024, 10]) if name == "mlp" else Lenet()
        x, y = torch.rand(B, 784), torch.randint(0, 10, (B,))
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        loss_fn = lambda out: F.cross_entropy(out, y)  # noqa: E731
    times = []
    for s in range(warmup + steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=False)
        loss = loss_fn(model(x))
        loss.backward()
        opt.step()
        if s >= warmup:
            times.append(time.perf_counter() - t0)
        if not math.isfinite(loss.item()):
            sys.exit("pytorch_models.py: the loss is not finite")
    med = statistics.median(times)
    nparams = sum(p.numel() for p in model.parameters())
    print(f"{name} step_median_s {med:.6f} samples_per_s {B / med:.1f} params {nparams}")


if __name__ == "__main__":
    main(sys.argv)
