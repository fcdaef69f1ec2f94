"""Runs a function on N ranks (processes) of a torch.distributed job and collects what each
rank returned or raised. Every run has a deadline: ranks still alive after it are killed and
the run fails, naming them.

Ranks are forked from a forkserver that imported torch once (importing it takes seconds of CPU
per process; a fresh interpreter per rank and run made most of the tests' time). The server
(started at the first run) has no thread pools, no CUDA context and no process group, so every
rank still starts clean: torch.distributed and loom are set up in the rank."""

from __future__ import annotations

import faulthandler
import functools
import multiprocessing as mp
import os
import tempfile
import time
import traceback
from datetime import timedelta


def _rank_main(fn, rank, world_size, init_file, backend, timeout_s, pg_options, env, setup,
               queue, dump_after_s):
    os.environ.update(env)
    # A rank still running just before the parent's deadline prints every thread's Python
    # stack to stderr first: where it hangs, not only that it does.
    faulthandler.dump_traceback_later(dump_after_s)
    try:
        import torch.distributed as dist

        if setup is not None:
            setup(rank, world_size)  # e.g. torch.cuda.set_device before the group exists

        import loom.torch  # noqa: F401  registers "loom"

        dist.init_process_group(
            backend,
            init_method=f"file://{init_file}",
            rank=rank,
            world_size=world_size,
            timeout=timedelta(seconds=timeout_s),
            pg_options=pg_options,
        )
        result = fn(rank, world_size)
        queue.put((rank, "ok", result))
        dist.destroy_process_group()
    except BaseException as e:  # noqa: BLE001  (reported to the parent)
        queue.put((rank, "error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))
    finally:
        faulthandler.cancel_dump_traceback_later()


@functools.cache
def _context():
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "torch.distributed"])
    return ctx


def run_ranks(fn, world_size, *, backend="loom", timeout_s=60.0, deadline_s=180.0,
              pg_options=None, env=None, allow_dead=(), setup=None):
    """Runs fn(rank, world_size) on every rank after init_process_group(backend).

    Returns {rank: ("ok", value) | ("error", text)}. Ranks listed in allow_dead may exit
    without reporting (a test that kills a rank). setup(rank, world_size), a module-level
    function, runs before init_process_group. Raises AssertionError when a rank is still
    running at the deadline or exited without a report."""
    ctx = _context()
    queue = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        init_file = os.path.join(tmp, "store")
        procs = [
            ctx.Process(
                target=_rank_main,
                args=(fn, r, world_size, init_file, backend, timeout_s, pg_options, env or {},
                      setup, queue, max(1.0, deadline_s - 3.0)),
            )
            for r in range(world_size)
        ]
        for p in procs:
            p.start()
        results = {}
        end = time.monotonic() + deadline_s
        expected = set(range(world_size)) - set(allow_dead)
        while not expected.issubset(results) and time.monotonic() < end:
            try:
                rank, kind, value = queue.get(timeout=0.5)
                results[rank] = (kind, value)
            except Exception:  # noqa: BLE001  (queue.Empty)
                if all(not p.is_alive() for p in procs):
                    # Drain what the last ranks put before exiting.
                    while not queue.empty():
                        rank, kind, value = queue.get()
                        results[rank] = (kind, value)
                    break
        for p in procs:
            p.join(timeout=max(0.0, end - time.monotonic()) if p.is_alive() else 0)
        stuck = [r for r, p in enumerate(procs) if p.is_alive()]
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
        if stuck:
            raise AssertionError(f"ranks {stuck} still running after {deadline_s} s; "
                                 f"results so far: {results}")
        missing = sorted(expected - set(results))
        if missing:
            codes = {r: procs[r].exitcode for r in missing}
            raise AssertionError(f"ranks {missing} exited without a result (exit codes {codes})")
        return results


def values(results, test):
    """The value every rank returned; fails the test with the ranks' errors otherwise."""
    errors = {r: v for r, (k, v) in results.items() if k != "ok"}
    if errors:
        test.fail("\n".join(f"rank {r}: {v}" for r, v in sorted(errors.items())))
    return {r: v for r, (k, v) in results.items()}


def grabber(msgs):
    """grab(name, fn): runs fn and records in msgs[name] None, or the first line of what it
    raised ("ValueError: loom ...")."""

    def grab(name, fn):
        try:
            fn()
            msgs[name] = None
        except Exception as e:  # noqa: BLE001
            msgs[name] = f"{type(e).__name__}: {e}".split("\n")[0]

    return grab
