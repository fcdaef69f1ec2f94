"""DDP training of a small transformer language model with torch.distributed, backend "loom"
(or any other): synthetic tokens, fixed seeds, so runs can be compared step by step.

    torchrun --standalone --nproc-per-node 4 examples/torch/ddp_transformer.py --backend loom
    torchrun --standalone --nproc-per-node 4 examples/torch/ddp_transformer.py --backend gloo

The global batch is the same at every rank count (each rank trains on its slice), so the loss
at step k does not depend on the number of ranks except through floating-point rounding.
--out FILE writes the per-step losses and times as JSON; --save/--resume write and read a
checkpoint (model + optimizer + step), which one backend can write and another resume.
examples/torch/compare_runs.py runs the comparisons (loom vs gloo, 1/2/4 ranks, deterministic
mode across placements, checkpoints across backends).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", default="loom")
    p.add_argument("--steps", type=int, default=100, help="train until this global step")
    p.add_argument("--vocab", type=int, default=1024)
    p.add_argument("--d-model", type=int, default=192)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--global-batch", type=int, default=8, help="sequences per step, all ranks")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--out", help="JSON file for losses and step times (written by rank 0)")
    p.add_argument("--save", help="checkpoint written at the end (rank 0)")
    p.add_argument("--resume", help="checkpoint to start from")
    return p.parse_args()


class TinyLM(nn.Module):
    def __init__(self, vocab, d_model, layers, heads, seq):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = nn.Parameter(torch.zeros(seq, d_model))
        layer = nn.TransformerEncoderLayer(d_model, heads, 4 * d_model, dropout=0.0,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d_model, vocab)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(seq))

    def forward(self, tokens):
        x = self.embed(tokens) + self.pos[: tokens.shape[1]]
        return self.head(self.encoder(x, mask=self.mask, is_causal=True))


def batch_for(step, args):
    """The global batch of `step` (the same on every rank and at every rank count)."""
    g = torch.Generator().manual_seed(args.seed * 100_003 + step)
    # A learnable pattern: each sequence counts up from a random start, with some noise.
    start = torch.randint(0, args.vocab, (args.global_batch, 1), generator=g)
    seq = (start + torch.arange(args.seq + 1)) % args.vocab
    noise = torch.randint(0, args.vocab, seq.shape, generator=g)
    keep = torch.rand(seq.shape, generator=g) < 0.9
    return torch.where(keep, seq, noise)


def main():
    args = parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    fake_hosts = int(os.environ.get("DDP_FAKE_HOSTS", "0"))
    if fake_hosts:  # pretend the ranks run on that many hosts: loom connects them over tcp
        r, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        os.environ["LOOM_HOST_ID"] = f"fakehost{r * fake_hosts // n}"
    if args.backend == "loom":
        import loom.torch  # noqa: F401  (torch also finds it through its entry point)
    dist.init_process_group(args.backend)
    rank, ws = dist.get_rank(), dist.get_world_size()
    if args.global_batch % ws:
        raise SystemExit(f"--global-batch {args.global_batch} is not a multiple of {ws} ranks")
    torch.manual_seed(args.seed)
    model = TinyLM(args.vocab, args.d_model, args.layers, args.heads, args.seq)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    first = 0
    if args.resume:
        ckpt = torch.load(args.resume, map_location="cpu", weights_only=False)
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optim"])
        first = ckpt["step"]
    ddp = DDP(model)
    nparams = sum(p.numel() for p in model.parameters())
    per = args.global_batch // ws
    losses, times = [], []
    for step in range(first, args.steps):
        tokens = batch_for(step, args)[rank * per:(rank + 1) * per]
        t0 = time.perf_counter()
        logits = ddp(tokens[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, args.vocab),
                                           tokens[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        # The global mean loss (every rank's slice is the same size).
        report = loss.detach().clone()
        dist.all_reduce(report)
        losses.append((report / ws).item())
        if rank == 0 and (step % 10 == 0 or step == args.steps - 1):
            print(f"step {step:4d} loss {losses[-1]:.6f} ({times[-1] * 1e3:.0f} ms)", flush=True)
    digest = hashlib.sha256()
    for p in model.parameters():
        digest.update(p.detach().numpy().tobytes())
    if rank == 0:
        if args.save:
            torch.save({"model": model.state_dict(), "optim": opt.state_dict(),
                        "step": args.steps}, args.save)
        if args.out:
            with open(args.out, "w") as f:
                json.dump({"backend": args.backend, "world_size": ws, "params": nparams,
                           "first_step": first, "losses": losses, "step_seconds": times,
                           "param_sha256": digest.hexdigest(),
                           "finite": all(math.isfinite(x) for x in losses)}, f)
        print(f"{args.backend} x{ws}: {nparams} parameters, steps {first}..{args.steps - 1}, "
              f"final loss {losses[-1]:.6f}, median step "
              f"{sorted(times)[len(times) // 2] * 1e3:.1f} ms, params sha256 "
              f"{digest.hexdigest()[:16]}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
