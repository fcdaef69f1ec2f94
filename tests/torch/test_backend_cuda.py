"""loom's torch.distributed backend with CUDA tensors (stream-ordered, as ProcessGroupNCCL):
every dtype x op exact on device tensors, the data-movement collectives, stream semantics (a
collective behind a busy stream returns at once; wait() orders the caller's stream), DDP on
the GPU, and a clear error for tensors on the wrong device. 2 ranks share GPU 0 on a one-GPU
machine. Skipped without a GPU or when the loom the extension links has no CUDA path.

Run: python3 -m unittest -v test_backend_cuda  (from tests/torch; the GPU bundle's
run-torch-cuda.sh builds the extension on the GPU machine and runs it)."""

from __future__ import annotations

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import loom.torch  # noqa: E402
import cuda_scenarios as cs  # noqa: E402
from ranks import run_ranks, values  # noqa: E402

WS = 2


@unittest.skipUnless(torch.cuda.is_available(), "no GPU visible to torch")
@unittest.skipUnless(loom.torch._C.loom_has_cuda, "the loom this extension links has no CUDA path")
class CudaTensors(unittest.TestCase):
    def check(self, fn, ws=WS, timeout_s=60.0):
        res = values(run_ranks(fn, ws, setup=cs.set_device, timeout_s=timeout_s,
                               deadline_s=300.0), self)
        for rank, bad in res.items():
            self.assertEqual(bad, [], f"rank {rank}")

    def test_a_side_stream_then_default_stream(self):  # runs first: the cheapest diagnosis
        self.check(cs.which_stream, timeout_s=20.0)

    def test_all_reduce_every_dtype_and_op_exact(self):
        self.check(cs.all_reduce_matrix)

    def test_data_movement(self):
        self.check(cs.data_movement)

    def test_stream_semantics(self):
        self.check(cs.stream_semantics)

    def test_ddp(self):
        self.check(cs.ddp_steps)

    def test_wrong_device(self):
        self.check(cs.wrong_device)


if __name__ == "__main__":
    unittest.main()
