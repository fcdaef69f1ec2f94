"""loom as a torch.distributed backend.

    import torch.distributed as dist
    import loom.torch  # optional: torch also finds the backend through its entry point
    dist.init_process_group("loom")   # under torchrun, srun, mpirun (env:// or any init_method)

The process group's c10d Store carries the rendezvous: group rank 0 creates a loom UniqueId
(loom's rendezvous server on a free port, with a fresh secret) and publishes it there; every
rank then joins loom's communicator. `init_process_group(timeout=...)` is loom's timeout for
every wait. loom's own knobs go through `pg_options=loom.torch.Options(...)` or the LOOM_*
environment variables (`loom-info` lists them).
"""

from __future__ import annotations

import atexit
import os
from dataclasses import dataclass, field
from datetime import timedelta

import torch  # noqa: F401  (loads libtorch before the extension)
import torch.distributed as dist

from . import _C

__all__ = ["BACKEND", "Options", "register", "init_process_group", "env_from_launcher",
           "status", "failed_ranks", "loom_version"]

BACKEND = "loom"
loom_version = _C.loom_version


@dataclass
class Options:
    """Per-group loom options, given as `pg_options` to init_process_group or new_group.

    settings: LOOM_* settings for this group's communicator, by name
              (e.g. {"LOOM_ALGO": "ring"}); they override the environment.
    deterministic: bitwise-reproducible reductions (LOOM_DETERMINISTIC).
    """

    settings: dict[str, str] = field(default_factory=dict)
    deterministic: bool | None = None


def _create_backend(dist_opts, backend_options):
    opts = backend_options if isinstance(backend_options, Options) else Options()
    if backend_options is not None and not isinstance(backend_options, Options):
        raise TypeError(
            f"loom: pg_options must be a loom.torch.Options, got {type(backend_options).__name__}"
        )
    timeout = dist_opts.timeout
    seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)
    return _C.create_backend(
        dist_opts.store,
        dist_opts.group_rank,
        dist_opts.group_size,
        seconds,
        {str(k): str(v) for k, v in opts.settings.items()},
        opts.deterministic,
        str(dist_opts.group_id),
        _cuda_device(),
    )


def _serves_cuda() -> bool:
    """CUDA tensors go to loom when the loom this extension links has its CUDA path and torch
    sees a GPU."""
    return bool(_C.loom_has_cuda) and torch.cuda.is_available()


def _cuda_device() -> int:
    """The group's CUDA device: the current one (torch.cuda.set_device(local_rank) before
    init_process_group, as with NCCL), or -1 when loom serves host tensors only."""
    return torch.cuda.current_device() if _serves_cuda() else -1


def register() -> None:
    """Registers the backend "loom" with torch.distributed (idempotent)."""
    if BACKEND.upper() in dist.Backend._plugins:
        return
    devices = ["cpu", "cuda"] if _serves_cuda() else ["cpu"]
    dist.Backend.register_backend(BACKEND, _create_backend, extended_api=True, devices=devices)


def _first_host(nodelist: str) -> str:
    """The first host of a Slurm hostlist: "node[07-09,12],gpu1" -> "node07"."""
    head = nodelist.split(",")[0] if "[" not in nodelist.split(",")[0] else nodelist
    if "[" not in head:
        return head
    prefix, rest = head.split("[", 1)
    return prefix + rest.split("]", 1)[0].split(",")[0].split("-")[0]


def env_from_launcher(environ=None) -> dict[str, str]:
    """torch's env:// variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) from
    what Slurm's srun or Open MPI's mpirun set, when torchrun's are absent. The rendezvous host
    is MASTER_ADDR, else LOOM_ROOT's host, else Slurm's first node of the step; the port is
    MASTER_PORT, else LOOM_ROOT's port, else 29500 + (Slurm job id mod 1000). Returns only what
    it adds (and sets it in `environ`, os.environ by default)."""
    env = os.environ if environ is None else environ
    if "RANK" in env and "WORLD_SIZE" in env:
        return {}
    add = {}
    if "OMPI_COMM_WORLD_RANK" in env:
        add["RANK"] = env["OMPI_COMM_WORLD_RANK"]
        add["WORLD_SIZE"] = env["OMPI_COMM_WORLD_SIZE"]
        add["LOCAL_RANK"] = env.get("OMPI_COMM_WORLD_LOCAL_RANK", "0")
    elif "SLURM_PROCID" in env:
        add["RANK"] = env["SLURM_PROCID"]
        add["WORLD_SIZE"] = env["SLURM_NTASKS"]
        add["LOCAL_RANK"] = env.get("SLURM_LOCALID", "0")
    else:
        return {}
    root_host, root_port = "", ""
    if env.get("LOOM_ROOT"):
        root_host, _, root_port = env["LOOM_ROOT"].rpartition(":")
    if "MASTER_ADDR" not in env:
        nodes = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST")
        host = root_host or (_first_host(nodes) if nodes else "")
        if not host:
            raise RuntimeError("loom: set MASTER_ADDR (or LOOM_ROOT=host:port) for mpirun: "
                               "which host serves the rendezvous")
        add["MASTER_ADDR"] = host
    if "MASTER_PORT" not in env:
        job = env.get("SLURM_JOB_ID")
        add["MASTER_PORT"] = root_port or str(29500 + (int(job) % 1000 if job else 0))
    env.update(add)
    return add


def init_process_group(**kwargs) -> None:
    """torch.distributed.init_process_group("loom", **kwargs) after env_from_launcher(), so that
    the same script runs under torchrun, srun and mpirun."""
    env_from_launcher()
    dist.init_process_group(BACKEND, **kwargs)


def _loom_backend(group=None) -> _C.ProcessGroupLoom:
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    backend = pg._get_backend(torch.device("cpu"))
    if not isinstance(backend, _C.ProcessGroupLoom):
        raise TypeError(f"loom: the group's CPU backend is {type(backend).__name__}, not loom")
    return backend


def status(group=None) -> str:
    """loom's one-line status of the group's communicator (last op, failures, lagging ranks)."""
    return _loom_backend(group).loom_status()


def flight_record(group=None) -> dict:
    """This rank's flight record of the group's communicator: its last LOOM_FLIGHT_RECORDER
    collective calls (op, dtype, count, algorithm, state, and when each was submitted, started
    and completed, in steady-clock ns) and, under "p2p", as many sends and receives (peer and
    message number per direction, count, tag, state, times). Group ranks, as everywhere in
    loom.torch. See
    docs/reliability.md, "Flight recorder"; LOOM_FLIGHT_DIR writes it to files for loom-trace."""
    import json

    return json.loads(_loom_backend(group).flight_record())


def failed_ranks(group=None) -> list[int]:
    """Ranks of the group that loom knows to have failed (group ranks, ascending)."""
    return _loom_backend(group).failed_ranks()


def _finalize_at_exit() -> None:
    """Destroys loom's process groups when the interpreter exits without
    destroy_process_group(): the rank whose process serves a group's rendezvous store then waits
    for the others to finish their last calls instead of taking the store with it."""
    try:
        if dist.is_initialized() and dist.get_backend() == BACKEND:
            dist.destroy_process_group()
    except Exception:  # noqa: BLE001  (exit must go on; loom has logged what failed)
        pass


register()
atexit.register(_finalize_at_exit)
