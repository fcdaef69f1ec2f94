"""What each rank runs in tests/torch/test_backend.py for all_reduce of sparse COO tensors:
exact sums (overlapping and disjoint indices, a rank with no entries, hybrid tensors with dense
dimensions, uncoalesced inputs, several dtypes, AVG), the future's value, clear errors, and DDP
with sparse embedding gradients against gloo in the same job. Each returns a list of
mismatches (empty when all is well) or, for errors, the messages."""

from __future__ import annotations

import torch
import torch.distributed as dist

from ranks import grabber


def rank_entries(rank, ws, case):
    """Rank r's (indices, values, size) for a case; values are small integers, so every sum
    is exact in every dtype tested."""
    if case == "overlapping":  # every rank writes rows 0 and 3, and one row of its own
        rows = [0, 3, 5 + rank]
        return torch.tensor([rows]), torch.tensor([1.0, rank + 1.0, 2.0]), (8,)
    if case == "one rank empty":  # the last rank has no entries
        if rank == ws - 1:
            return torch.zeros((1, 0), dtype=torch.long), torch.zeros(0), (8,)
        return torch.tensor([[rank, 7]]), torch.tensor([3.0, 1.0]), (8,)
    if case == "all empty":
        return torch.zeros((2, 0), dtype=torch.long), torch.zeros(0), (4, 5)
    if case == "2-D, uncoalesced":  # (1, 1) twice on every rank
        idx = torch.tensor([[1, 1, rank, 2], [1, 1, 0, rank + 1]])
        return idx, torch.tensor([1.0, 2.0, rank + 1.0, 4.0]), (4, 5)
    if case == "hybrid":  # sparse rows of dense [3] vectors
        idx = torch.tensor([[rank % 2, 4]])
        vals = torch.arange(6, dtype=torch.float64).reshape(2, 3) + rank
        return idx, vals, (6, 3)
    raise ValueError(case)


CASES = ("overlapping", "one rank empty", "all empty", "2-D, uncoalesced", "hybrid")
DTYPES = (torch.float32, torch.float64, torch.int64, torch.bfloat16)


def make(rank, ws, case, dtype):
    idx, vals, size = rank_entries(rank, ws, case)
    return torch.sparse_coo_tensor(idx, vals.to(dtype), size)


def want(ws, case, dtype):
    dense = sum(make(r, ws, case, torch.float64).to_dense() for r in range(ws))
    return dense.to(dtype)


def sums(rank, ws):
    bad = []
    for case in CASES:
        for dtype in DTYPES:
            t = make(rank, ws, case, dtype)
            work = dist.all_reduce(t, async_op=True)
            work.wait()
            got = t.to_dense()
            if not t.is_sparse or not t.is_coalesced():
                bad.append(f"{case} {dtype}: result not a coalesced sparse tensor")
            if got.dtype != dtype or not torch.equal(got, want(ws, case, dtype)):
                bad.append(f"{case} {dtype}: got {got.tolist()}")
            fut = work.get_future().value()[0]
            if not torch.equal(fut.to_dense(), got):
                bad.append(f"{case} {dtype}: the future's value differs from the tensor")
    avg = make(rank, ws, "overlapping", torch.float64)
    dist.all_reduce(avg, op=dist.ReduceOp.AVG)
    if not torch.equal(avg.to_dense(), want(ws, "overlapping", torch.float64) / ws):
        bad.append(f"AVG: got {avg.to_dense().tolist()}")
    return bad


def errors(rank, ws):
    msgs = {}
    grab = grabber(msgs)

    t = make(rank, ws, "overlapping", torch.float32)
    grab("MAX", lambda: dist.all_reduce(t, op=dist.ReduceOp.MAX))
    grab("int AVG", lambda: dist.all_reduce(make(rank, ws, "overlapping", torch.int64),
                                             op=dist.ReduceOp.AVG))
    # rank 1's tensor is longer: every rank raises, naming both shapes
    shape = (8,) if rank != 1 else (9,)
    other = torch.sparse_coo_tensor(torch.tensor([[0]]), torch.tensor([1.0]), shape)
    grab("shape", lambda: dist.all_reduce(other))
    u = torch.ones(4)
    dist.all_reduce(u)
    msgs["still works"] = None if torch.equal(u, torch.full((4,), float(ws))) else "broken"
    return msgs


def _embedding_model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Embedding(50, 8, sparse=True), torch.nn.Flatten(),
                               torch.nn.Linear(8 * 4, 1))


def ddp_sparse_against_gloo(rank, ws, steps=6):
    """DDP with a sparse embedding gradient over loom and over gloo (same ranks, same data):
    the parameters must match after every step. Returns [max abs difference per step]."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    gloo = dist.new_group(backend="gloo")
    models = {name: DDP(_embedding_model(7), process_group=pg)
              for name, pg in (("loom", None), ("gloo", gloo))}
    opts = {name: torch.optim.SGD(m.parameters(), lr=0.1) for name, m in models.items()}
    g = torch.Generator().manual_seed(100 + rank)
    diffs = []
    for _ in range(steps):
        tokens = torch.randint(0, 50, (16, 4), generator=g)
        target = torch.randn(16, 1, generator=g)
        for name, m in models.items():
            opts[name].zero_grad()
            torch.nn.functional.mse_loss(m(tokens), target).backward()
            opts[name].step()
        diffs.append(max((a - b).abs().max().item() for a, b in
                         zip(models["loom"].parameters(), models["gloo"].parameters())))
    return diffs
