"""What each rank runs in tests/torch/test_backend_cuda.py: loom's backend with CUDA tensors.
Every rank uses GPU (rank mod GPUs), so 2 ranks on a one-GPU machine share it (loom's
cuda_ipc between processes on one device). Each function returns a list of mismatches."""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

import scenarios as sc


def set_device(rank, ws):
    """ranks.run_ranks(setup=...): the rank's GPU is current before init_process_group, so the
    group's communicator lives there (as NCCL asks)."""
    torch.cuda.set_device(rank % torch.cuda.device_count())


def dev():
    return torch.device("cuda", torch.cuda.current_device())


def which_stream(rank, ws):
    """The first device call on a side stream, then on torch's default (legacy) stream, each
    checked: says which of the two a hang or a wrong value comes from (a GPU session's first
    run of these tests saw the first default-stream allreduce time out)."""
    bad = []
    d = dev()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        t = torch.full((37,), float(rank + 1), device=d)
        dist.all_reduce(t)
    s.synchronize()
    if not torch.equal(t.cpu(), torch.full((37,), float(sum(range(1, ws + 1))))):
        bad.append(f"side stream: got {t[:4].tolist()}")
    t = torch.full((37,), float(rank + 1), device=d)
    dist.all_reduce(t)
    torch.cuda.synchronize()
    if not torch.equal(t.cpu(), torch.full((37,), float(sum(range(1, ws + 1))))):
        bad.append(f"default stream: got {t[:4].tolist()}")
    return bad


def all_reduce_matrix(rank, ws):
    """Every dtype x ReduceOp loom serves, on device tensors, exact."""
    bad = []
    for dtype, ops in sc.REDUCIBLE.items():
        for op in ops:
            t = sc.make(rank, dtype).to(dev())
            dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
            e = sc.expected(op, dtype, ws)
            if not sc.same(t.cpu(), e):
                bad.append(f"all_reduce {op} {dtype}: got {t[:6].tolist()} want {e[:6].tolist()}")
    return bad


