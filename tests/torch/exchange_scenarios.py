"""What each rank runs in tests/torch/test_backend.py for the calls loom's point-to-point,
all-to-all, gather/scatter and grouped API brought: all-to-all (single, with uneven split sizes
and zeros, and lists), gather/scatter to non-zero roots, send/recv with tags,
batch_isend_irecv, the coalescing manager, PREMUL_SUM and the bitwise ops. Each returns a
list of mismatches (empty when all is well)."""

from __future__ import annotations

import torch
import torch.distributed as dist

from ranks import grabber

ROW = 3  # elements per row of the 2-D all_to_all_single tensors


def code(src, dst, n, dtype):
    """What rank src sends to rank dst: n distinct values, exact in dtype."""
    return (torch.arange(n, dtype=torch.float64) % 7 + 10 * src + 30 * dst).to(dtype)


def split(src, dst):
    """Rows rank src sends to rank dst: uneven, and 0 for some pairs."""
    return (src + 2 * dst) % 3


def all_to_all(rank, ws):
    bad = []
    for dtype in (torch.float32, torch.int64, torch.bfloat16, torch.uint8):
        # equal blocks, no split sizes
        n = 5
        inp = torch.cat([code(rank, p, n, dtype) for p in range(ws)])
        out = torch.zeros(n * ws, dtype=dtype)
        dist.all_to_all_single(out, inp)
        want = torch.cat([code(p, rank, n, dtype) for p in range(ws)])
        if not torch.equal(out, want):
            bad.append(f"all_to_all_single equal {dtype}: {out.tolist()} want {want.tolist()}")
        # uneven split sizes along dim 0 of a [rows, ROW] tensor, zeros included
        in_splits = [split(rank, p) for p in range(ws)]
        out_splits = [split(p, rank) for p in range(ws)]
        inp = torch.cat([code(rank, p, s * ROW, dtype) for p, s in enumerate(in_splits)])
        inp = inp.view(-1, ROW)
        out = torch.full((sum(out_splits), ROW), 99, dtype=dtype)
        dist.all_to_all_single(out, inp, out_splits, in_splits)
        want = torch.cat([code(p, rank, s * ROW, dtype) for p, s in enumerate(out_splits)])
        if not torch.equal(out.reshape(-1), want):
            bad.append(f"all_to_all_single splits {in_splits}/{out_splits} {dtype}: "
                       f"{out.reshape(-1).tolist()} want {want.tolist()}")
    # a non-contiguous output is written through
    base = torch.zeros(4, 2 * ws)
    out = base.t()  # [2 * ws, 4], not contiguous
    inp = torch.cat([code(rank, p, 8, torch.float32) for p in range(ws)]).view(2 * ws, 4)
    dist.all_to_all_single(out, inp)
    want = torch.cat([code(p, rank, 8, torch.float32) for p in range(ws)]).view(2 * ws, 4)
    if not torch.equal(base.t(), want):
        bad.append("all_to_all_single into a transposed view")
    # list form: a different size for every pair
    ins = [code(rank, p, rank + p + 1, torch.float64) for p in range(ws)]
    outs = [torch.zeros(p + rank + 1, dtype=torch.float64) for p in range(ws)]
    dist.all_to_all(outs, ins)
    for p in range(ws):
        if not torch.equal(outs[p], code(p, rank, p + rank + 1, torch.float64)):
            bad.append(f"all_to_all list block from {p}: {outs[p].tolist()}")
    return bad


def gather_scatter(rank, ws):
    bad = []
    for root in (ws - 1, 1, 0):
        for dtype in (torch.int32, torch.bfloat16):
            mine = code(rank, root, 11, dtype)
            outs = [torch.zeros(11, dtype=dtype) for _ in range(ws)] if rank == root else None
            dist.gather(mine, outs, dst=root)
            if rank == root:
                for p in range(ws):
                    if not torch.equal(outs[p], code(p, root, 11, dtype)):
                        bad.append(f"gather root {root} {dtype} block {p}: {outs[p].tolist()}")
            if not torch.equal(mine, code(rank, root, 11, dtype)):
                bad.append(f"gather changed rank {rank}'s input")
            ins = [code(root, p, 11, dtype) for p in range(ws)] if rank == root else None
            got = torch.zeros(11, dtype=dtype)
            dist.scatter(got, ins, src=root)
            if not torch.equal(got, code(root, rank, 11, dtype)):
                bad.append(f"scatter root {root} {dtype} to {rank}: {got.tolist()}")
    return bad


