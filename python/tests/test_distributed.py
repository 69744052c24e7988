"""intfa.distributed on the CPU: the ring and all-to-all algorithms (sharding, the zig-zag schedule,
the transfers, the LSE merge) with the exact SDPA kernels as the local attention, against float64
attention of the whole sequence: simulated in one process, and over real gloo process groups of 2
and 3 processes. The argument checks, naming the bad argument. Skipped without torch."""
import datetime
import math
import os
import tempfile
import unittest

import intfa

from support import needs_torch, torch

if torch is not None:
    import torch.distributed as dist
    import torch.multiprocessing as multiprocessing
    from torch.distributed.device_mesh import init_device_mesh

    from intfa import distributed as cp

# float64 inputs; the partial LSEs are float32 (intfa._sdpa computes them so), which bounds the
# merge's agreement with float64 near 1e-7 relative.
TOLERANCE = dict(rtol=1e-5, atol=1e-5)


def reference(q, k, v, is_causal, layout):
    """float64 attention of the whole sequence and its LSE [B, H, N] (causal: top-left, which for
    N_q == N_kv is intfa's bottom-right)."""
    if layout == "NHD":
        q, k, v = (x.transpose(1, 2) for x in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = (x.double().repeat_interleave(group, dim=1) for x in (k, v))
    scores = q.double() @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if is_causal:
        visible = torch.ones(scores.shape[-2:], dtype=torch.bool).tril()
        scores = scores.masked_fill(~visible, -math.inf)
    lse = torch.logsumexp(scores, dim=-1)
    out = torch.softmax(scores, dim=-1) @ v
    return (out if layout == "HND" else out.transpose(1, 2)), lse


def inputs(layout, heads_q, heads_kv, seq, batch=2, head_dim=16, seed=0):
    generator = torch.Generator().manual_seed(seed)

    def tensor(heads):
        shape = (batch, heads, seq, head_dim) if layout == "HND" else (batch, seq, heads, head_dim)
        return torch.randn(shape, generator=generator, dtype=torch.float64)

    return tensor(heads_q), tensor(heads_kv), tensor(heads_kv)


def shards_of(tensors, world_size, layout, zigzag):
    return [[cp.shard_sequence(x, rank, world_size, layout=layout, zigzag=zigzag)
             for rank in range(world_size)] for x in tensors]


def ulysses_heads(heads_q, heads_kv, world_size):
    """A case's head counts scaled so that the group size divides both (Ulysses needs it)."""
    return heads_q * world_size // 2, heads_kv * world_size // 2


CASES = [(layout, is_causal, heads) for layout in ("HND", "NHD") for is_causal in (False, True)
         for heads in ((4, 4), (4, 2))]  # (H_q, H_kv): MHA and GQA


@needs_torch
class ShardingTest(unittest.TestCase):
    def test_zigzag_shard_holds_chunks_rank_and_its_mirror(self):
        x = torch.arange(12).view(1, 1, 12, 1)
        shard = cp.shard_sequence(x, 1, 3, zigzag=True)  # chunks of 2: chunk 1 and chunk 4
        self.assertEqual(shard.flatten().tolist(), [2, 3, 8, 9])

    def test_unshard_inverts_shard_in_both_layouts(self):
        for layout in ("HND", "NHD"):
            for zigzag in (False, True):
                with self.subTest(layout=layout, zigzag=zigzag):
                    x = inputs(layout, 2, 2, 24)[0]
                    shards = [cp.shard_sequence(x, rank, 3, layout=layout, zigzag=zigzag)
                              for rank in range(3)]
                    self.assertTrue(torch.equal(
                        cp.unshard_sequence(shards, layout=layout, zigzag=zigzag), x))

    def test_each_sampled_row_is_found_once_in_the_shard_that_holds_it(self):
        # The rows K smoothing samples of the whole sequence, looked up in each rank's shard
        # (what the ring gathers before the all-reduce): every one held by exactly one rank, at
        # the index where shard_sequence put it.
        for world_size, seq in ((2, 1024), (3, 600), (4, 64), (4, 4096)):
            for zigzag in (False, True):
                with self.subTest(world_size=world_size, seq=seq, zigzag=zigzag):
                    rows = intfa._intfa.k_channel_mean_sample_rows(seq)
                    self.assertEqual(len(rows), min(seq, 256))
                    positions = torch.arange(seq).view(1, 1, seq, 1)
                    found = []
                    for rank in range(world_size):
                        shard = cp.shard_sequence(positions, rank, world_size, zigzag=zigzag)
                        held, local = cp._local_rows(rows, rank, world_size, shard.shape[2],
                                                     zigzag)
                        self.assertEqual([rows[i] for i in held],
                                         shard.flatten()[local].tolist())
                        found += held
                    self.assertEqual(sorted(found), list(range(len(rows))))


@needs_torch
class SimulatedRingTest(unittest.TestCase):
    """Every rank of the ring in one process: the per-step code ring_attention runs, and the
    shards copied from rank to rank as the ring sends them."""

    def test_matches_float64_attention_of_the_whole_sequence(self):
        for world_size in (1, 2, 3, 4):
            for layout, is_causal, (heads_q, heads_kv) in CASES:
                with self.subTest(world_size=world_size, layout=layout, causal=is_causal,
                                  heads=(heads_q, heads_kv)):
                    q, k, v = inputs(layout, heads_q, heads_kv, seq=8 * world_size)
                    shards = shards_of((q, k, v), world_size, layout, zigzag=is_causal)
                    results = cp.simulate_ring_attention(
                        *shards, is_causal, layout=layout, kernels=cp.SdpaKernels(layout=layout))
                    out = cp.unshard_sequence([o for o, _ in results], layout=layout,
                                              zigzag=is_causal)
                    lse = cp.unshard_sequence([s for _, s in results], zigzag=is_causal)
                    expected_out, expected_lse = reference(q, k, v, is_causal, layout)
                    torch.testing.assert_close(out, expected_out, **TOLERANCE)
                    torch.testing.assert_close(lse.double(), expected_lse, **TOLERANCE)


@needs_torch
class SimulatedUlyssesTest(unittest.TestCase):
    def test_matches_float64_attention_of_the_whole_sequence(self):
        for world_size in (1, 2, 4):
            for layout, is_causal, (heads_q, heads_kv) in CASES:
                with self.subTest(world_size=world_size, layout=layout, causal=is_causal,
                                  heads=(heads_q, heads_kv)):
                    q, k, v = inputs(layout, *ulysses_heads(heads_q, heads_kv, world_size),
                                     seq=4 * world_size)
                    shards = shards_of((q, k, v), world_size, layout, zigzag=False)
                    results = cp.simulate_ulysses_attention(
                        *shards, is_causal, layout=layout, kernels=cp.SdpaKernels(layout=layout))
                    out = cp.unshard_sequence([o for o, _ in results], layout=layout)
                    lse = cp.unshard_sequence([s for _, s in results])
                    expected_out, expected_lse = reference(q, k, v, is_causal, layout)
                    torch.testing.assert_close(out, expected_out, **TOLERANCE)
                    torch.testing.assert_close(lse.double(), expected_lse, **TOLERANCE)


@needs_torch
class MergeExactTest(unittest.TestCase):
    def test_a_state_without_keys_weighs_nothing(self):
        out = torch.randn(1, 2, 3, 4)
        lse = torch.randn(1, 2, 3)
        empty_out, empty_lse = torch.zeros_like(out), torch.full_like(lse, -math.inf)
        merged, merged_lse = cp.merge_exact(empty_out, empty_lse, out, lse)
        torch.testing.assert_close(merged, out)
        torch.testing.assert_close(merged_lse, lse)
        both, both_lse = cp.merge_exact(empty_out, empty_lse, empty_out, empty_lse)
        self.assertTrue(torch.equal(both, empty_out))
        self.assertTrue(torch.isneginf(both_lse).all())


# --- over real process groups (gloo, one process per rank) ---------------------------------

def _gloo_rank(rank, world_size, store_path):
    """One rank: ring, Ulysses and (through context_parallel_attention) both together at every
    Ulysses size the group allows, of its shards over gloo, checked against float64 attention of
    the whole sequence (an AssertionError here fails the spawning test)."""
    # A transfer that never matches (a broken ring) fails after the timeout instead of hanging.
    dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank,
                            world_size=world_size, timeout=datetime.timedelta(seconds=60))
    try:
        for layout, is_causal, (heads_q, heads_kv) in CASES:
            heads_q, heads_kv = ulysses_heads(heads_q, heads_kv, world_size)
            q, k, v = inputs(layout, heads_q, heads_kv, seq=4 * world_size, seed=1)
            expected_out, expected_lse = reference(q, k, v, is_causal, layout)
            kernels = cp.SdpaKernels(layout=layout)
            runs = [("ring", cp.ring_attention, is_causal, 1, {}),
                    ("ulysses", cp.ulysses_attention, False, 1, {})]
            for size in range(1, world_size + 1):
                if world_size % size == 0:
                    runs.append((f"context parallel U={size}", cp.context_parallel_attention,
                                 is_causal, size, dict(ulysses_size=size)))
            if world_size == 4:  # a ("ring", "ulysses") device mesh, as diffusers makes one
                mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("ring", "ulysses"))
                runs.append(("context parallel over a 2x2 mesh", cp.context_parallel_attention,
                             is_causal, 2, dict(group=mesh)))
            for name, attention, zigzag, ulysses_size, extra in runs:
                shard = [cp.shard_sequence(x, rank, world_size, layout=layout, zigzag=zigzag,
                                           ulysses_size=ulysses_size) for x in (q, k, v)]
                out, lse = attention(*shard, is_causal=is_causal, layout=layout,
                                     return_lse=True, kernels=kernels, **extra)
                where = f"{name} rank {rank}/{world_size} {layout} causal={is_causal} " \
                        f"heads={heads_q}/{heads_kv}"

                def mine(x, x_layout=layout):
                    return cp.shard_sequence(x, rank, world_size, layout=x_layout, zigzag=zigzag,
                                             ulysses_size=ulysses_size)

                torch.testing.assert_close(out, mine(expected_out), **TOLERANCE,
                                           msg=lambda m: where + m)
                torch.testing.assert_close(lse.double(), mine(expected_lse, "HND"), **TOLERANCE,
                                           msg=lambda m: where + m)
        # Ulysses' head count check reads the group's size.
        q = inputs("HND", world_size + 1, 1, seq=4)[0]
        try:
            cp.ulysses_attention(q, q, q)
        except intfa.InvalidArgument as error:
            assert error.field == "q.shape", error
        else:
            raise AssertionError(f"{world_size + 1} heads over {world_size} ranks were accepted")
    finally:
        dist.destroy_process_group()


