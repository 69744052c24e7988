"""intfa.distributed on one GPU, through intfa's kernels: the ring simulated in one process (every
rank's K/V chunks quantized once, the INT8 shards copied from rank to rank, partial states merged
by intfa.merge_states) against one intfa.attention call over the whole sequence and against
float64; ring_attention and ulysses_attention over a real NCCL process group of size 1. Skipped,
saying why, without a GPU.

Bounds: where the chunks quantize exactly as the whole sequence does (half INT8 without K
smoothing: Q and K have one scale per token, V stays FP16), the ring differs from one call only by
rounding (FP16 P and partial outputs, the order of the online softmax): MERGE_REL_L2 and
MERGE_LSE. Otherwise (each chunk's own K mean and V scales) it is a different quantization of the
same attention, held to intfa's accuracy targets against float64 (test_gpu.TARGET_REL_L2)."""
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


def simulated_ring(q, k, v, world_size, is_causal, layout, **options):
    """The whole sequence's (out, lse) from the simulated ring over world_size shards."""
    shards = [[cp.shard_sequence(x, rank, world_size, layout=layout, zigzag=is_causal)
               for rank in range(world_size)] for x in (q, k, v)]
    results = cp.simulate_ring_attention(*shards, is_causal, layout=layout, **options)
    return (cp.unshard_sequence([out for out, _ in results], layout=layout, zigzag=is_causal),
            cp.unshard_sequence([lse for _, lse in results], zigzag=is_causal))


CASES = [(layout, is_causal, heads) for layout in ("HND", "NHD") for is_causal in (False, True)
         for heads in ((8, 8), (8, 2))]


@needs_gpu
class SimulatedRingTest(unittest.TestCase):
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
                        # K with channel offsets: what K smoothing (per chunk here) is for.
                        k = k + 2.0 * torch.randn_like(k[..., :1, :1, :])
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
        kernels = cp.IntfaKernels(layout="HND")
        _, shard = cp._prepare_shard(q, k, v, 2, True, kernels)
        self.assertEqual(len(shard), 2)  # two zig-zag chunks
        sent = cp._flatten(shard)
        bytes_sent = sum(t.numel() * t.element_size() for t in sent)
        self.assertEqual(shard[0].k.dtype, torch.int8)
        self.assertEqual(shard[0].v.dtype, torch.int8)
        # INT8 K and V plus scales and means: a little over half of FP16 K and V.
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