def send_recv(rank, ws):
    """A chain 0 -> 1 -> ... -> ws-1, two tags per hop, received in order; the last hop into
    a non-contiguous tensor."""
    bad = []
    n = 1000
    works = []
    if rank + 1 < ws:
        for tag in (5, 7):
            works.append(dist.isend(code(rank, rank + 1, n, torch.float32) * tag, rank + 1,
                                    tag=tag))
    if rank > 0:
        for tag in (5, 7):
            got = torch.zeros(n, dtype=torch.float32)
            dist.recv(got, src=rank - 1, tag=tag)
            if not torch.equal(got, code(rank - 1, rank, n, torch.float32) * tag):
                bad.append(f"recv tag {tag} from {rank - 1}: {got[:4].tolist()}")
    for w in works:
        w.wait()
    # rank 0 <-> last rank, int64 into a transposed view
    last = ws - 1
    if rank == 0:
        dist.send(torch.arange(12, dtype=torch.int64).view(3, 4), last, tag=1)
    elif rank == last:
        base = torch.zeros(4, 3, dtype=torch.int64)
        dist.recv(base.t(), src=0, tag=1)
        if not torch.equal(base.t(), torch.arange(12, dtype=torch.int64).view(3, 4)):
            bad.append(f"recv into a transposed view: {base.t().tolist()}")
    return bad