@needs_torch
@unittest.skipUnless(torch is not None and dist.is_available() and dist.is_gloo_available(),
                     "needs torch.distributed with the gloo backend")
class GlooProcessGroupTest(unittest.TestCase):
    def run_ranks(self, world_size):
        with tempfile.TemporaryDirectory(prefix="intfa-gloo-") as directory:
            multiprocessing.spawn(_gloo_rank, args=(world_size, os.path.join(directory, "store")),
                                  nprocs=world_size)

    def test_ring_and_ulysses_over_two_ranks(self):
        self.run_ranks(2)

    def test_ring_and_ulysses_over_three_ranks(self):
        self.run_ranks(3)

    def test_ring_ulysses_and_both_over_four_ranks(self):
        self.run_ranks(4)


@needs_torch
class ChooseUlyssesSizeTest(unittest.TestCase):
    def test_the_largest_size_the_heads_and_one_node_allow(self):
        for heads_q, heads_kv, world_size, per_node in ((32, 8, 4, 4), (32, 8, 16, 8),
                                                        (12, 3, 4, 4), (24, 6, 8, 8), (8, 8, 6, 2)):
            with self.subTest(heads=(heads_q, heads_kv), world_size=world_size,
                              per_node=per_node):
                size = cp.choose_ulysses_size(heads_q, heads_kv, world_size, per_node)
                allowed = [s for s in range(1, world_size + 1) if world_size % s == 0 and
                           heads_q % s == 0 and heads_kv % s == 0 and s <= per_node]
                self.assertEqual(size, max(allowed))

    def test_long_shards_take_the_ring_alone(self):
        self.assertEqual(cp.choose_ulysses_size(32, 8, 2, 2, shard_tokens=cp.RING_SHARD_TOKENS), 1)
        self.assertEqual(
            cp.choose_ulysses_size(32, 8, 2, 2, shard_tokens=cp.RING_SHARD_TOKENS - 1), 2)


