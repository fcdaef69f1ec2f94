"""Runs PyTorch's own distributed test suite (torch.testing._internal.distributed.
distributed_test, class DistributedTest._DistTestBase, as PyTorch's test_distributed_spawn.py
does) against one backend and records every test's outcome as JSON.

    python3 tests/torch/run_dist_suite.py --backend loom --world-size 2 --out loom-2.json
    python3 tests/torch/compare_dist_suite.py gloo-2.json loom-2.json

For backend "loom" the suite's feature sets that gate on a backend name ("ddp", "subgroup",
"plugin") list loom, as they list gloo; "gpu"/"cuda" do not (this backend serves CPU tensors).
Tests that the suite runs for gloo only, by name, stay skipped for loom.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import unittest


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", required=True, help="loom or gloo")
    p.add_argument("--world-size", type=int, default=2)
    p.add_argument("--out", required=True, help="JSON file for the per-test outcomes")
    p.add_argument("-k", "--filter", action="append", default=[],
                   help="only tests whose name contains this (repeatable)")
    p.add_argument("--names", help="only these tests: a file with one test name per line")
    p.add_argument("--as-gloo", action="store_true",
                   help="backend loom, but the suite's name gates (tests it runs for gloo only) "
                        "are evaluated as for gloo")
    p.add_argument("--as-nccl", action="store_true",
                   help="backend loom, but the suite's name gates are evaluated as for nccl (its "
                        "CUDA tests: *_cuda; with --names ci_subset_cuda.txt)")
    p.add_argument("--share-gpu", action="store_true",
                   help="the ranks share the machine's GPUs: the suite sees at least WORLD_SIZE "
                        "devices, and every device index maps onto the real ones (modulo their "
                        "count), so that its CUDA tests run on a one-GPU machine")
    p.add_argument("--fork", action="store_true",
                   help="fork each test's ranks from this process (torch imported once) instead of "
                        "spawning fresh interpreters that each import torch, as PyTorch's "
                        "test_distributed_spawn.py does: several times faster on a small machine")
    p.add_argument("--test-timeout", type=int, default=120,
                   help="seconds one test may take before it fails (the suite's own timeout)")
    return p.parse_args()


ARGS = parse_args() if __name__ == "__main__" else None
if ARGS is not None:
    # distributed_test reads these when it is imported.
    os.environ["BACKEND"] = ARGS.backend
    os.environ["WORLD_SIZE"] = str(ARGS.world_size)
    os.environ.setdefault("TEMP_DIR", tempfile.mkdtemp(prefix="loom-dist-suite-"))
    os.environ["DISTRIBUTED_TESTS_DEFAULT_TIMEOUT"] = str(ARGS.test_timeout)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if ARGS.as_gloo or ARGS.as_nccl:
        if ARGS.backend != "loom" or (ARGS.as_gloo and ARGS.as_nccl):
            raise SystemExit("--as-gloo or --as-nccl (one) is for --backend loom")
        os.environ["DIST_SUITE_AS"] = "gloo" if ARGS.as_gloo else "nccl"  # the ranks see it too
    if ARGS.share_gpu:
        os.environ["DIST_SUITE_SHARE_GPU"] = "1"
    if ARGS.fork:
        os.environ["DIST_SUITE_FORK"] = "1"
AS = os.environ.get("DIST_SUITE_AS", "")
if AS:
    os.environ["BACKEND"] = AS  # the decorators read it at import

import torch  # noqa: E402,F401
import torch.distributed as dist  # noqa: E402


def share_gpus():
    """Device indices 0..WORLD_SIZE-1 onto the real GPUs (modulo their count): the suite gives
    each rank its own device and skips its CUDA tests with fewer devices than ranks."""
    real = torch.cuda.device_count()
    if real == 0:
        return
    world = int(os.environ["WORLD_SIZE"])
    on = lambda d: d % real if isinstance(d, int) else d  # noqa: E731

    def index(d):
        if isinstance(d, torch.device):
            return torch.device(d.type, on(d.index)) if d.index is not None else d
        if isinstance(d, str) and d.startswith("cuda:"):
            return f"cuda:{on(int(d.split(':')[1]))}"
        return on(d)

    count = lambda: max(real, world)  # noqa: E731
    torch.cuda.device_count = count
    if hasattr(torch, "accelerator"):
        torch.accelerator.device_count = count
        set_index = torch.accelerator.set_device_index
        torch.accelerator.set_device_index = lambda d: set_index(index(d))
    set_device = torch.cuda.set_device
    torch.cuda.set_device = lambda d: set_device(index(d))
    to_cuda = torch.Tensor.cuda
    torch.Tensor.cuda = lambda self, device=None, *a, **k: to_cuda(self, index(device), *a, **k)


if os.environ.get("DIST_SUITE_SHARE_GPU") == "1":
    share_gpus()

import loom.torch  # noqa: E402,F401  (registers "loom" here and in every spawned rank)
from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402

if os.environ.get("BACKEND") == "loom" or AS:
    for feature in ("ddp", "subgroup", "plugin"):
        DistTestCases.backend_feature[feature].add("loom")

import torch.testing._internal.distributed.distributed_test as dt  # noqa: E402
from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest,
    TestDistBackend,
)

if AS:
    # Gates were decided for gloo or nccl; the tests themselves run (and branch) as loom.
    dt.BACKEND = "loom"
    os.environ["BACKEND"] = "loom"


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        if os.environ.get("DIST_SUITE_FORK") == "1":
            # torch 2.x dropped MultiProcessTestCase._fork_processes; this is what it did.
            self._start_processes(torch.multiprocessing.get_context("fork").Process)
        else:
            self._spawn_processes()


class Recorder(unittest.TextTestResult):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.outcomes = {}
        self._start = 0.0

    def _name(self, test):
        return test.id().rsplit(".", 1)[-1]

    def startTest(self, test):
        self._start = time.monotonic()
        super().startTest(test)

    def _record(self, test, outcome, detail=""):
        self.outcomes[self._name(test)] = {
            "outcome": outcome,
            "detail": detail[-4000:],
            "seconds": round(time.monotonic() - self._start, 2),
        }
        write_report(self.outcomes, partial=True)

    def addSuccess(self, test):
        super().addSuccess(test)
        self._record(test, "pass")

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._record(test, "skip", str(reason))

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record(test, "fail", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._record(test, "fail", self._exc_info_to_string(err, test))

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._record(test, "pass", "expected failure")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._record(test, "fail", "unexpected success")


STARTED = time.monotonic()


def write_report(outcomes, partial):
    counts = {"pass": 0, "skip": 0, "fail": 0}
    for o in outcomes.values():
        counts[o["outcome"]] += 1
    report = {
        "backend": ARGS.backend,
        "world_size": ARGS.world_size,
        "torch": torch.__version__,
        "seconds": round(time.monotonic() - STARTED, 1),
        "partial": partial,
        "ranks": "fork" if ARGS.fork else "spawn",
        "counts": counts,
        "tests": outcomes,
    }
    tmp = ARGS.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(report, f, indent=1, sort_keys=True)
    os.replace(tmp, ARGS.out)
    return counts


def main():
    loader = unittest.TestLoader()
    suite = loader.loadTestsFromTestCase(TestDistBackendWithSpawn)
    if ARGS.filter:
        suite = unittest.TestSuite(t for t in suite if any(f in t.id() for f in ARGS.filter))
    if ARGS.names:
        with open(ARGS.names) as f:
            wanted = {line.strip() for line in f if line.strip() and not line.startswith("#")}
        suite = unittest.TestSuite(t for t in suite if t.id().rsplit(".", 1)[-1] in wanted)
    runner = unittest.TextTestRunner(resultclass=Recorder, verbosity=2, stream=sys.stdout)
    result = runner.run(suite)
    counts = write_report(result.outcomes, partial=False)
    print(f"{ARGS.backend} at {ARGS.world_size} ranks: {counts['pass']} passed, "
          f"{counts['fail']} failed, {counts['skip']} skipped "
          f"({'fork' if ARGS.fork else 'spawn'}, {(time.monotonic() - STARTED) / 60:.1f} min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
