"""intfa.distributed on one GPU, through intfa's kernels: the ring simulated in one process (every
rank's K/V chunks quantized once, the INT8 shards copied from rank to rank, partial states merged
by intfa.merge_states) against one intfa.attention call over the whole sequence and against
float64; ring_attention and ulysses_attention over a real NCCL process group of size 1. Skipped,
saying why, without a GPU.

The ring quantizes every shard as one call over the whole sequence does (K smoothed by the
sequence's means, V scaled by its scales: both all-reduced first), so each shard's INT8 Q, K and V
and their scales are the very slices of ``intfa.quantize`` of the whole sequence, bit for bit
(test_shards_quantize_as_the_whole_sequence). Full INT8 (P against each key tile's own maximum,
the default) then computes the same integers per tile as one call, and the ring's output differs
from one call's only by rounding: each 16-bit state it makes (every partial output and every
merged one) is rounded once, by at most u |state| (u the output dtype's unit roundoff; plus half
a subnormal step, where the relative bound stops), and reaches the result with the weight
exp(lse_state - lse); one call rounds its output once; both accumulate in FP32.
``rounding_budget`` adds those up per element from the states the ring made, and the ring must
stay within it everywhere. Half INT8 rounds P to 16 bits against the running
maximum, which the ring's partial states do not share: it is held to intfa's accuracy target
against float64 (TARGET_REL_L2), as one call is."""
import datetime
import math
import os
import tempfile
import unittest

import intfa

from support import GPU_PROBLEM, needs_gpu, report, torch  # noqa: F401

if torch is not None:
    import torch.distributed as dist

    from intfa import distributed as cp

TARGET_REL_L2 = {"full_int8": 0.016, "half_int8": 0.010}
MERGE_REL_L2 = 4e-3
MERGE_LSE = 1e-3  # max |LSE difference| (the scores are the same integers times the same scales)
# FP32 arithmetic on both sides of a comparison with one call: each adds up to 64 key tiles'
# products and exponentials in its own order, at 2^-24 per step (2^-22 for ex2.approx): under
# 2^-16 of the magnitudes involved, for sequences up to 64 tiles of 128 keys.
FP32_SLACK = 2.0 ** -16
UNIT_ROUNDOFF = {torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8} if torch else {}


def rounding_error(dtype):
    """(u, eta): rounding x to `dtype` changes it by at most u |x| + eta (eta: half the spacing
    of its subnormals, where the relative bound stops)."""
    u = UNIT_ROUNDOFF[dtype]
    return u, u * torch.finfo(dtype).tiny


class RecordingKernels(cp.IntfaKernels if torch is not None else object):
    """IntfaKernels that keep a copy of every 16-bit state the ring makes (each partial output and
    each merged one, with its LSE), per Q chunk in the order ``prepare`` met them: the rank's
    chunks, and in the simulated ring every rank's in rank order."""

    def __init__(self, **options):
        super().__init__(**options)
        self.q_chunks, self.states, self.key_of_output = [], {}, {}

    def prepare(self, q, k, v, quantization):
        q_state, kv = super().prepare(q, k, v, quantization)
        self.q_chunks.append(id(q_state))
        self.states[id(q_state)] = []
        return q_state, kv

    def attend(self, q_state, kv, is_causal):
        out, lse = super().attend(q_state, kv, is_causal)
        self.states[id(q_state)].append((out.clone(), lse.clone()))
        self.key_of_output[out.data_ptr()] = id(q_state)
        return out, lse

    def merge(self, out, lse, part_out, part_lse):
        out, lse = super().merge(out, lse, part_out, part_lse)  # in place, into `out`
        self.states[self.key_of_output[out.data_ptr()]].append((out.clone(), lse.clone()))
        return out, lse


