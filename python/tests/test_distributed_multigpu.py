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
from test_distributed_gpu import TARGET_REL_L2, inputs, reference64, rel_l2

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

    def check(self, name, out, lse, q, k, v, is_causal, layout, zigzag, variant="full_int8",
              same_numerics=True):
        """`out` within the variant's target of float64 and, as it computes the same numerics as
        one intfa.attention call (Ulysses: the very call), within it of that call too. The ring
        quantizes each shard of K and V on its own (its smoothing and V scales are per shard:
        `same_numerics=False`), so its result and one call's are two quantizations of the same
        attention, each within the target of float64, and by the triangle inequality within
        twice the target of each other: on 4 GPUs they measured 1.60-1.62% apart (2026-11-28),
        against a bound of one target (1.6%) that only the same numerics could promise. The
        context-parallel issue gives the ring the single-GPU numerics, and this bound back."""
        whole, whole_lse = intfa.attention(q, k, v, is_causal=is_causal, layout=layout,
                                           variant=variant, return_lse=True, fallback="error")
        ref, _ = reference64(q, k, v, is_causal, layout)

        def mine(x, x_layout=layout):
            return cp.shard_sequence(x, self.rank, self.world_size, layout=x_layout,
                                     zigzag=zigzag)

        error, whole_error = rel_l2(out, mine(ref)), rel_l2(out, mine(whole))
        lse_error = (lse - mine(whole_lse, "HND")).abs().max().item()
        report(f"rank {self.rank}/{self.world_size} {name} {variant} {layout} causal={is_causal}: "
               f"rel_l2 vs float64 {error:.4%}, vs one call {whole_error:.2e}, "
               f"max |LSE diff| {lse_error:.2e}")
        self.assertLess(error, TARGET_REL_L2[variant])
        self.assertLess(whole_error, TARGET_REL_L2[variant] * (1 if same_numerics else 2))
        self.assertLess(lse_error, 0.05)

    def test_ring_attention_matches_one_gpu(self):
        for variant in ("full_int8", "half_int8"):
            for layout in ("HND", "NHD"):
                for is_causal in (False, True):
                    with self.subTest(variant=variant, layout=layout, causal=is_causal):
                        q, k, v = inputs(layout, 8, 2, seq=1024 * self.world_size)
                        shard = [cp.shard_sequence(x, self.rank, self.world_size, layout=layout,
                                                   zigzag=is_causal) for x in (q, k, v)]
                        out, lse = cp.ring_attention(*shard, is_causal=is_causal, layout=layout,
                                                     variant=variant, return_lse=True)
                        self.check("ring", out, lse, q, k, v, is_causal, layout, is_causal,
                                   variant, same_numerics=False)

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
                    self.check("ulysses", out, lse, q, k, v, is_causal, layout, False)


if __name__ == "__main__":
    unittest.main()
