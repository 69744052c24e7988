"""``paged|intfa`` (intfa.integrations.transformers_paged): transformers' continuous batching on
intfa's paged INT8/INT4 cache. Without torch, the page mapping and the byte counts; on a GPU, the
attention function driven with the arguments transformers 5.17's batch processor builds
(read_index / write_index cache slots, cu_seq_lens_q / cu_seq_lens_k, a cache object with blocks
handed out from a shuffled pool) over a schedule of fresh prefills, chunks beside decode rows and
decode-only steps, checked against float32 attention of the original K/V; and, with transformers,
a model generating through ``generate_batch`` with ``paged|intfa``."""
import importlib.util
import math
import types
import unittest

import intfa
from intfa.integrations import transformers_paged as paged

from support import needs_gpu, report, torch  # noqa: F401
from test_vllm_backend import reference

BOUND = {8: 0.02, 4: 0.30}  # rel L2 against float32 of the original K/V (as the vLLM test)
needs_transformers = unittest.skipIf(importlib.util.find_spec("transformers") is None,
                                     "needs transformers")


class PageMappingTest(unittest.TestCase):
    def test_blocks_of_128_and_more_are_pages_of_128(self):
        for block, page in ((16, 16), (32, 32), (64, 64), (128, 128), (256, 128), (512, 128)):
            self.assertEqual(paged.page_size(block), page)

    def test_other_block_sizes_name_block_size(self):
        for block in (4, 8, 48, 200, 0, True, 256.0):
            with self.assertRaises(intfa.InvalidArgument, msg=repr(block)) as caught:
                paged.page_size(block)
            self.assertEqual(caught.exception.field, "block_size")

    def test_bytes_per_block_count_values_and_scales(self):
        # d=128, 8 KV heads: a token's K (or V) of one layer is 1024 values; INT8 adds one
        # float32 scale per head, INT4 one float16 per 32 channels.
        heads, dim, layers, block = 8, 128, 4, 256
        per_token = {16: heads * dim * 2, 8: heads * dim + heads * 4,
                     4: heads * dim // 2 + heads * dim // 32 * 2}
        for bits, size in per_token.items():
            self.assertEqual(paged.bytes_per_block(block, heads, dim, layers, bits),
                             2 * block * size * layers, bits)

    def test_register_checks_its_arguments(self):
        for name, arguments in (("name", {"name": "intfa"}), ("name", {"name": "paged|"}),
                                ("bits", {"bits": 16}), ("smooth_k", {"smooth_k": 1})):
            with self.assertRaises(intfa.InvalidArgument, msg=repr(arguments)) as caught:
                paged.register(**arguments)
            self.assertEqual(caught.exception.field, name)


@needs_transformers
class ConfigTest(unittest.TestCase):
    def model(self):
        import transformers
        return types.SimpleNamespace(config=transformers.LlamaConfig(
            hidden_size=1024, num_attention_heads=16, num_key_value_heads=4, head_dim=64,
            num_hidden_layers=3))

    def test_num_blocks_fill_the_memory_budget(self):
        per_block = paged.bytes_per_block(128, 4, 64, 3, 8)
        config = paged.config(self.model(), memory_bytes=100 * per_block, block_size=128)
        self.assertEqual(config.num_blocks, 98)  # transformers adds its two trash blocks
        self.assertEqual(config.block_size, 128)

    def test_cpu_offloading_and_bad_budgets_are_refused(self):
        for field, options in (("cpu_offload_space", {"cpu_offload_space": 4.0}),
                               ("cpu_offload_space", {"cpu_offload_space": None}),
                               ("memory_bytes", {"memory_bytes": 0}),
                               ("block_size", {"block_size": 100})):
            with self.assertRaises(intfa.InvalidArgument, msg=field) as caught:
                paged.config(self.model(), **options)
            self.assertEqual(caught.exception.field, field)


class FakeCache:
    """What the attention function reads of transformers' PagedAttentionCache."""

    def __init__(self, **fields):
        self.__dict__.update(fields)


class ShadowCheck:
    """Wraps a paged attention function (transformers' arguments): keeps every K/V row written
    in 16 bits by its slot, and checks each call's output, sequence by sequence (at most
    `sequences` of a call, spread over it), against float32 attention over the original rows."""

    def __init__(self, forward, sequences=4):
        self.forward, self.sequences = forward, sequences
        self.shadow, self.errors = {}, []

    def __call__(self, module, query, key, value, attention_mask, scaling=None, **kwargs):
        out, weights = self.forward(module, query, key, value, attention_mask, scaling=scaling,
                                    **kwargs)
        cache, group = kwargs["cache"], 0
        total_q = query.shape[2]
        k_rows, v_rows = key[0].transpose(0, 1), value[0].transpose(0, 1)
        store = self.shadow.get((id(cache), module.layer_idx))
        if store is None:
            slots = (cache.num_blocks + 2) * cache.block_size
            store = self.shadow[(id(cache), module.layer_idx)] = (
                k_rows.new_zeros(slots, *k_rows.shape[1:]),
                v_rows.new_zeros(slots, *v_rows.shape[1:]))
        writes = kwargs["write_index"][group][:total_q]
        store[0][writes], store[1][writes] = k_rows, v_rows
        reads = kwargs["read_index"][group]
        reads = reads if reads.numel() else writes
        cu_q = kwargs["cu_seq_lens_q"].tolist()
        cu_k = kwargs["cu_seq_lens_k"]
        cu_k = (cu_k["full_attention"] if isinstance(cu_k, dict) else cu_k).tolist()
        batch = len(cu_q) - 1
        for b in sorted({round(i * (batch - 1) / max(1, self.sequences - 1))
                         for i in range(min(batch, self.sequences))}):
            slots = reads[cu_k[b]:cu_k[b + 1]]
            expected = reference(query[0, :, cu_q[b]:cu_q[b + 1]].transpose(0, 1),
                                 store[0][slots], store[1][slots], scaling)
            got = out[0, cu_q[b]:cu_q[b + 1]].float()
            self.errors.append(((got - expected).norm() / expected.norm()).item())
        return out, weights


def next_step(step, prompts, done, tables, free, block_size, chunk, steps):
    """transformers' batch of one step, as its scheduler and batch processor make it: request r
    arrives at step r; a running request gets its next prompt chunk (at most `chunk` tokens) or
    one decode token; a block from `free` for every block_size positions (`tables`: each
    request's blocks); read slots of every key of a request, write slots of its new ones.
    Returns (batch [(request, queries)], cu_q, cu_k, reads, writes) as lists."""
    batch = [(r, min(chunk, p - done[r]) if done[r] < p else 1)
             for r, p in enumerate(prompts) if r <= step and done[r] < p + steps]
    cu_q, cu_k, reads, writes = [0], [0], [], []
    for r, count in batch:
        end = done[r] + count
        while len(tables[r]) * block_size < end:
            tables[r].append(free.pop())
        slot = [tables[r][p // block_size] * block_size + p % block_size for p in range(end)]
        reads += slot
        writes += slot[done[r]:]
        cu_q.append(cu_q[-1] + count)
        cu_k.append(cu_k[-1] + end)
    return batch, cu_q, cu_k, reads, writes


@needs_gpu
class ContinuousBatchingStepsTest(unittest.TestCase):
    """The attention function driven step by step (next_step) with the arguments transformers'
    batch processor gives it (no read_index when nothing is cached yet)."""

    def serve(self, bits, dtype=torch.float16 if torch else None, heads=(32, 8), head_dim=128,
              block_size=256, prompts=(300, 5, 700), chunk=512, steps=5, layers=2):
        torch.manual_seed(bits + block_size + len(prompts))
        heads_q, heads_kv = heads
        scale = 1.0 / math.sqrt(head_dim)
        longest = max(prompts) + steps
        num_blocks = len(prompts) * -(-longest // block_size) + 3
        cache = FakeCache(
            block_size=block_size, num_blocks=num_blocks, num_key_value_heads=heads_kv,
            head_dim=head_dim, num_sliding_attention_groups=0,
            layer_index_to_group_indices={layer: (0, layer) for layer in range(layers)},
            key_cache=[torch.zeros(1, device="cuda") for _ in range(layers)],
            value_cache=[torch.zeros(1, device="cuda") for _ in range(layers)])
        forward = paged.attention_function(bits, smooth_k=True)
        free = torch.randperm(num_blocks).tolist()
        tables = [[] for _ in prompts]
        keys = [[torch.randn(p + steps, heads_kv, head_dim, device="cuda").to(dtype) + 2.0
                 for p in prompts] for _ in range(layers)]  # an offset for K smoothing to take
        values = [[torch.randn(p + steps, heads_kv, head_dim, device="cuda").to(dtype)
                   for p in prompts] for _ in range(layers)]
        done = [0] * len(prompts)
        worst, kinds = 0.0, set()
        for step in range(steps + max(prompts) // chunk + 1):
            batch, cu_q, cu_k, reads, writes = next_step(step, prompts, done, tables, free,
                                                         block_size, chunk, steps)
            if not batch:
                break
            cached = any(done[r] for r, _ in batch)
            kinds.add("decode" if all(c == 1 for _, c in batch) else
                      "mixed" if any(c == 1 for _, c in batch) else
                      "chunk" if cached else "fresh")
            arguments = dict(
                cache=cache, cu_seq_lens_q=torch.tensor(cu_q, dtype=torch.int32, device="cuda"),
                cu_seq_lens_k=torch.tensor(cu_k, dtype=torch.int32, device="cuda"),
                max_seqlen_q=max(c for _, c in batch),
                max_seqlen_k=max(done[r] + c for r, c in batch),
                read_index=[torch.tensor(reads if cached else [], dtype=torch.int64,
                                         device="cuda")],
                write_index=[torch.tensor(writes, dtype=torch.int64, device="cuda")])
            for layer in range(layers):
                q = torch.randn(1, heads_q, cu_q[-1], head_dim, device="cuda").to(dtype)
                k = torch.cat([keys[layer][r][done[r]:done[r] + c] for r, c in batch])
                v = torch.cat([values[layer][r][done[r]:done[r] + c] for r, c in batch])
                # transformers' [1, H, tokens, D] views of [1, tokens, H, D] projections.
                out, weights = forward(types.SimpleNamespace(layer_idx=layer), q,
                                       k.unsqueeze(0).transpose(1, 2),
                                       v.unsqueeze(0).transpose(1, 2), None, scaling=scale,
                                       **arguments)
                self.assertIsNone(weights)
                self.assertEqual(tuple(out.shape), (1, cu_q[-1], heads_q, head_dim))
                for b, (r, count) in enumerate(batch):
                    end = done[r] + count
                    expected = reference(q[0, :, cu_q[b]:cu_q[b + 1]].transpose(0, 1),
                                         keys[layer][r][:end], values[layer][r][:end], scale)
                    error = ((out[0, cu_q[b]:cu_q[b + 1]].float() - expected).norm()
                             / expected.norm()).item()
                    worst = max(worst, error)
                    self.assertLess(error, BOUND[bits], f"step {step}, layer {layer}, request "
                                    f"{r}: {count} queries over {end} keys")
            for r, count in batch:
                done[r] += count
        self.assertLessEqual({"fresh", "mixed", "decode"}, kinds, "the schedule's steps")
        # transformers' own 16-bit tensors of each layer are released on its first call.
        self.assertEqual([t.numel() for t in cache.key_cache + cache.value_cache],
                         [0] * (2 * layers))
        report(f"paged|intfa, INT{bits}, {dtype}, blocks of {block_size}: rel_l2 <= {worst:.4%} "
               f"over {step + 1} steps x {layers} layers")

    def test_int8_blocks_of_256(self):
        self.serve(8)

    def test_int4_bf16_blocks_of_64_head_dim_64(self):
        self.serve(4, dtype=torch.bfloat16, heads=(8, 2), head_dim=64, block_size=64)

    def test_int8_mqa_blocks_of_512(self):
        self.serve(8, heads=(16, 1), block_size=512, prompts=(1100, 1, 40))

    def test_padded_steps_replayed_in_a_cuda_graph(self):
        """transformers' CUDA graphs: batches padded to fixed sizes (padding tokens write to the
        write-trash slot, the offsets plateau over padding sequences, the host bounds are the
        padded sizes), one capture replayed for each step with its values copied in."""
        torch.manual_seed(7)
        heads_q, heads_kv, head_dim, block_size, num_blocks = 16, 4, 128, 256, 12
        prompts, chunk, steps = (300, 40, 520), 256, 4
        q_pad, seqs_pad, kv_pad, max_k = 512, 4, 2048, 1024
        scale = head_dim ** -0.5
        cache = FakeCache(
            block_size=block_size, num_blocks=num_blocks, num_key_value_heads=heads_kv,
            head_dim=head_dim, num_sliding_attention_groups=0,
            layer_index_to_group_indices={0: (0, 0)}, key_cache=[torch.zeros(1, device="cuda")],
            value_cache=[torch.zeros(1, device="cuda")],
            write_trash_index=(num_blocks + 1) * block_size)
        forward = paged.attention_function(8, smooth_k=True)
        read_trash, write_trash = num_blocks * block_size, (num_blocks + 1) * block_size
        q = torch.zeros(q_pad, heads_q, head_dim, dtype=torch.float16, device="cuda")
        k, v = (torch.zeros(q_pad, heads_kv, head_dim, dtype=torch.float16, device="cuda")
                for _ in range(2))
        cu_q, cu_k = (torch.zeros(seqs_pad + 1, dtype=torch.int32, device="cuda")
                      for _ in range(2))
        reads = torch.zeros(kv_pad, dtype=torch.int64, device="cuda")
        writes = torch.zeros(q_pad, dtype=torch.int64, device="cuda")

        def call():
            return forward(types.SimpleNamespace(layer_idx=0), q.transpose(0, 1).unsqueeze(0),
                           k.unsqueeze(0).transpose(1, 2), v.unsqueeze(0).transpose(1, 2), None,
                           scaling=scale, cache=cache, cu_seq_lens_q=cu_q, cu_seq_lens_k=cu_k,
                           max_seqlen_q=q_pad, max_seqlen_k=max_k, read_index=[reads],
                           write_index=[writes])[0]

        free = torch.randperm(num_blocks).tolist()
        tables = [[] for _ in prompts]
        keys = [torch.randn(p + steps, heads_kv, head_dim, device="cuda").half() + 1.0
                for p in prompts]
        values = [torch.randn(p + steps, heads_kv, head_dim, device="cuda").half()
                  for p in prompts]
        done, graph, worst = [0] * len(prompts), None, 0.0
        for step in range(steps + 3):
            batch, starts, lengths, read_list, write_list = next_step(
                step, prompts, done, tables, free, block_size, chunk, steps)
            used = starts[-1]
            plateau = [starts[-1]] * (seqs_pad + 1 - len(starts))
            cu_q.copy_(torch.tensor(starts + plateau, dtype=torch.int32))
            cu_k.copy_(torch.tensor(lengths + [lengths[-1]] * len(plateau), dtype=torch.int32))
            reads.copy_(torch.tensor(read_list + [read_trash] * (kv_pad - len(read_list))))
            writes.copy_(torch.tensor(write_list + [write_trash] * (q_pad - used)))
            q.copy_(torch.randn_like(q, dtype=torch.float32).half())
            k.copy_(torch.randn_like(k, dtype=torch.float32).half())  # the padding rows too
            v.copy_(torch.randn_like(v, dtype=torch.float32).half())
            k[:used] = torch.cat([keys[r][done[r]:done[r] + c] for r, c in batch])
            v[:used] = torch.cat([values[r][done[r]:done[r] + c] for r, c in batch])
            if graph is None:  # as transformers: an eager run, then the capture
                out = call()
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    captured = call()
            else:
                graph.replay()
                out = captured
            for b, (r, count) in enumerate(batch):
                end = done[r] + count
                expected = reference(q[starts[b]:starts[b + 1]], keys[r][:end], values[r][:end],
                                     scale)
                error = ((out[0, starts[b]:starts[b + 1]].float() - expected).norm()
                         / expected.norm()).item()
                worst = max(worst, error)
                self.assertLess(error, BOUND[8], f"step {step}, request {r}: {count} queries "
                                f"over {end} keys")
            for r, count in batch:
                done[r] += count
        report(f"paged|intfa under a CUDA graph, padded batches: rel_l2 <= {worst:.4%} over "
               f"{step} replays")

    def test_forks_copy_intfa_pages(self):
        """transformers forks a request (num_return_sequences > 1) through its cache's
        copy_cache(source blocks, forked blocks): on intfa's pages, a block of 256 being two."""
        torch.manual_seed(3)
        block_size, num_blocks, heads_kv, head_dim = 256, 6, 2, 64
        cache = FakeCache(
            block_size=block_size, num_blocks=num_blocks, num_key_value_heads=heads_kv,
            head_dim=head_dim, num_sliding_attention_groups=0,
            layer_index_to_group_indices={0: (0, 0), 1: (0, 1)},
            key_cache=[torch.zeros(1, device="cuda") for _ in range(2)],
            value_cache=[torch.zeros(1, device="cuda") for _ in range(2)])
        forward = paged.attention_function(8, smooth_k=False)
        tokens = 3 * block_size  # blocks 4, 1 and 3 filled
        slots = torch.cat([torch.arange(b * block_size, (b + 1) * block_size)
                           for b in (4, 1, 3)]).cuda()
        cu = torch.tensor([0, tokens], dtype=torch.int32, device="cuda")
        for layer in range(2):
            q = torch.randn(1, 4, tokens, head_dim, device="cuda").half()
            k, v = (torch.randn(1, heads_kv, tokens, head_dim, device="cuda").half()
                    for _ in range(2))
            forward(types.SimpleNamespace(layer_idx=layer), q, k, v, None, cache=cache,
                    cu_seq_lens_q=cu, cu_seq_lens_k=cu, max_seqlen_q=tokens,
                    max_seqlen_k=tokens, read_index=[slots[:0]], write_index=[slots])
        state = paged._CACHES[cache]
        # Compared as bytes (a float scale's NaN would not equal itself).
        before = {name: [getattr(layer, name).view(torch.uint8).clone()
                         for layer in state.layers.values()]
                  for name in ("k_data", "v_data", "k_scale", "v_scale")}
        cache.copy_cache([4, 1], [0, 5])
        for name, tensors in before.items():
            for layer, old in zip(state.layers.values(), tensors):
                new = getattr(layer, name).view(torch.uint8)
                for source, forked in ((4, 0), (1, 5)):
                    self.assertTrue(torch.equal(new[2 * forked:2 * forked + 2],
                                                old[2 * source:2 * source + 2]), name)
                for untouched in (1, 2, 3, 4, 6, 7):  # blocks 1-4 and the trash's pages
                    self.assertTrue(torch.equal(new[2 * untouched:2 * untouched + 2],
                                                old[2 * untouched:2 * untouched + 2]), name)

    def test_outside_continuous_batching_it_says_so(self):
        forward = paged.attention_function(8, smooth_k=False)
        q = torch.zeros(1, 8, 4, 64, device="cuda", dtype=torch.float16)
        with self.assertRaises(intfa.InvalidArgument) as caught:
            forward(types.SimpleNamespace(layer_idx=0), q, q, q, None)
        self.assertEqual(caught.exception.field, "cache")


def generate(model, prompts, impl, new_tokens, cb_config):
    from transformers import GenerationConfig
    model.set_attn_implementation(impl)
    config = GenerationConfig(max_new_tokens=new_tokens, do_sample=False, eos_token_id=None,
                              pad_token_id=0)
    results = model.generate_batch(prompts, config, continuous_batching_config=cb_config)
    return [results[key] for key in results]


@needs_gpu
@needs_transformers
class GenerateBatchTest(unittest.TestCase):
    """A small Llama generating through generate_batch (chunked prefills beside decode steps):
    without CUDA graphs every attention call of the loop checked against float32 attention of
    its original K/V (ShadowCheck), then with transformers' CUDA graphs, the tokens compared
    with paged|sdpa's; then two sequences a prompt (forked requests)."""

    def test_a_llama_generates_through_paged_intfa(self):
        import transformers
        from transformers import AttentionInterface
        torch.manual_seed(0)
        with torch.device("cuda"):
            model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
                hidden_size=512, intermediate_size=1024, num_hidden_layers=2,
                num_attention_heads=8, num_key_value_heads=2, head_dim=64, vocab_size=1000,
                max_position_embeddings=4096, eos_token_id=None))
        model = model.to(torch.bfloat16).eval()
        lengths = (700, 33, 1500, 260)
        prompts = [torch.randint(0, 1000, (n,)).tolist() for n in lengths]
        options = dict(block_size=128, num_blocks=64, max_batch_tokens=512)
        reference_tokens = generate(model, prompts, "paged|sdpa", 12,
                                    transformers.ContinuousBatchingConfig(**options))
        for bits in (8, 4):
            check = ShadowCheck(paged.attention_function(bits, smooth_k=True))
            AttentionInterface.register("paged|intfa_checked", check)
            outputs = generate(model, prompts, "paged|intfa_checked", 12,
                               paged.config(model, **options, use_cuda_graph=False))
            same = total = 0
            for got, expected in zip(outputs, reference_tokens):
                self.assertIsNone(got.error)
                self.assertEqual(len(got.generated_tokens), 12)
                same += sum(a == b for a, b in zip(got.generated_tokens,
                                                   expected.generated_tokens))
                total += len(expected.generated_tokens)
            self.assertGreater(len(check.errors), 12 * len(prompts))
            self.assertLess(max(check.errors), BOUND[bits])
            report(f"paged|intfa INT{bits} generate_batch, prompts of {lengths} tokens, chunks of "
                   f"512, 12 new tokens: {len(check.errors)} attention outputs, rel_l2 <= "
                   f"{max(check.errors):.4%} (mean {sum(check.errors) / len(check.errors):.4%}); "
                   f"greedy tokens equal to paged|sdpa's at {same} of {total} positions")
        # With transformers' CUDA graphs of padded batches (no ShadowCheck: a capture cannot
        # read the offsets to the host).
        paged.register()
        outputs = generate(model, prompts, paged.NAME, 12,
                           paged.config(model, **options, use_cuda_graph=True))
        for got in outputs:
            self.assertIsNone(got.error)
            self.assertEqual(len(got.generated_tokens), 12)
        same = sum(a == b for got, expected in zip(outputs, reference_tokens)
                   for a, b in zip(got.generated_tokens, expected.generated_tokens))
        report(f"paged|intfa INT8 generate_batch under transformers' CUDA graphs: greedy tokens "
               f"equal to paged|sdpa's at {same} of {12 * len(prompts)} positions")
        # Two sequences a prompt, sampled with top_k=1 (greedy; transformers forks only sampled
        # requests): the child forked after the prefill (its last partial block copied by
        # copy_cache) continues exactly as its parent.
        # transformers 5.17's generate_batch returns the parents only: its manager, directly.
        from transformers import GenerationConfig
        model.set_attn_implementation(paged.NAME)
        manager = model.init_continuous_batching(GenerationConfig(
            max_new_tokens=12, do_sample=True, top_k=1, eos_token_id=None, pad_token_id=0,
            num_return_sequences=2), paged.config(model, **options))
        manager.start()
        results = {}
        try:
            manager.add_requests(inputs=prompts, max_new_tokens=12)
            while len(results) < 2 * len(prompts) and manager.is_running():
                result = manager.get_result(timeout=1)
                if result is not None and result.is_finished():
                    results[result.request_id] = result
        finally:
            manager.stop(block=True, timeout=30)
        children = [name for name in results if "__child#" in name]
        self.assertEqual(len(children), len(prompts))
        for name in children:
            parent = results[name.split("__child#")[0]]
            self.assertIsNone(results[name].error)
            self.assertEqual(results[name].generated_tokens, parent.generated_tokens, name)


if __name__ == "__main__":
    unittest.main()
