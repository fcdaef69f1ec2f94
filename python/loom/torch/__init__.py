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

from dataclasses import dataclass, field
from datetime import timedelta

import torch  # noqa: F401  (loads libtorch before the extension)
import torch.distributed as dist

from . import _C

__all__ = ["BACKEND", "Options", "register", "status", "failed_ranks", "loom_version"]

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
    )


def register() -> None:
    """Registers the backend "loom" with torch.distributed (idempotent)."""
    if BACKEND.upper() in dist.Backend._plugins:
        return
    dist.Backend.register_backend(BACKEND, _create_backend, extended_api=True, devices=["cpu"])


def _loom_backend(group=None) -> _C.ProcessGroupLoom:
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    backend = pg._get_backend(torch.device("cpu"))
    if not isinstance(backend, _C.ProcessGroupLoom):
        raise TypeError(f"loom: the group's CPU backend is {type(backend).__name__}, not loom")
    return backend


def status(group=None) -> str:
    """loom's one-line status of the group's communicator (last op, failures, lagging ranks)."""
    return _loom_backend(group).loom_status()


def failed_ranks(group=None) -> list[int]:
    """Ranks of the group that loom knows to have failed (group ranks, ascending)."""
    return _loom_backend(group).failed_ranks()


register()
