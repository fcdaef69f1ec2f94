"""loom's torch.distributed backend, end to end: ranks (forked from a forkserver that imported
torch once) call torch.distributed with backend "loom" and check exact values, in-place
semantics, Work and futures, subgroups, timeouts, clear errors for what loom does not serve,
and a rank that dies mid-step.

Run: python3 -m pytest tests/torch/test_backend.py  (or tests/process/torch_backend.sh)."""

from __future__ import annotations

import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import loom.torch  # noqa: E402,F401
import exchange_scenarios as ex  # noqa: E402
import parallel_scenarios as par  # noqa: E402
import scenarios as sc  # noqa: E402
import sparse_scenarios as sp  # noqa: E402
from ranks import run_ranks, values  # noqa: E402

WORLD_SIZES = (2, 3)


class Collectives(unittest.TestCase):
    def test_all_reduce_every_dtype_and_op_exact(self):
        for ws in WORLD_SIZES:
            with self.subTest(world_size=ws):
                res = values(run_ranks(sc.all_reduce_matrix, ws), self)
                for rank, (bad, count) in res.items():
                    self.assertEqual(bad, [], f"rank {rank}")
                    self.assertEqual(count, sum(len(v) for v in sc.REDUCIBLE.values()))

    def test_reduce_scatter_and_reduce_every_dtype_and_op_exact(self):
        for ws in WORLD_SIZES:
            with self.subTest(world_size=ws):
                for rank, bad in values(run_ranks(sc.reduce_scatter_and_reduce_matrix, ws),
                                        self).items():
                    self.assertEqual(bad, [], f"rank {rank}")

    def test_broadcast_allgather_reduce_scatter_coalesced(self):
        for ws in WORLD_SIZES:
            with self.subTest(world_size=ws):
                for rank, bad in values(run_ranks(sc.data_movement, ws), self).items():
                    self.assertEqual(bad, [], f"rank {rank}")

    def test_non_contiguous_tensors_are_written_in_place(self):
        for rank, bad in values(run_ranks(sc.non_contiguous, 3), self).items():
            self.assertEqual(bad, [], f"rank {rank}")

    def test_work_futures_and_result(self):
        for rank, bad in values(run_ranks(sc.work_and_futures, 2), self).items():
            self.assertEqual(bad, [], f"rank {rank}")

    def test_new_group(self):
        for rank, bad in values(run_ranks(sc.subgroups, 3), self).items():
            self.assertEqual(bad, [], f"rank {rank}")

    def test_flight_record_of_a_group(self):
        for rank, bad in values(run_ranks(sc.flight_record, 3), self).items():
            self.assertEqual(bad, [], f"rank {rank}")

    def test_deterministic_mode_is_bitwise_rank_ordered(self):
        """With deterministic=True, ring and tree give the same bits, equal to summing the
        ranks' inputs in rank order in float32."""
        ws = 3
        want = torch.zeros(100_003, dtype=torch.float32)
        for r in range(ws):
            g = torch.Generator().manual_seed(1234 + r)
            want = want + torch.randn(100_003, generator=g, dtype=torch.float32) * 1e3
        for algo in ("ring", "tree"):
            opts = loom.torch.Options(settings={"LOOM_ALGO": algo}, deterministic=True)
            res = values(run_ranks(sc.deterministic_sum, ws, pg_options=opts), self)
            for rank, raw in res.items():
                self.assertEqual(raw, want.numpy().tobytes(), f"{algo}, rank {rank}")


class Exchanges(unittest.TestCase):
    """all-to-all, gather/scatter, send/recv, batches, coalescing, PREMUL_SUM, bitwise."""

    def check(self, fn, sizes=WORLD_SIZES):
        for ws in sizes:
            with self.subTest(world_size=ws):
                for rank, bad in values(run_ranks(fn, ws), self).items():
                    self.assertEqual(bad, [], f"rank {rank}")

    def test_all_to_all_single_uneven_splits_and_lists_exact(self):
        self.check(ex.all_to_all)

    def test_gather_scatter_every_root_exact(self):
        self.check(ex.gather_scatter)

    def test_send_recv_two_tags_in_order(self):
        self.check(ex.send_recv)

    def test_batch_isend_irecv_ring_of_large_messages(self):
        self.check(ex.batch_ring)

    def test_coalescing_manager_all_reduce_all_gather_reduce_scatter(self):
        self.check(ex.coalesced)

    def test_premul_sum_and_bitwise_ops_exact(self):
        self.check(ex.premul_and_bitwise)

    def test_recv_from_any_source(self):
        res = values(run_ranks(ex.any_source, 3), self)
        bad, senders = res[0]
        self.assertEqual(bad, [])
        self.assertEqual(senders, [1, 1, 2, 2])