def data_movement(rank, ws):
    """broadcast from every root, all_gather_into_tensor, reduce_scatter_tensor,
    all_to_all_single, send/recv around a ring, a transposed view reduced in place: sizes from
    0 to 4 MiB."""
    bad = []
    d = dev()
    for n in (0, 1, 37, 1 << 20):
        for root in range(ws):
            t = torch.full((n,), float(rank + 1), device=d)
            dist.broadcast(t, src=root)
            if n and not torch.equal(t.cpu(), torch.full((n,), float(root + 1))):
                bad.append(f"broadcast n={n} root={root}")
        inp = torch.arange(n, dtype=torch.float32, device=d) + 1000 * rank
        out = torch.empty(n * ws, device=d)
        dist.all_gather_into_tensor(out, inp)
        want = torch.cat([torch.arange(n, dtype=torch.float32) + 1000 * r for r in range(ws)])
        if not torch.equal(out.cpu(), want):
            bad.append(f"all_gather_into_tensor n={n}")
        big = torch.arange(n * ws, dtype=torch.float32, device=d) + rank
        piece = torch.empty(n, device=d)
        dist.reduce_scatter_tensor(piece, big)
        full = sum(torch.arange(n * ws, dtype=torch.float32) + r for r in range(ws))
        if not torch.equal(piece.cpu(), full[rank * n:(rank + 1) * n]):
            bad.append(f"reduce_scatter_tensor n={n}")
        a2a_in = torch.arange(n * ws, dtype=torch.float32, device=d) + 100000 * rank
        a2a_out = torch.empty(n * ws, device=d)
        dist.all_to_all_single(a2a_out, a2a_in)
        want = torch.cat([torch.arange(rank * n, (rank + 1) * n, dtype=torch.float32) +
                          100000 * r for r in range(ws)])
        if not torch.equal(a2a_out.cpu(), want):
            bad.append(f"all_to_all_single n={n}")
    nxt, prv = (rank + 1) % ws, (rank - 1) % ws
    s = torch.full((1000,), float(rank), device=d)
    r = torch.empty(1000, device=d)
    ops = [dist.P2POp(dist.isend, s, nxt), dist.P2POp(dist.irecv, r, prv)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    if not torch.equal(r.cpu(), torch.full((1000,), float(prv))):
        bad.append("send/recv ring")
    m = torch.arange(12, dtype=torch.float32, device=d).reshape(3, 4) * (rank + 1)
    view = m.t()  # not contiguous: staged, reduced, copied back on the stream
    dist.all_reduce(view)
    if not torch.equal(m.cpu(), torch.arange(12, dtype=torch.float32).reshape(3, 4) *
                       sum(range(1, ws + 1))):
        bad.append("transposed view")
    return bad


def stream_semantics(rank, ws):
    """A collective is ordered on the current stream and does not block the host: behind a
    kernel that keeps the stream busy for ~0.5 s, all_reduce(async_op=True) and its wait()
    return at once, the result is right once the stream is done, work on a side stream sees it
    after wait(), and the future completes with the tensor."""
    bad = []
    d = dev()
    t = torch.full((1 << 20,), float(rank + 1), device=d)
    dist.all_reduce(t)  # warm-up: first-use costs (peer mappings) are not the point here
    t.fill_(float(rank + 1))
    torch.cuda.synchronize()
    torch.cuda._sleep(int(1e9))  # ~0.5 s of GPU time at 2 GHz on the current stream
    t0 = time.perf_counter()
    w = dist.all_reduce(t, async_op=True)
    issued = time.perf_counter() - t0
    w.wait()  # the current stream waits; the host does not
    waited = time.perf_counter() - t0
    if issued > 0.1 or waited > 0.1:
        bad.append(f"host blocked: issue {issued * 1e3:.1f} ms, wait {waited * 1e3:.1f} ms")
    total = float(sum(range(1, ws + 1)))
    if not torch.equal(t.cpu(), torch.full((1 << 20,), total)):  # .cpu() syncs the stream
        bad.append("value after the busy stream")
    side = torch.cuda.Stream()
    x = torch.full((4096,), float(rank + 1), device=d)
    with torch.cuda.stream(side):
        side.wait_stream(torch.cuda.current_stream())
        w = dist.all_reduce(x, async_op=True)
        fut = w.get_future()
        y = fut.then(lambda f: f.value()[0] * 2)
        w.wait()
        z = x * 1  # on the side stream, after the collective
    torch.cuda.current_stream().wait_stream(side)
    if not torch.equal(z.cpu(), torch.full((4096,), total)):
        bad.append("side stream after wait()")
    if not torch.equal(y.wait().cpu(), torch.full((4096,), 2 * total)):
        bad.append("future.then on a side stream")
    return bad


def ddp_steps(rank, ws):
    """DDP with backend loom on CUDA: after each step the parameters are bitwise equal on every
    rank and equal to a single-process run over the whole batch (inputs whose gradients are
    exact in float32)."""
    bad = []
    d = dev()
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 8, bias=False).to(d)
    with torch.no_grad():
        model.weight.copy_(torch.arange(512, dtype=torch.float32).reshape(8, 64) / 64)
    ref = torch.nn.Linear(64, 8, bias=False).to(d)
    ref.load_state_dict(model.state_dict())
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[d.index])
    opt = torch.optim.SGD(ddp.parameters(), lr=1 / 1024)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=1 / 1024)
    for step in range(5):
        xs = [torch.full((4, 64), float(r + step + 1), device=d) for r in range(ws)]
        opt.zero_grad()
        ddp(xs[rank]).sum().backward()
        opt.step()
        ref_opt.zero_grad()
        (sum(ref(x).sum() for x in xs) / ws).backward()
        ref_opt.step()
        if not torch.equal(model.weight.cpu(), ref.weight.cpu()):
            diff = (model.weight - ref.weight).abs().max().item()
            bad.append(f"step {step}: DDP differs from one process by {diff}")
    gathered = [torch.empty_like(model.weight) for _ in range(ws)]
    dist.all_gather(gathered, model.weight.detach())
    if any(not torch.equal(g, gathered[0]) for g in gathered):
        bad.append("parameters differ between ranks")
    return bad


def wrong_device(rank, ws):
    """A tensor on another GPU than the group's is refused with a clear error (one GPU: a CPU
    tensor and a CUDA tensor in one call instead)."""
    bad = []
    try:
        out = torch.empty(4 * ws, device=dev())
        dist.all_gather_into_tensor(out, torch.ones(4))
        bad.append("mixed CPU and CUDA tensors were accepted")
    except (ValueError, RuntimeError) as e:
        if "loom" not in str(e) and "device" not in str(e):
            bad.append(f"unclear error for mixed devices: {e}")
    t = torch.ones(8, device=dev())
    dist.all_reduce(t)  # the group still works
    if not torch.equal(t.cpu(), torch.full((8,), float(ws))):
        bad.append("all_reduce after the refused call")
    return bad
