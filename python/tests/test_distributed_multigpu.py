"""intfa.distributed over several GPUs, one process per GPU, launched by torchrun:

    torchrun --nproc-per-node 2 -m pytest -q python/tests/test_distributed_multigpu.py

Every rank builds the same whole sequence, attends its shard by ring_attention and
ulysses_attention over NCCL, and compares with the same rows of one intfa.attention call over the
whole sequence on its own GPU (and with float64). Skipped unless WORLD_SIZE > 1 (torchrun sets it),
so under ctest and plain pytest it skips, saying why."""
import datetime
import os
import unittest

import intfa

from support import GPU_PROBLEM, report, torch
from test_distributed_gpu import (MERGE_LSE, TARGET_REL_L2, RecordingKernels, inputs,
                                  reference64, rel_l2, rounding_budget, simulated_ring,
                                  with_channel_offsets, within_rounding)

WORLD_SIZE = int(os.environ.get("WORLD_SIZE", "1"))
if torch is not None:
    import torch.distributed as dist

    from intfa import distributed as cp


def _problem():
    if GPU_PROBLEM is not None:
        return GPU_PROBLEM
    if WORLD_SIZE < 2:
        return "needs torchrun with 2 or more processes (WORLD_SIZE > 1)"
    if torch.cuda.device_count() < int(os.environ.get("LOCAL_WORLD_SIZE", WORLD_SIZE)):
        return f"needs a GPU per local process, and here {torch.cuda.device_count()}"
    return None


PROBLEM = _problem()