class Sparse(unittest.TestCase):
    """all_reduce of sparse COO tensors (DDP's sparse gradients)."""

    def test_sparse_all_reduce_sums_exact(self):
        for ws in WORLD_SIZES:
            with self.subTest(world_size=ws):
                for rank, bad in values(run_ranks(sp.sums, ws), self).items():
                    self.assertEqual(bad, [], f"rank {rank}")

    def test_sparse_all_reduce_errors_are_clear(self):
        for rank, msgs in values(run_ranks(sp.errors, 3), self).items():
            with self.subTest(rank=rank):
                self.assertIn("only ReduceOp.SUM and AVG add sparse tensors", msgs["MAX"])
                self.assertIn("AVG of a sparse tensor needs a floating", msgs["int AVG"])
                self.assertIn("rank 1's tensor has sparse_dim 1, dense_dim 0, size [9], rank 0's "
                              "has sparse_dim 1, dense_dim 0, size [8]",
                              msgs["shape"])
                self.assertTrue(msgs["shape"].startswith("ValueError"), msgs["shape"])
                self.assertIsNone(msgs["still works"])

    def test_ddp_sparse_embedding_matches_gloo(self):
        for rank, diffs in values(run_ranks(sp.ddp_sparse_against_gloo, 2), self).items():
            self.assertEqual(len(diffs), 6)
            self.assertLessEqual(max(diffs), 1e-6, f"rank {rank}: {diffs}")


class Parallelism(unittest.TestCase):
    """What torch builds on a backend: functional collectives, DTensor, FSDP2."""

    def test_functional_collectives_exact(self):
        for ws in WORLD_SIZES:
            with self.subTest(world_size=ws):
                for rank, bad in values(run_ranks(par.functional_collectives, ws),
                                        self).items():
                    self.assertEqual(bad, [], f"rank {rank}")

    def test_dtensor_on_a_loom_device_mesh(self):
        for rank, bad in values(run_ranks(par.dtensor, 3), self).items():
            self.assertEqual(bad, [], f"rank {rank}")

    def test_fsdp2_training_matches_gloo(self):
        for rank, (loss_diff, param_diff) in values(run_ranks(par.fsdp2_against_gloo, 2),
                                                    self).items():
            self.assertLessEqual(loss_diff, 1e-6, f"rank {rank}")
            self.assertLessEqual(param_diff, 1e-6, f"rank {rank}")


class Errors(unittest.TestCase):
    def test_unsupported_ops_dtypes_devices_raise_clearly(self):
        res = values(run_ranks(sc.unsupported, 2), self)
        for rank, msgs in res.items():
            with self.subTest(rank=rank):
                self.assertIn("loom cannot reduce tensors of dtype Short", msgs["int16"])
                self.assertTrue(msgs["int16"].startswith("TypeError"), msgs["int16"])
                self.assertIn("cannot reduce bool tensors with AVG", msgs["bool AVG"])
                self.assertIn("does not support RedOpType.MAX on complex", msgs["complex MAX"])
                self.assertIn("loom cannot reduce complex tensors with ReduceOp.MAX",
                              msgs["complex MAX (backend)"])
                self.assertIn("got a tensor on meta", msgs["meta device"])
                self.assertIn("must be on one device", msgs["mixed devices"])
                self.assertIsNone(msgs["still works"])

    def test_p2p_and_op_errors_are_clear(self):
        res = values(run_ranks(ex.p2p_errors, 2), self)
        for rank, msgs in res.items():
            with self.subTest(rank=rank):
                self.assertIsNotNone(msgs["self"])
                self.assertIn("cannot reduce tensors of dtype Float with ReduceOp.BAND",
                              msgs["BAND float"])
                self.assertIn("cannot reduce bool tensors with PREMUL_SUM",
                              msgs["PREMUL_SUM bool"])
                self.assertIn("split sizes add up to", msgs["uneven splits"])
                self.assertIsNone(msgs["still works"])

    def test_recv_with_another_tag_than_the_send_fails_with_mismatch(self):
        res = values(run_ranks(ex.tag_mismatch, 2), self)
        self.assertIsNotNone(res[1], res)
        self.assertIn("loom recv failed (Mismatch)", res[1])
        self.assertIn("tag 4", res[1])
        self.assertIn("tag 3", res[1])

    def test_bounded_wait_times_out_and_operation_still_completes(self):
        res = values(run_ranks(sc.wait_timeout, 2), self)
        first, waited, value = res[0]
        self.assertIn("DistBackendError", first)
        self.assertIn("wait(timeout=300 ms) timed out", first)
        self.assertLess(waited, 1.5)
        self.assertEqual(value, [3.0] * 8)
        self.assertEqual(res[1][2], [3.0] * 8)

    def test_monitored_barrier_names_the_absent_ranks(self):
        for ws in WORLD_SIZES:
            with self.subTest(world_size=ws):
                res = values(run_ranks(sc.monitored_barrier, ws), self)
                for rank, out in res.items():
                    self.assertEqual(out["after"], [float(ws)] * 4, f"rank {rank}")
                    if rank == ws - 1:
                        continue
                    for wait_all in (False, True):
                        msg, waited = out[wait_all]
                        if rank == 0:
                            want = (f"Ranks {ws - 1} failed" if wait_all else
                                    f"Rank {ws - 1} failed to pass monitoredBarrier in 1000 ms")
                        else:
                            want = (f"Rank {rank} successfully reached monitoredBarrier, but "
                                    "received errors while waiting for send/recv from rank 0")
                        self.assertIn(want, msg, f"rank {rank}, wait_all_ranks={wait_all}")
                        self.assertLess(waited, 2.5, f"rank {rank}: {msg}")

    def test_group_timeout_bounds_a_collective_and_names_the_late_rank(self):
        res = values(run_ranks(sc.op_timeout, 3), self)
        for rank in (0, 1):
            msg, took = res[rank]
            with self.subTest(rank=rank):
                self.assertIn("DistBackendError", msg)
                self.assertIn("(Timeout)", msg)
                self.assertIn(" Timed out ", msg)  # as PyTorch's other backends say it
                self.assertGreater(took, 1.5)
                self.assertLess(took, 7.0)
        # The rank that waited on the late one names it (the other may wait on a neighbour).
        self.assertTrue(any("rank 2" in res[r][0] for r in (0, 1)), res)

    def test_rank_dying_mid_step_is_reported_by_the_others(self):
        ws = 3
        start = time.monotonic()
        res = run_ranks(sc.rank_dies, ws, timeout_s=120.0, allow_dead=(ws - 1,))
        elapsed = time.monotonic() - start
        for rank in range(ws - 1):
            kind, (step, msg, _) = res[rank]
            with self.subTest(rank=rank):
                self.assertEqual(kind, "ok")
                self.assertIsNotNone(step, msg)
                self.assertIn("DistBackendError", msg)
                self.assertIn("PeerFailed", msg)
                self.assertIn(f"rank {ws - 1}", msg)
        # Far below the 120 s timeout: detection, not a deadline.
        self.assertLess(elapsed, 60.0)