# --- argument checks --------------------------------------------------------------------------

@needs_torch
class ArgumentsTest(unittest.TestCase):
    def assert_invalid(self, field, call, *args, **kwargs):
        with self.assertRaises(intfa.InvalidArgument) as caught:
            call(*args, **kwargs)
        self.assertEqual(caught.exception.field, field, str(caught.exception))
        self.assertIn(f"invalid {field} = ", str(caught.exception))

    def setUp(self):
        self.q, self.k, self.v = inputs("HND", 4, 2, seq=8)
        self.sdpa = cp.SdpaKernels()

    def test_ulysses_size(self):
        # A divisor of the group size, for the sharding and its inverse (no process group here:
        # context_parallel_attention checks it the same way, after asking the group its size).
        for size in (0, 3, 2.0):
            self.assert_invalid("ulysses_size", cp.shard_sequence, self.q, 0, 4,
                                ulysses_size=size)
            self.assert_invalid("ulysses_size", cp.unshard_sequence, [self.q] * 4,
                                ulysses_size=size)

    def simulate(self, *args, **kwargs):
        return cp.simulate_ring_attention(*args, kernels=self.sdpa, **kwargs)

    def test_layout(self):
        for call in (cp.ring_attention, cp.ulysses_attention):
            self.assert_invalid("layout", call, self.q, self.k, self.v, layout="BHND")
        self.assert_invalid("layout", cp.shard_sequence, self.q, 0, 2, layout="bhnd")
        self.assert_invalid("layout", cp.SdpaKernels, layout="BNHD")

    def test_tensors(self):
        for call in (cp.ring_attention, cp.ulysses_attention):
            self.assert_invalid("q", call, [1.0], self.k, self.v)
            self.assert_invalid("k.shape", call, self.q, self.k[0], self.v)
            self.assert_invalid("v.shape", call, self.q, self.k, self.v[:, :1])

    def test_is_causal(self):
        for call in (cp.ring_attention, cp.ulysses_attention):
            self.assert_invalid("is_causal", call, self.q, self.k, self.v, is_causal="yes")

    def test_causal_shards_need_two_chunks_of_the_same_positions(self):
        self.assert_invalid("q.shape", cp.ring_attention, self.q[:, :, :7], self.k[:, :, :7],
                            self.v[:, :, :7], is_causal=True)
        self.assert_invalid("k.shape", cp.ring_attention, self.q, self.k[:, :, :4],
                            self.v[:, :, :4], is_causal=True)

    def test_variant(self):
        self.assert_invalid("variant", cp.ring_attention, self.q, self.k, self.v, variant="fp8")
        self.assert_invalid("variant", cp.IntfaKernels, variant="int4")

    def test_falsy_options_are_refused_before_any_rank_communicates(self):
        # Issue 42, item 9: `variant or "full_int8"` read "" and 0 as full INT8.
        for name, value in (("variant", ""), ("variant", 0), ("v_granularity", 0),
                            ("v_granularity", []), ("smooth_k", 0), ("smooth_k", "no")):
            with self.subTest(name=name, value=value):
                self.assert_invalid(name, cp.IntfaKernels, **{name: value})
                self.assert_invalid(name, cp.ring_attention, self.q, self.k, self.v,
                                    **{name: value})
        # None is the default, "auto": each call's variant as intfa.attention would choose it.
        self.assertEqual(cp.IntfaKernels(variant=None).variant, "auto")

    def test_kernels_with_options_or_another_layout(self):
        self.assert_invalid("kernels", cp.ring_attention, self.q, self.k, self.v,
                            kernels=self.sdpa, sm_scale=0.5)
        self.assert_invalid("kernels.layout", cp.ulysses_attention, self.q, self.k, self.v,
                            layout="NHD", kernels=self.sdpa)

    def test_shard_lengths(self):
        self.assert_invalid("x.shape", cp.shard_sequence, self.q, 0, 3)
        self.assert_invalid("k_shards.length", self.simulate, [self.q] * 2, [self.k], [self.v] * 2)

    def test_ulysses_heads_divisible_by_the_group(self):
        # 4 query heads and 2 KV heads over 4 ranks
        shards = [list(x.split(2, dim=2)) for x in (self.q, self.k, self.v)]
        self.assert_invalid("k.shape", cp.simulate_ulysses_attention, *shards, kernels=self.sdpa)
        q3 = [x[:, :3] for x in shards[0]]
        self.assert_invalid("q.shape", cp.simulate_ulysses_attention, q3, *shards[1:],
                            kernels=self.sdpa)

    def test_the_default_kernels_are_intfa(self):
        # intfa's kernels take CUDA tensors: their check names the device, on the owner's quantize.
        q, k, v = (x.half() for x in inputs("HND", 4, 2, seq=8, head_dim=64))
        self.assert_invalid("q.device", cp.simulate_ring_attention, [q], [k], [v])