def rounding_budget(recorder, layout, world_size, zigzag, ranks):
    """Per element of the whole sequence (layout's shape, float64): the most the ring's output can
    differ from the exact merge of its unrounded partial outputs, u sum_states exp(lse_state -
    lse) |state|, for the Q chunks of `ranks` (rank order) as `recorder` met them; zeros
    elsewhere."""
    dim = 2 if layout == "HND" else 1
    chunks_per_rank = 2 if zigzag else 1
    pieces = []
    for position, key in enumerate(recorder.q_chunks):
        rank, slot = ranks[position // chunks_per_rank], position % chunks_per_rank
        chunk = cp._chunks_of_rank(rank, world_size, zigzag)[slot]
        states = recorder.states[key]
        final_lse = states[-1][1].double()
        budget = 0
        for out, lse in states:
            weight = torch.exp(lse.double() - final_lse)  # [B, H, n]
            weight = weight.unsqueeze(-1) if layout == "HND" else weight.transpose(1, 2)[..., None]
            u, eta = rounding_error(out.dtype)
            budget = budget + weight * (u * out.double().abs() + eta)
        pieces.append((chunk, budget))
    shape = list(pieces[0][1].shape)
    size = shape[dim]
    shape[dim] = size * 2 * world_size if zigzag else size * world_size
    whole = torch.zeros(shape, dtype=torch.float64, device=pieces[0][1].device)
    for chunk, budget in pieces:
        whole.narrow(dim, chunk * size, size).copy_(budget)
    return whole


def within_rounding(ring, one_call, budget):
    """(largest |ring - one call| / its bound, bitwise-equal fraction): the bound is the ring's
    rounding budget plus one call's own rounding and both sides' FP32 arithmetic."""
    one_call64, ring64 = one_call.double(), ring.double()
    u, eta = rounding_error(one_call.dtype)
    bound = budget + u * one_call64.abs() + eta + FP32_SLACK * (budget / u + one_call64.abs())
    ratio = ((ring64 - one_call64).abs() / bound.clamp_min(1e-30)).max().item()
    return ratio, (ring == one_call).double().mean().item()


def rel_l2(out, ref):
    return ((out.double() - ref.double()).norm() / ref.double().norm()).item()


def reference64(q, k, v, is_causal, layout):
    """float64 attention of the whole sequence and its LSE [B, H, N], on q's device."""
    if layout == "NHD":
        q, k, v = (x.transpose(1, 2) for x in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = (x.double().repeat_interleave(group, dim=1) for x in (k, v))
    scores = q.double() @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if is_causal:
        visible = torch.ones(scores.shape[-2:], dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~visible, -math.inf)
    out = torch.softmax(scores, dim=-1) @ v
    return (out if layout == "HND" else out.transpose(1, 2)), torch.logsumexp(scores, dim=-1)


def inputs(layout, heads_q, heads_kv, seq, dtype=torch.float16 if torch else None, batch=1,
           head_dim=128, seed=0, device="cuda"):
    generator = torch.Generator(device=device).manual_seed(seed)

    def tensor(heads):
        shape = (batch, heads, seq, head_dim) if layout == "HND" else (batch, seq, heads, head_dim)
        return torch.randn(shape, generator=generator, device=device, dtype=dtype)

    return tensor(heads_q), tensor(heads_kv), tensor(heads_kv)


def with_channel_offsets(k, seed=7):
    """K plus an offset per channel of N(0, 2^2) (the same for every head and token, from its own
    generator: every rank of a process group adds the same): what K smoothing takes out."""
    generator = torch.Generator(device=k.device).manual_seed(seed)
    offsets = torch.randn(k.shape[-1], generator=generator, device=k.device, dtype=torch.float32)
    return k + (2.0 * offsets).to(k.dtype)


def with_outlier_heads(q, k, layout, heads_q, heads_kv, channels=(3, 17), factor=10.0):
    """Q and K with `channels` `factor` times larger in the even KV heads and their query heads:
    the heads automatic rotation rotates, beside heads it leaves alone."""
    head_dim = 1 if layout == "HND" else 2
    group = heads_q // heads_kv
    q_scale = torch.ones(heads_q, q.shape[-1], device=q.device, dtype=q.dtype)
    k_scale = torch.ones(heads_kv, k.shape[-1], device=k.device, dtype=k.dtype)
    for kv_head in range(0, heads_kv, 2):
        k_scale[kv_head, list(channels)] = factor
        q_scale[kv_head * group:(kv_head + 1) * group, list(channels)] = factor
    shape = [1, 1, 1, 1]
    shape[head_dim] = -1
    shape[3] = q.shape[-1]
    return q * q_scale.view(shape), k * k_scale.view(shape)


def simulated_ring(q, k, v, world_size, is_causal, layout, **options):
    """The whole sequence's (out, lse) from the simulated ring over world_size shards."""
    shards = [[cp.shard_sequence(x, rank, world_size, layout=layout, zigzag=is_causal)
               for rank in range(world_size)] for x in (q, k, v)]
    results = cp.simulate_ring_attention(*shards, is_causal, layout=layout, **options)
    return (cp.unshard_sequence([out for out, _ in results], layout=layout, zigzag=is_causal),
            cp.unshard_sequence([lse for _, lse in results], zigzag=is_causal))


CASES = [(layout, is_causal, heads) for layout in ("HND", "NHD") for is_causal in (False, True)
         for heads in ((8, 8), (8, 2))]


def ring_quantization(q, k, v, world_size, is_causal, layout, **options):
    """Every rank's (Q states, K/V shard) as the simulated ring prepares them, in rank order."""
    kernels = cp.IntfaKernels(layout=layout, **options)
    shards = [[cp.shard_sequence(x, rank, world_size, layout=layout, zigzag=is_causal)
               for x in (q, k, v)] for rank in range(world_size)]
    statistics = [kernels.statistics(*shard, rank, world_size, is_causal)
                  for rank, shard in enumerate(shards)]
    cp._reduced_in_process(statistics)
    return [cp._prepare_shard(*shard, is_causal, kernels, rank_statistics)
            for shard, rank_statistics in zip(shards, statistics)]


@needs_gpu
class SimulatedRingTest(unittest.TestCase):
    def test_shards_quantize_as_the_whole_sequence(self):
        # Every rank's INT8 Q, K, V, their scales and Q's LSE term: the slices of intfa.quantize of
        # the whole sequence, bit for bit (K with channel offsets, which smoothing takes out).
        for world_size in (2, 4):
            for layout, is_causal, (heads_q, heads_kv) in CASES:
                for rotate in (False, True):
                    with self.subTest(world_size=world_size, layout=layout, causal=is_causal,
                                      heads=(heads_q, heads_kv), rotate=rotate):
                        q, k, v = inputs(layout, heads_q, heads_kv, seq=512 * world_size,
                                         seed=world_size)
                        k = with_channel_offsets(k)
                        whole = intfa.quantize(q, k, v, layout=layout, rotate=rotate)
                        seq_dim = 2 if layout == "HND" else 1
                        chunks = 2 * world_size if is_causal else world_size
                        size = q.shape[seq_dim] // chunks
                        prepared = ring_quantization(q, k, v, world_size, is_causal, layout,
                                                     rotate=rotate, variant="full_int8")
                        for rank, (q_states, shard) in enumerate(prepared):
                            for slot, chunk in enumerate(cp._chunks_of_rank(rank, world_size,
                                                                            is_causal)):
                                rows = slice(chunk * size, (chunk + 1) * size)

                                def along(x, dim=seq_dim):
                                    return x.narrow(dim, rows.start, size)

                                q8, q_scale, q_dot_k_mean, _ = q_states[slot]
                                kv = shard[slot]
                                pairs = [("q8", q8, along(whole.q)),
                                         ("q_scale", q_scale, whole.q_scale[:, :, rows]),
                                         ("q_dot_k_mean", q_dot_k_mean,
                                          whole.q_dot_k_mean[:, :, rows]),
                                         ("k8", kv.k, along(whole.k)),
                                         ("k_scale", kv.k_scale, whole.k_scale[:, :, rows]),
                                         ("v8", kv.v[..., :size], whole.v[..., rows]),
                                         ("v_scale", kv.v_scale, whole.v_scale)]
                                for name, mine, expected in pairs:
                                    self.assertTrue(torch.equal(mine, expected),
                                                    f"rank {rank} chunk {chunk}: {name}")

    def test_full_int8_within_the_rounding_of_its_merges(self):
        # The same integers per key tile as one call (the shards quantize as the whole sequence
        # does, P against each tile's own maximum): only 16-bit rounding and FP32 order differ.
        for world_size in (2, 4):
            for dtype in (torch.float16, torch.bfloat16):
                for layout, is_causal, (heads_q, heads_kv) in CASES:
                    with self.subTest(world_size=world_size, dtype=dtype, layout=layout,
                                      causal=is_causal, heads=(heads_q, heads_kv)):
                        q, k, v = inputs(layout, heads_q, heads_kv, seq=512 * world_size,
                                         dtype=dtype, seed=10 + world_size)
                        k = with_channel_offsets(k)
                        recorder = RecordingKernels(layout=layout, variant="full_int8")
                        out, lse = simulated_ring(q, k, v, world_size, is_causal, layout,
                                                  kernels=recorder)
                        whole, whole_lse = intfa.attention(q, k, v, is_causal=is_causal,
                                                           layout=layout, return_lse=True,
                                                           fallback="error", variant="full_int8")
                        budget = rounding_budget(recorder, layout, world_size, is_causal,
                                                 list(range(world_size)))
                        ratio, equal = within_rounding(out, whole, budget)
                        lse_error = (lse - whole_lse).abs().max().item()
                        report(f"simulated ring W={world_size} full_int8 {dtype} {layout} "
                               f"causal={is_causal} heads={heads_q}/{heads_kv} vs one call: "
                               f"rel_l2 {rel_l2(out, whole):.2e}, {equal:.1%} of elements equal, "
                               f"largest difference {ratio:.3f} of its rounding bound, max |LSE "
                               f"diff| {lse_error:.2e}")
                        self.assertLessEqual(ratio, 1.0)
                        self.assertLess(lse_error, MERGE_LSE)

    def test_automatic_rotation_and_variant_decide_as_one_call(self):
        # The defaults (variant and rotation "auto") on a layer whose even KV heads have outlier
        # channels: the ring takes the whole sequence's decisions (the variant from its length,
        # each head's rotation from the gathered sample rows), so it matches one call within the
        # merges' rounding (MERGE_REL_L2, as half INT8's ring test), smoothed or not; a head
        # rotated on one side only would be off by the quantization error itself (percents).
        for world_size in (2, 4):
            for smooth_k in (True, False):
                for layout, is_causal, (heads_q, heads_kv) in CASES:
                    with self.subTest(world_size=world_size, smooth_k=smooth_k, layout=layout,
                                      causal=is_causal, heads=(heads_q, heads_kv)):
                        q, k, v = inputs(layout, heads_q, heads_kv, seq=512 * world_size,
                                         seed=20 + world_size)
                        q, k = with_outlier_heads(q, k, layout, heads_q, heads_kv)
                        recorder = RecordingKernels(layout=layout, smooth_k=smooth_k)
                        out, lse = simulated_ring(q, k, v, world_size, is_causal, layout,
                                                  kernels=recorder)
                        whole, whole_lse = intfa.attention(q, k, v, is_causal=is_causal,
                                                           layout=layout, return_lse=True,
                                                           smooth_k=smooth_k, fallback="error")
                        seq = 512 * world_size
                        chosen = intfa.auto_variant(q.shape[-1], seq, seq, is_causal,
                                                    device=q.device.index)[0]
                        self.assertEqual(recorder.call_variant, chosen)
                        unrotated = intfa.attention(q, k, v, is_causal=is_causal, layout=layout,
                                                    smooth_k=smooth_k, rotate=False,
                                                    variant=chosen)
                        error = rel_l2(out, whole)
                        report(f"automatic rotation, ring W={world_size} smooth_k={smooth_k} "
                               f"{chosen} {layout} causal={is_causal} heads={heads_q}/"
                               f"{heads_kv}: vs one call rel_l2 {error:.2e}; one call "
                               f"unrotated differs by {rel_l2(unrotated, whole):.2e}")
                        self.assertLess(error, MERGE_REL_L2)
                        self.assertLess((lse - whole_lse).abs().max().item(), MERGE_LSE)
                        self.assertGreater(rel_l2(unrotated, whole), 2 * MERGE_REL_L2)

    def test_merge_is_exact_where_the_chunks_quantize_as_the_whole(self):
        for world_size in (2, 4):
            for layout, is_causal, (heads_q, heads_kv) in CASES:
                with self.subTest(world_size=world_size, layout=layout, causal=is_causal,
                                  heads=(heads_q, heads_kv)):
                    q, k, v = inputs(layout, heads_q, heads_kv, seq=512 * world_size)
                    options = dict(variant="half_int8", smooth_k=False)
                    out, lse = simulated_ring(q, k, v, world_size, is_causal, layout, **options)
                    whole, whole_lse = intfa.attention(q, k, v, is_causal=is_causal,
                                                       layout=layout, return_lse=True,
                                                       fallback="error", **options)
                    error, lse_error = rel_l2(out, whole), (lse - whole_lse).abs().max().item()
                    report(f"simulated ring W={world_size} {layout} causal={is_causal} "
                           f"heads={heads_q}/{heads_kv} half_int8 vs one call: "
                           f"rel_l2={error:.2e}, max |LSE diff|={lse_error:.2e}")
                    self.assertLess(error, MERGE_REL_L2)
                    self.assertLess(lse_error, MERGE_LSE)

    def test_full_and_half_int8_within_intfas_accuracy_targets(self):
        for variant in ("full_int8", "half_int8"):
            for dtype in (torch.float16, torch.bfloat16):
                for layout, is_causal, (heads_q, heads_kv) in CASES:
                    with self.subTest(variant=variant, dtype=dtype, layout=layout,
                                      causal=is_causal, heads=(heads_q, heads_kv)):
                        q, k, v = inputs(layout, heads_q, heads_kv, seq=2048, dtype=dtype)
                        # K with channel offsets: what K smoothing (the sequence's means) is for.
                        k = with_channel_offsets(k)
                        out, lse = simulated_ring(q, k, v, 4, is_causal, layout, variant=variant)
                        ref, ref_lse = reference64(q, k, v, is_causal, layout)
                        whole = intfa.attention(q, k, v, is_causal=is_causal, layout=layout,
                                                variant=variant, fallback="error")
                        error, whole_error = rel_l2(out, ref), rel_l2(whole, ref)
                        lse_error = (lse.double() - ref_lse).abs().max().item()
                        # As test_gpu: the target, plus the rounding of the output to its dtype
                        # (twice: the partial outputs are rounded at every merge too).
                        target = TARGET_REL_L2[variant] + 2 * rel_l2(ref.to(dtype), ref)
                        report(f"simulated ring W=4 {variant} {dtype} {layout} "
                               f"causal={is_causal} heads={heads_q}/{heads_kv}: rel_l2 vs "
                               f"float64 {error:.4%} (target {target:.2%}; one call "
                               f"{whole_error:.4%}), max |LSE error|={lse_error:.4f}")
                        self.assertLess(error, target)
                        self.assertLess(rel_l2(out, whole), target)
                        self.assertLess(lse_error, 0.05)

    def test_the_ring_sends_int8_shards(self):
        q, k, v = inputs("HND", 8, 2, seq=1024)
        kernels = cp.IntfaKernels(layout="HND", variant="full_int8")
        statistics = kernels.statistics(q, k, v, 0, 1, True)
        _, shard = cp._prepare_shard(q, k, v, True, kernels, statistics)
        self.assertEqual(len(shard), 2)  # two zig-zag chunks
        packed = cp._PackedShard(shard)  # what travels: one buffer
        bytes_sent = packed.buffer.numel()
        self.assertEqual(shard[0].k.dtype, torch.int8)
        self.assertEqual(shard[0].v.dtype, torch.int8)
        for sent, unpacked in zip(cp._flatten(shard), cp._flatten(packed.chunks)):
            self.assertTrue(torch.equal(sent, unpacked))
        # INT8 K and V plus scales: a little over half of FP16 K and V.
        fp16_bytes = 2 * k.numel() * k.element_size()
        report(f"ring shard: {bytes_sent} bytes sent per step for {fp16_bytes} bytes of FP16 K/V")
        self.assertLess(bytes_sent, 0.6 * fp16_bytes)


@needs_gpu
@unittest.skipUnless(torch is not None and dist.is_available() and dist.is_nccl_available(),
                     "needs torch.distributed with NCCL")
class OneRankNcclTest(unittest.TestCase):
    """ring_attention and ulysses_attention through torch.distributed with NCCL, one rank: the
    group's calls (all_to_all_single included) and intfa's kernels, against one intfa call."""

    @classmethod
    def setUpClass(cls):
        if dist.is_initialized():
            raise unittest.SkipTest("a default process group already exists in this process")
        cls.directory = tempfile.TemporaryDirectory(prefix="intfa-nccl-")
        dist.init_process_group("nccl", init_method=f"file://{cls.directory.name}/store",
                                rank=0, world_size=1, timeout=datetime.timedelta(seconds=120))

    @classmethod
    def tearDownClass(cls):
        dist.destroy_process_group()
        cls.directory.cleanup()

    def test_ring_and_ulysses_match_one_call(self):
        for layout, is_causal, (heads_q, heads_kv) in CASES:
            q, k, v = inputs(layout, heads_q, heads_kv, seq=1024)
            whole, whole_lse = intfa.attention(q, k, v, is_causal=is_causal, layout=layout,
                                               return_lse=True, fallback="error")
            ref, _ = reference64(q, k, v, is_causal, layout)
            for name, attention in (("ring", cp.ring_attention), ("ulysses", cp.ulysses_attention)):
                with self.subTest(name=name, layout=layout, causal=is_causal,
                                  heads=(heads_q, heads_kv)):
                    out, lse = attention(q, k, v, is_causal=is_causal, layout=layout,
                                         return_lse=True)
                    self.assertEqual(out.shape, q.shape)
                    self.assertEqual(out.dtype, q.dtype)
                    error = rel_l2(out, ref)
                    report(f"NCCL W=1 {name} {layout} causal={is_causal} "
                           f"heads={heads_q}/{heads_kv}: rel_l2 vs float64 {error:.4%}, vs one "
                           f"call {rel_l2(out, whole):.2e}")
                    self.assertLess(error, TARGET_REL_L2["full_int8"])
                    if name == "ulysses":  # one rank: the very call intfa.attention makes
                        torch.testing.assert_close(out, whole, rtol=0, atol=0)
                        torch.testing.assert_close(lse, whole_lse, rtol=0, atol=0)
                    else:
                        self.assertLess(rel_l2(out, whole), TARGET_REL_L2["full_int8"])
                        self.assertLess((lse - whole_lse).abs().max().item(), 0.05)


if __name__ == "__main__":
    unittest.main()