class Launchers(unittest.TestCase):
    def test_slurm_environment_maps_to_torch_env(self):
        env = {"SLURM_PROCID": "3", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1",
               "SLURM_STEP_NODELIST": "node[07-09,12],gpu1", "SLURM_JOB_ID": "4242"}
        added = loom.torch.env_from_launcher(env)
        self.assertEqual(added, {"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1",
                                 "MASTER_ADDR": "node07", "MASTER_PORT": "29742"})

    def test_mpirun_environment_maps_to_torch_env(self):
        env = {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2",
               "OMPI_COMM_WORLD_LOCAL_RANK": "1", "LOOM_ROOT": "10.1.2.3:29600",
               # mpirun inside a Slurm allocation: OMPI_* describe the process
               "SLURM_PROCID": "0", "SLURM_NTASKS": "1"}
        loom.torch.env_from_launcher(env)
        self.assertEqual((env["RANK"], env["WORLD_SIZE"], env["MASTER_ADDR"], env["MASTER_PORT"]),
                         ("1", "2", "10.1.2.3", "29600"))
        with self.assertRaisesRegex(RuntimeError, "set MASTER_ADDR"):
            loom.torch.env_from_launcher({"OMPI_COMM_WORLD_RANK": "0",
                                          "OMPI_COMM_WORLD_SIZE": "2"})

    def test_torchrun_environment_is_left_alone(self):
        env = {"RANK": "0", "WORLD_SIZE": "2", "SLURM_PROCID": "5", "SLURM_NTASKS": "9"}
        self.assertEqual(loom.torch.env_from_launcher(env), {})
        self.assertEqual(env["RANK"], "0")

    def test_init_process_group_under_a_fake_srun(self):
        """Two processes with only Slurm's variables join through loom.torch's helper."""
        import subprocess
        code = ("import loom.torch, torch, torch.distributed as d; loom.torch.init_process_group();"
                "t = torch.ones(3) * (d.get_rank() + 1); d.all_reduce(t); print(t.tolist());"
                "d.destroy_process_group()")
        procs = []
        for r in range(2):
            env = {k: v for k, v in os.environ.items()
                   if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
            env.update({"SLURM_PROCID": str(r), "SLURM_NTASKS": "2", "SLURM_LOCALID": str(r),
                        "SLURM_STEP_NODELIST": "127.0.0.1", "MASTER_PORT": str(29000 + os.getpid() % 1000)})
            procs.append(subprocess.Popen([sys.executable, "-c", code], env=env,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        outs = [p.communicate(timeout=120) for p in procs]
        for p, (out, err) in zip(procs, outs):
            self.assertEqual(p.returncode, 0, err[-2000:])
            self.assertIn("[3.0, 3.0, 3.0]", out)


if __name__ == "__main__":
    unittest.main()