def batch_ring(rank, ws):
    """batch_isend_irecv around a ring with 32 MiB messages: every rank sends before it
    receives, which only works when the batch runs its sends and receives side by side."""
    bad = []
    n = 8 << 20
    nxt, prv = (rank + 1) % ws, (rank - 1) % ws
    out = torch.full((n,), float(rank + 1))
    inn = torch.zeros(n)
    ops = [dist.P2POp(dist.isend, out, nxt), dist.P2POp(dist.irecv, inn, prv)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    if not torch.equal(inn, torch.full((n,), float(prv + 1))):
        bad.append(f"batch_isend_irecv ring: got {inn[:3].tolist()} from {prv}")
    # twice more, with an all_reduce in between (order of p2p and collectives)
    for k in range(2):
        t = torch.ones(4)
        dist.all_reduce(t)
        ops = [dist.P2POp(dist.irecv, inn, prv), dist.P2POp(dist.isend, out * (k + 2), nxt)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        if not torch.equal(inn, torch.full((n,), float((prv + 1) * (k + 2)))) or t[0] != ws:
            bad.append(f"batch_isend_irecv round {k}")
    return bad


def coalesced(rank, ws):
    """torch's coalescing manager (as FSDP uses it): all_reduces (fused), all_gather_into_tensor
    and reduce_scatter_tensor, each batch one loom group."""
    bad = []
    ts = [torch.full((n,), float(rank + 1)) for n in (1, 37, 1000, 4096)]
    with dist._coalescing_manager(device=torch.device("cpu")):
        for t in ts:
            dist.all_reduce(t)
    total = ws * (ws + 1) / 2
    for t in ts:
        if not torch.equal(t, torch.full_like(t, total)):
            bad.append(f"coalesced all_reduce of {t.numel()}: {t[:3].tolist()}")
    with dist._coalescing_manager(device=torch.device("cpu"), async_ops=True) as cm:
        for t in ts:
            dist.all_reduce(t)
    cm.wait()
    for t in ts:
        if not torch.equal(t, torch.full_like(t, total * ws)):
            bad.append(f"async coalesced all_reduce of {t.numel()}: {t[:3].tolist()}")
    # all_gather_into_tensor and reduce_scatter_tensor through the coalescing manager
    ins = [torch.full((n,), float(rank + 1)) for n in (3, 50)]
    outs = [torch.zeros(n * ws) for n in (3, 50)]
    with dist._coalescing_manager(device=torch.device("cpu")):
        for o, i in zip(outs, ins):
            dist.all_gather_into_tensor(o, i)
    for o, n in zip(outs, (3, 50)):
        want = torch.cat([torch.full((n,), float(r + 1)) for r in range(ws)])
        if not torch.equal(o, want):
            bad.append(f"coalesced all_gather_into_tensor of {n}: {o.tolist()}")
    rs = [torch.zeros(n) for n in (3, 50)]
    with dist._coalescing_manager(device=torch.device("cpu")):
        for r, o in zip(rs, outs):
            dist.reduce_scatter_tensor(r, o)
    for r, n in zip(rs, (3, 50)):
        if not torch.equal(r, torch.full((n,), float(ws * (rank + 1)))):
            bad.append(f"coalesced reduce_scatter_tensor of {n}: {r.tolist()}")
    return bad


def premul_and_bitwise(rank, ws):
    bad = []
    x = (torch.arange(37, dtype=torch.float64) + rank) % 2 + 1  # 1s and 2s
    xs = [(torch.arange(37, dtype=torch.float64) + r) % 2 + 1 for r in range(ws)]
    factor = 0.5 * (rank + 1)  # each rank its own factor
    want = sum(xr * 0.5 * (r + 1) for r, xr in enumerate(xs))
    for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
        t = x.clone().to(dtype)
        dist.all_reduce(t, op=dist._make_nccl_premul_sum(factor))
        if not torch.equal(t, want.to(dtype)):
            bad.append(f"PREMUL_SUM {dtype}: {t[:4].tolist()} want {want[:4].tolist()}")
    # the factor as a one-element tensor
    t = x.to(torch.float32)
    dist.all_reduce(t, op=dist._make_nccl_premul_sum(torch.tensor([factor])))
    if not torch.equal(t, want.to(torch.float32)):
        bad.append(f"PREMUL_SUM tensor factor: {t[:4].tolist()}")
    # reduce_scatter_tensor and reduce with PREMUL_SUM
    inp = torch.cat([x * (j + 1) for j in range(ws)]).to(torch.float32)
    out = torch.zeros(37)
    dist.reduce_scatter_tensor(out, inp, op=dist._make_nccl_premul_sum(factor))
    if not torch.equal(out, (want * (rank + 1)).to(torch.float32)):
        bad.append(f"reduce_scatter_tensor PREMUL_SUM: {out[:4].tolist()}")
    t = x.clone()
    dist.reduce(t, dst=ws - 1, op=dist._make_nccl_premul_sum(factor))
    if rank == ws - 1 and not torch.equal(t, want):
        bad.append(f"reduce PREMUL_SUM: {t[:4].tolist()}")
    # bitwise ops on integers and bool
    vals = [torch.tensor([1 << r, 0xF0 | r, -1 - r], dtype=torch.int64) for r in range(ws)]
    for name, fold in (("BAND", lambda a, b: a & b), ("BOR", lambda a, b: a | b),
                       ("BXOR", lambda a, b: a ^ b)):
        for dtype in (torch.int32, torch.int64, torch.uint8):
            t = vals[rank].clone().to(dtype)
            dist.all_reduce(t, op=getattr(dist.ReduceOp, name))
            w = vals[0].to(dtype)
            for v in vals[1:]:
                w = fold(w, v.to(dtype))
            if not torch.equal(t, w):
                bad.append(f"{name} {dtype}: {t.tolist()} want {w.tolist()}")
        b = torch.tensor([True, rank == 0, False, rank % 2 == 1])
        dist.all_reduce(b, op=getattr(dist.ReduceOp, name))
        bs = [torch.tensor([True, r == 0, False, r % 2 == 1]) for r in range(ws)]
        w = bs[0]
        for v in bs[1:]:
            w = fold(w, v)
        if not torch.equal(b, w):
            bad.append(f"{name} bool: {b.tolist()} want {w.tolist()}")
    return bad


def any_source(rank, ws):
    """Every other rank sends rank 0 two tensors of its rank; rank 0 takes them with recv and
    irecv from any source (src=None), as PyTorch's test_send_recv_any_source does, then checks
    the payloads against the senders torch reports. Returns rank 0's problems and senders."""
    if rank != 0:
        for _ in range(2):
            dist.send(torch.full((10,), float(rank)), dst=0)
        return None
    bad, senders = [], []
    for k in range(2 * (ws - 1)):
        t = torch.full((10,), -1.0)
        if k % 2 == 0:
            src = dist.recv(t)
        else:
            work = dist.irecv(t)
            work.wait()
            src = work._source_rank()
        senders.append(src)
        if not torch.equal(t, torch.full((10,), float(src))):
            bad.append(f"message {k} from rank {src}: {t.tolist()}")
    return bad, sorted(senders)


def p2p_errors(rank, ws):
    """send to itself and a tag that differs from the sender's raise clearly; the group still
    works afterwards. Returns the messages."""
    msgs = {}
    grab = grabber(msgs)

    t = torch.ones(4)
    grab("self", lambda: dist.send(t, dst=rank))
    grab("BAND float", lambda: dist.all_reduce(torch.ones(4), op=dist.ReduceOp.BAND))
    grab("PREMUL_SUM bool", lambda: dist.all_reduce(torch.ones(4, dtype=torch.bool),
                                                    op=dist._make_nccl_premul_sum(2.0)))
    grab("uneven splits", lambda: dist.all_to_all_single(
        torch.empty(2 * ws), torch.empty(2 * ws), [1] * ws, [2] * ws))
    u = torch.ones(4)
    dist.all_reduce(u)
    msgs["still works"] = None if torch.equal(u, torch.full((4,), float(ws))) else "broken"
    return msgs


def tag_mismatch(rank, ws):
    """Rank 1 receives with another tag than rank 0 sent: loom fails the receive with
    Mismatch naming both tags (a mismatch ends the communicator: nothing runs after it)."""
    t = torch.ones(4)
    try:
        if rank == 0:
            dist.send(t, dst=1, tag=3)
        elif rank == 1:
            dist.recv(t, src=0, tag=4)
        return None
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {e}".split("\n")[0]
