"""What each rank runs in tests/torch/test_backend.py for torch's newer parallelism APIs on
top of a backend: functional collectives (what torch.compile traces and DTensor calls), a
DeviceMesh with DTensor, and FSDP2 (fully_shard) training against the same model over gloo
in the same job. Each returns a list of mismatches (empty when all is well) or numbers the
parent checks."""

from __future__ import annotations

import torch
import torch.distributed as dist


def functional_collectives(rank, ws):
    import torch.distributed._functional_collectives as funcol

    bad = []
    group = dist.group.WORLD
    x = torch.arange(6, dtype=torch.float32) + rank
    want = sum(torch.arange(6, dtype=torch.float32) + r for r in range(ws))
    got = funcol.all_reduce(x, "sum", group)
    if not torch.equal(got.wait() if hasattr(got, "wait") else got, want):
        bad.append(f"all_reduce: {got}")
    gather = getattr(funcol, "all_gather_single", None) or funcol.all_gather_tensor
    got = gather(x, 0, group)
    want = torch.cat([torch.arange(6, dtype=torch.float32) + r for r in range(ws)])
    if not torch.equal(torch.as_tensor(got), want):
        bad.append(f"all_gather_tensor: {got}")
    y = torch.arange(2 * ws, dtype=torch.float32) * (rank + 1)
    scatter = getattr(funcol, "reduce_scatter_single", None) or funcol.reduce_scatter_tensor
    got = scatter(y, "sum", 0, group)
    factor = ws * (ws + 1) / 2
    want = (torch.arange(2 * ws, dtype=torch.float32) * factor)[2 * rank:2 * rank + 2]
    if not torch.equal(torch.as_tensor(got), want):
        bad.append(f"reduce_scatter_tensor: {got}")
    got = funcol.all_to_all_single(torch.full((ws,), float(rank)), None, None, group)
    if not torch.equal(torch.as_tensor(got), torch.arange(ws, dtype=torch.float32)):
        bad.append(f"all_to_all_single: {got}")
    return bad


def dtensor(rank, ws):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    bad = []
    mesh = init_device_mesh("cpu", (ws,))
    full = torch.arange(4 * ws * 3, dtype=torch.float32).reshape(4 * ws, 3)
    d = distribute_tensor(full, mesh, [Shard(0)])
    if not torch.equal(d.to_local(), full[4 * rank:4 * rank + 4]):
        bad.append("Shard(0) local piece")
    if not torch.equal(d.redistribute(mesh, [Replicate()]).to_local(), full):
        bad.append("Shard(0) -> Replicate (all_gather)")
    if not torch.equal(d.full_tensor(), full):
        bad.append("full_tensor")
    s = (d * 2).sum()  # a partial sum reduced across ranks
    if s.full_tensor().item() != 2 * full.sum().item():
        bad.append(f"sum: {s.full_tensor().item()}")
    return bad


def _mlp(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32),
                               torch.nn.ReLU(), torch.nn.Linear(32, 4))


def fsdp2_against_gloo(rank, ws, steps=5):
    """FSDP2 (fully_shard per layer and at the root) over loom and over gloo on the same ranks
    and data: returns the largest loss difference and the largest parameter difference after
    the last step."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    meshes = {"loom": init_device_mesh("cpu", (ws,))}
    gloo = dist.new_group(backend="gloo")
    from torch.distributed.device_mesh import DeviceMesh

    meshes["gloo"] = DeviceMesh.from_group(gloo, "cpu")
    models, optims = {}, {}
    for name, mesh in meshes.items():
        m = _mlp(3)
        for layer in m:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer, mesh=mesh)
        fully_shard(m, mesh=mesh)
        models[name] = m
        optims[name] = torch.optim.Adam(m.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(50 + rank)
    loss_diff = 0.0
    for _ in range(steps):
        x = torch.randn(8, 16, generator=g)
        y = torch.randn(8, 4, generator=g)
        losses = {}
        for name, m in models.items():
            optims[name].zero_grad()
            loss = torch.nn.functional.mse_loss(m(x), y)
            loss.backward()
            optims[name].step()
            losses[name] = loss.item()
        loss_diff = max(loss_diff, abs(losses["loom"] - losses["gloo"]))
    param_diff = max((a.full_tensor() - b.full_tensor()).abs().max().item() for a, b in
                     zip(models["loom"].parameters(), models["gloo"].parameters()))
    return loss_diff, param_diff
