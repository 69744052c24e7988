"""intfa's vLLM-shaped attention backend (intfa.integrations.vllm), driven as vLLM 0.11.0's model
runner drives a backend, without vLLM: the builder gets the fields of vLLM's
CommonAttentionMetadata, the impl gets vLLM's forward arguments and a cache tensor shaped by
get_kv_cache_shape. Without torch, the shapes and refusals; on a GPU, a continuous-batching loop
(requests arriving, chunked prefills beside decode steps, pages from a shuffled pool) checked
step by step against float32 attention of the original K/V, for the byte (fp8-budget) and 16-bit
caches, INT8 and INT4."""
import math
import os
import types
import unittest

import intfa
from intfa.integrations import vllm as backend

from support import GPU_PROBLEM, needs_gpu, report, torch  # noqa: F401

BOUND = {8: 0.02, 4: 0.30}


class BackendShapesTest(unittest.TestCase):
    def test_the_cache_shape_is_two_halves_of_intfa_pages(self):
        shape = backend.IntfaAttentionBackend.get_kv_cache_shape(100, 16, 8, 128, "fp8")
        self.assertEqual(shape, (2, 100, 8, 16, 128))
        self.assertEqual(backend.IntfaAttentionBackend.get_kv_cache_shape(3, 64, 1, 64),
                         (2, 3, 1, 64, 64))
        self.assertEqual(len(backend.IntfaAttentionBackend.get_kv_cache_stride_order()), 5)

    def test_bad_sizes_name_their_argument(self):
        cases = [("block_size", (100, 24, 8, 128)), ("head_size", (100, 16, 8, 96)),
                 ("num_blocks", (0, 16, 8, 128)), ("num_kv_heads", (100, 16, 0, 128))]
        for field, arguments in cases:
            with self.assertRaises(intfa.InvalidArgument) as caught:
                backend.IntfaAttentionBackend.get_kv_cache_shape(*arguments)
            self.assertEqual(caught.exception.field, field)
        with self.assertRaises(intfa.InvalidArgument) as caught:
            backend.IntfaAttentionBackend.get_kv_cache_shape(100, 16, 8, 128, "int8")
        self.assertEqual(caught.exception.field, "cache_dtype_str")

    def test_the_impl_refuses_what_it_does_not_serve(self):
        base = dict(num_heads=32, head_size=128, scale=0.088, num_kv_heads=8, alibi_slopes=None,
                    sliding_window=None, kv_cache_dtype="fp8")
        backend.IntfaAttentionImpl(**base)
        for name, value in (("alibi_slopes", [0.5] * 32), ("sliding_window", 4096),
                            ("logits_soft_cap", 30.0), ("attn_type", "encoder")):
            with self.assertRaises(NotImplementedError, msg=name):
                backend.IntfaAttentionImpl(**dict(base, **{name: value}))
        with self.assertRaises(intfa.InvalidArgument) as caught:
            backend.IntfaAttentionImpl(**dict(base, num_heads=30))
        self.assertEqual(caught.exception.field, "num_heads")
        os.environ[backend.BITS_VARIABLE] = "6"
        try:
            with self.assertRaises(intfa.InvalidArgument) as caught:
                backend.IntfaAttentionImpl(**base)
            self.assertEqual(caught.exception.field, backend.BITS_VARIABLE)
        finally:
            del os.environ[backend.BITS_VARIABLE]

    def test_the_builder_says_no_to_cascade_and_graphs(self):
        builder = backend.IntfaAttentionMetadataBuilder(None, ["layer.0"], None, "cuda")
        self.assertFalse(builder.use_cascade_attention(4, None, 32, 8, False, False, False, 132))
        self.assertEqual(builder.cudagraph_support.name, "NEVER")

    def test_a_step_splits_into_its_leading_decodes_and_the_rest(self):
        # query_start_loc_cpu, seq_lens_cpu -> (num_decodes, decode max, prefill max, prefill sum)
        cases = [([0, 1, 2, 7, 8], [10, 20, 30, 40], (2, 20, 40, 70)),
                 ([0, 1, 2, 3], [5, 9, 7], (3, 9, 0, 0)),
                 ([0, 4, 5, 6], [4, 8, 12], (0, 0, 12, 24)),
                 ([0, 1, 3, 4], [100, 2, 50], (1, 100, 50, 52)),
                 ([0], [], (0, 0, 0, 0))]
        for starts, lengths, expected in cases:
            self.assertEqual(backend.split_decodes(starts, lengths), expected, (starts, lengths))