@unittest.skipIf(PROBLEM is not None, PROBLEM or "")
class MultiGpuTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=300))
        cls.rank, cls.world_size = dist.get_rank(), dist.get_world_size()

    @classmethod
    def tearDownClass(cls):
        dist.destroy_process_group()

    def mine(self, x, layout, zigzag):
        return cp.shard_sequence(x, self.rank, self.world_size, layout=layout, zigzag=zigzag)

    def check_accuracy(self, name, out, q, k, v, is_causal, layout, zigzag, variant):
        """`out` within the variant's target of float64; returns that error."""
        ref, _ = reference64(q, k, v, is_causal, layout)
        error = rel_l2(out, self.mine(ref, layout, zigzag))
        self.assertLess(error, TARGET_REL_L2[variant])
        return error

    def test_ring_attention_matches_one_gpu(self):
        # The shards quantize as the whole sequence does: full INT8 differs from one call only by
        # the rounding of the ring's 16-bit states (test_distributed_gpu's rounding_budget), and
        # is bit for bit the ring simulated on one GPU (the same kernels over the same shards:
        # only the transport differs). Half INT8 rounds P against the running maximum: its target.
        for variant in ("full_int8", "half_int8"):
            for layout in ("HND", "NHD"):
                for is_causal in (False, True):
                    with self.subTest(variant=variant, layout=layout, causal=is_causal):
                        q, k, v = inputs(layout, 8, 2, seq=1024 * self.world_size)
                        k = with_channel_offsets(k)
                        shard = [self.mine(x, layout, is_causal) for x in (q, k, v)]
                        recorder = RecordingKernels(layout=layout, variant=variant)
                        out, lse = cp.ring_attention(*shard, is_causal=is_causal,
                                                     return_lse=True, layout=layout,
                                                     kernels=recorder)
                        whole, whole_lse = intfa.attention(q, k, v, is_causal=is_causal,
                                                           layout=layout, variant=variant,
                                                           return_lse=True, fallback="error")
                        simulated, _ = simulated_ring(q, k, v, self.world_size, is_causal, layout,
                                                      variant=variant)
                        error = self.check_accuracy("ring", out, q, k, v, is_causal, layout,
                                                    is_causal, variant)
                        mine_whole = self.mine(whole, layout, is_causal)
                        lse_error = (lse - self.mine(whole_lse, "HND", is_causal)).abs().max()
                        line = (f"rank {self.rank}/{self.world_size} ring {variant} {layout} "
                                f"causal={is_causal}: rel_l2 vs float64 {error:.4%}, vs one call "
                                f"{rel_l2(out, mine_whole):.2e}, max |LSE diff| "
                                f"{lse_error.item():.2e}")
                        self.assertTrue(torch.equal(out, self.mine(simulated, layout, is_causal)),
                                        "the ring differs from the ring simulated on one GPU")
                        if variant == "full_int8":
                            budget = rounding_budget(recorder, layout, self.world_size, is_causal,
                                                     [self.rank])
                            ratio, equal = within_rounding(
                                out, mine_whole, self.mine(budget, layout, is_causal))
                            line += (f", {equal:.1%} of elements equal, largest difference "
                                     f"{ratio:.3f} of its rounding bound")
                            self.assertLessEqual(ratio, 1.0)
                            self.assertLess(lse_error.item(), MERGE_LSE)
                        else:
                            self.assertLess(rel_l2(out, mine_whole), TARGET_REL_L2[variant])
                            self.assertLess(lse_error.item(), 0.05)
                        report(line)

    def test_ring_with_exact_kernels_moves_the_right_shards(self):
        # Nothing quantized: only the communication and the merge between the result and float64.
        q, k, v = inputs("HND", 4, 2, seq=256 * self.world_size, dtype=torch.float32)
        shard = [cp.shard_sequence(x, self.rank, self.world_size, zigzag=True) for x in (q, k, v)]
        out, lse = cp.ring_attention(*shard, is_causal=True, return_lse=True,
                                     kernels=cp.SdpaKernels())
        ref, ref_lse = reference64(q, k, v, True, "HND")
        mine = [cp.shard_sequence(x, self.rank, self.world_size, zigzag=True)
                for x in (ref, ref_lse)]
        torch.testing.assert_close(out.double(), mine[0], rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(lse.double(), mine[1], rtol=1e-4, atol=1e-4)

    def test_ulysses_attention_matches_one_gpu(self):
        heads = 2 * self.world_size
        for layout in ("HND", "NHD"):
            for is_causal in (False, True):
                with self.subTest(layout=layout, causal=is_causal):
                    q, k, v = inputs(layout, 2 * heads, heads, seq=1024 * self.world_size)
                    shard = [cp.shard_sequence(x, self.rank, self.world_size, layout=layout)
                             for x in (q, k, v)]
                    out, lse = cp.ulysses_attention(*shard, is_causal=is_causal, layout=layout,
                                                    return_lse=True)
                    whole, whole_lse = intfa.attention(q, k, v, is_causal=is_causal,
                                                       layout=layout, return_lse=True,
                                                       fallback="error")
                    error = self.check_accuracy("ulysses", out, q, k, v, is_causal, layout,
                                                False, "full_int8")
                    report(f"rank {self.rank}/{self.world_size} ulysses {layout} "
                           f"causal={is_causal}: rel_l2 vs float64 {error:.4%}")
                    # Each rank's heads through the very call one GPU makes.
                    self.assertTrue(torch.equal(out, self.mine(whole, layout, False)))
                    self.assertTrue(torch.equal(lse, self.mine(whole_lse, "HND", False)))

    def ulysses_sizes(self):
        return [size for size in range(1, self.world_size + 1) if self.world_size % size == 0]

    def test_context_parallel_attention_at_every_ulysses_size(self):
        # Ulysses over the whole group (one call's output, bit for bit), the ring over it (within
        # the rounding of its 16-bit states: rounding_budget), and on 4 GPUs and more both
        # together (Ulysses then a ring over 1 / U of the ranks: held to the target of float64).
        # Full INT8, whose shards take the very integers of one call per key tile, so that the
        # rounding budget bounds every element (on the H200 variant "auto" takes half INT8 at
        # these lengths on 2 and 4 GPUs, whose ring test_distributed_gpu.py holds to the merges'
        # relative L2 instead).
        for ulysses_size in self.ulysses_sizes():
            for is_causal in (False, True):
                with self.subTest(ulysses_size=ulysses_size, causal=is_causal):
                    q, k, v = inputs("NHD", 4 * self.world_size, 2 * self.world_size,
                                     seq=512 * self.world_size)
                    k = with_channel_offsets(k)
                    shard = [cp.shard_sequence(x, self.rank, self.world_size, layout="NHD",
                                               zigzag=is_causal, ulysses_size=ulysses_size)
                             for x in (q, k, v)]
                    recorder = RecordingKernels(layout="NHD", variant="full_int8")
                    out = cp.context_parallel_attention(*shard, is_causal=is_causal,
                                                        layout="NHD", ulysses_size=ulysses_size,
                                                        kernels=recorder)
                    whole = intfa.attention(q, k, v, is_causal=is_causal, layout="NHD",
                                            fallback="error", variant="full_int8")
                    mine_whole = cp.shard_sequence(whole, self.rank, self.world_size,
                                                   layout="NHD", zigzag=is_causal,
                                                   ulysses_size=ulysses_size)
                    ref, _ = reference64(q, k, v, is_causal, "NHD")
                    error = rel_l2(out, cp.shard_sequence(ref, self.rank, self.world_size,
                                                          layout="NHD", zigzag=is_causal,
                                                          ulysses_size=ulysses_size))
                    apart = rel_l2(out, mine_whole)
                    report(f"rank {self.rank}/{self.world_size} context parallel "
                           f"U={ulysses_size} causal={is_causal}: rel_l2 vs float64 "
                           f"{error:.4%}, vs one call {apart:.2e}")
                    self.assertLess(error, TARGET_REL_L2["full_int8"])
                    if ulysses_size == self.world_size:
                        self.assertTrue(torch.equal(out, mine_whole))
                    elif ulysses_size == 1:
                        budget = rounding_budget(recorder, "NHD", self.world_size, is_causal,
                                                 [self.rank])
                        ratio, _ = within_rounding(out, mine_whole, self.mine(budget, "NHD",
                                                                               is_causal))
                        self.assertLessEqual(ratio, 1.0)

    def test_diffusers_context_parallel_calls_run_intfa_distributed(self):
        # The diffusers backend on a call with diffusers' context-parallel config: its meshes
        # ("ring", "ulysses"), its contiguous shards, [B, N, H, D] tensors, non-causal: the very
        # result of intfa.distributed's function over those meshes' groups. With diffusers
        # installed, its own ContextParallelConfig through dispatch_attention_fn; else an object
        # with the same fields.
        from torch.distributed.device_mesh import init_device_mesh

        from intfa.integrations import diffusers as intfa_diffusers
        for ulysses_size in self.ulysses_sizes():
            ring_size = self.world_size // ulysses_size
            mesh = init_device_mesh("cuda", (ring_size, ulysses_size),
                                    mesh_dim_names=("ring", "ulysses"))
            config, dispatch = diffusers_parallel_config(ring_size, ulysses_size, mesh,
                                                         self.rank, self.world_size)
            q, k, v = inputs("NHD", 2 * self.world_size, 2 * self.world_size,
                             seq=512 * self.world_size)
            shard = [cp.shard_sequence(x, self.rank, self.world_size, layout="NHD")
                     for x in (q, k, v)]
            with self.subTest(ulysses_size=ulysses_size, diffusers=dispatch is not None):
                intfa.reset_fallback_stats()
                if dispatch is not None:
                    with intfa_diffusers.register():
                        out = dispatch.dispatch_attention_fn(*shard, parallel_config=config)
                else:
                    out = intfa_diffusers.backend()(*shard, _parallel_config=config)
                groups = dict(ulysses_group=mesh.get_group("ulysses"),
                              ring_group=mesh.get_group("ring"))
                if ring_size == 1:
                    direct = cp.ulysses_attention(*shard, groups["ulysses_group"], layout="NHD")
                elif ulysses_size == 1:
                    direct = cp.ring_attention(*shard, groups["ring_group"], layout="NHD")
                else:
                    direct = cp.usp_attention(*shard, **groups, layout="NHD")
                whole = intfa.attention(q, k, v, layout="NHD", fallback="error")
                apart = rel_l2(out, cp.shard_sequence(whole, self.rank, self.world_size,
                                                      layout="NHD"))
                report(f"rank {self.rank}/{self.world_size} diffusers context parallel "
                       f"ring {ring_size} x ulysses {ulysses_size} "
                       f"({'diffusers' if dispatch else 'stand-in config'}): vs one call "
                       f"{apart:.2e}")
                self.assertEqual(intfa.fallback_stats(), {})
                self.assertTrue(torch.equal(out, direct))


def diffusers_parallel_config(ring_size, ulysses_size, mesh, rank, world_size):
    """(a _parallel_config, diffusers' attention_dispatch module or None): diffusers' own
    ParallelConfig set up on `mesh` where diffusers imports, else an object with its fields."""
    from types import SimpleNamespace
    try:
        from diffusers import ContextParallelConfig, ParallelConfig
        from diffusers.models import attention_dispatch
    except ImportError:
        return SimpleNamespace(context_parallel_config=SimpleNamespace(
            ring_degree=ring_size, ulysses_degree=ulysses_size, ring_anything=False,
            ulysses_anything=False, _ring_mesh=mesh["ring"],
            _ulysses_mesh=mesh["ulysses"])), None
    config = ParallelConfig(context_parallel_config=ContextParallelConfig(
        ring_degree=ring_size, ulysses_degree=ulysses_size))
    config.setup(rank, world_size, torch.device("cuda", torch.cuda.current_device()), mesh=mesh)
    return config, attention_dispatch


if __name__ == "__main__":
    unittest.main()