def reference(q, k, v, scale):
    """float32 causal (bottom-right) attention of [n_q, Hq, d] queries over [L, Hkv, d] K/V."""
    n_q, heads_q, _ = q.shape
    length, heads_kv, _ = k.shape
    group = heads_q // heads_kv
    qf = q.float().transpose(0, 1)
    kf = k.float().transpose(0, 1).repeat_interleave(group, dim=0)
    vf = v.float().transpose(0, 1).repeat_interleave(group, dim=0)
    scores = qf @ kf.transpose(1, 2) * scale
    mask = torch.ones(n_q, length, dtype=torch.bool, device=q.device).tril(length - n_q)
    scores = scores.masked_fill(~mask, float("-inf"))
    return (scores.softmax(-1) @ vf).transpose(0, 1)


@needs_gpu
class BackendServingTest(unittest.TestCase):
    """Requests arrive over the steps; each step schedules chunks of the prompts (at most
    `chunk` tokens each) beside one decode token for the requests whose prompts are done, as
    vLLM's scheduler does, builds the metadata vLLM's runner would, and runs the layer."""

    def serve(self, cache_dtype, bits, dtype=torch.float16 if torch else None, heads=(32, 8),
              head_size=128, block_size=16, prompts=(300, 40, 1000, 7), chunk=256, steps=8,
              decodes_first=True):
        os.environ[backend.BITS_VARIABLE] = str(bits)
        try:
            self._serve(cache_dtype, bits, dtype, heads, head_size, block_size, prompts, chunk,
                        steps, decodes_first)
        finally:
            del os.environ[backend.BITS_VARIABLE]

    def _serve(self, cache_dtype, bits, dtype, heads, head_size, block_size, prompts, chunk,
               steps, decodes_first):
        torch.manual_seed(bits + len(prompts))
        heads_q, heads_kv = heads
        scale = 1.0 / math.sqrt(head_size)
        longest = max(prompts) + steps
        max_blocks = -(-longest // block_size)
        num_blocks = len(prompts) * max_blocks + 4
        shape = backend.IntfaAttentionBackend.get_kv_cache_shape(num_blocks, block_size, heads_kv,
                                                                 head_size, cache_dtype)
        kv_cache = torch.zeros(shape, dtype=torch.uint8 if cache_dtype == "fp8" else dtype,
                               device="cuda")
        impl = backend.IntfaAttentionImpl(heads_q, head_size, scale, heads_kv, None, None,
                                          cache_dtype)
        builder = backend.IntfaAttentionMetadataBuilder(None, ["layer.0"], None,
                                                        torch.device("cuda"))
        free = torch.randperm(num_blocks).tolist()
        tables = [[] for _ in prompts]
        keys = [torch.randn(p + steps, heads_kv, head_size, device="cuda").to(dtype)
                for p in prompts]
        values = [torch.randn(p + steps, heads_kv, head_size, device="cuda").to(dtype)
                  for p in prompts]
        done = [0] * len(prompts)  # tokens in the cache
        worst, decode_steps, mixed_steps, split_steps, late_decode_steps = 0.0, 0, 0, 0, 0
        for step in range(steps + max(prompts) // chunk + 1):
            # Request r arrives at step r; a running request gets its next chunk, or one token.
            batch = []
            for r, prompt in enumerate(prompts):
                if r > step or done[r] >= prompt + steps:
                    continue
                count = min(chunk, prompt - done[r]) if done[r] < prompt else 1
                batch.append((r, count))
            if not batch:
                break
            if decodes_first:  # vLLM's runner, for reorder_batch_threshold 1
                batch.sort(key=lambda request: request[1] != 1)
            starts, slots, lengths = [0], [], []
            for r, count in batch:
                for position in range(done[r], done[r] + count):
                    if position % block_size == 0:
                        tables[r].append(free.pop())
                    slots.append(tables[r][position // block_size] * block_size +
                                 position % block_size)
                starts.append(starts[-1] + count)
                lengths.append(done[r] + count)
            table = torch.zeros(len(batch), max_blocks, dtype=torch.int32)
            for b, (r, _) in enumerate(batch):
                table[b, :len(tables[r])] = torch.tensor(tables[r], dtype=torch.int32)
            q = torch.randn(starts[-1], heads_q, head_size, device="cuda").to(dtype)
            k = torch.cat([keys[r][done[r]:done[r] + c] for r, c in batch])
            v = torch.cat([values[r][done[r]:done[r] + c] for r, c in batch])
            seq_lens_cpu = torch.tensor(lengths, dtype=torch.int32)
            common = types.SimpleNamespace(
                query_start_loc=torch.tensor(starts, dtype=torch.int32, device="cuda"),
                query_start_loc_cpu=torch.tensor(starts, dtype=torch.int32),
                seq_lens=seq_lens_cpu.cuda(), seq_lens_cpu=seq_lens_cpu,
                num_reqs=len(batch), num_actual_tokens=starts[-1],
                max_query_len=max(c for _, c in batch), max_seq_len=max(lengths),
                block_table_tensor=table.cuda(),
                slot_mapping=torch.tensor(slots, dtype=torch.int64, device="cuda"), causal=True)
            metadata = builder.build(0, common)
            # vLLM pads the token count for its graphs: rows past num_actual_tokens are ignored.
            pad = 3
            output = torch.full((starts[-1] + pad, heads_q * head_size), float("nan"),
                                dtype=dtype, device="cuda")
            q_padded = torch.cat([q, torch.zeros(pad, heads_q, head_size, dtype=dtype,
                                                 device="cuda")])
            k_padded = torch.cat([k, torch.zeros(pad, heads_kv, head_size, dtype=dtype,
                                                 device="cuda")])
            v_padded = torch.cat([v, torch.zeros(pad, heads_kv, head_size, dtype=dtype,
                                                 device="cuda")])
            impl.forward(None, q_padded, k_padded, v_padded, kv_cache, metadata, output=output)
            decode_steps += metadata.max_query_len == 1
            mixed_steps += metadata.max_query_len > 1 and any(c == 1 for _, c in batch)
            split_steps += 0 < metadata.num_decodes < metadata.num_reqs
            # A decode request after a prefill chunk goes through paged_prefill.
            late_decode_steps += any(c == 1 for _, c in batch[metadata.num_decodes:])
            out = output[:starts[-1]].view(-1, heads_q, head_size)
            for b, (r, count) in enumerate(batch):
                end = done[r] + count
                expected = reference(q[starts[b]:starts[b + 1]], keys[r][:end], values[r][:end],
                                     scale)
                got = out[starts[b]:starts[b + 1]].float()
                error = ((got - expected).norm() / expected.norm()).item()
                worst = max(worst, error)
                self.assertLess(error, BOUND[bits], f"step {step}, request {r}: {count} queries "
                                f"over {end} keys")
            for r, count in batch:
                done[r] += count
        self.assertGreater(decode_steps, 0, "no step was decode only")
        self.assertGreater(mixed_steps, 0, "no step mixed a prefill chunk and decode rows")
        if decodes_first:
            self.assertGreater(split_steps, 0, "no mixed step ran its decodes through paged_decode")
        else:
            self.assertGreater(late_decode_steps, 0, "no decode request came after a chunk")
        report(f"vLLM-shaped backend, {cache_dtype} cache, INT{bits}, {dtype}: rel_l2 <= "
               f"{worst:.4%} over {step + 1} steps ({decode_steps} decode only, {mixed_steps} "
               f"mixed, {split_steps} of them split, {late_decode_steps} with a decode after a "
               f"chunk)")

    def test_int8_in_a_byte_cache(self):
        self.serve("fp8", 8)

    def test_int4_in_a_byte_cache_bf16_gqa_head_size_64(self):
        self.serve("fp8", 4, dtype=torch.bfloat16, heads=(8, 2), head_size=64, block_size=32)

    def test_int8_in_a_16_bit_cache_pages_of_128(self):
        self.serve("auto", 8, block_size=128, prompts=(500, 3, 129))

    def test_int8_in_a_byte_cache_in_arrival_order(self):
        # vLLM's runner not reordering (a release that does not read reorder_batch_threshold):
        # decode requests after chunks stay in paged_prefill's call.
        self.serve("fp8", 8, decodes_first=False)

    def test_a_profiling_run_returns_the_output_untouched(self):
        impl = backend.IntfaAttentionImpl(8, 64, 0.125, 8, None, None, "auto")
        output = torch.ones(4, 8 * 64, device="cuda", dtype=torch.float16)
        self.assertIs(impl.forward(None, None, None, None, torch.tensor([]), None,
                                   output=output), output)
        self.assertTrue(bool((output == 1).all()))


if __name__ == "__main__":
    unittest.main()
