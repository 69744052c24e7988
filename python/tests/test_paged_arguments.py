"""Argument checks of the paged cache's torch functions: each bad argument raises InvalidArgument
naming it, before anything is launched. CPU tensors reach every check but the device one, which
comes last; so these run without a GPU (they need PyTorch)."""
import unittest

import intfa

from support import needs_torch, torch


def cache_tensors(num_pages=4, heads_kv=2, page_size=16, head_dim=64, bits=8):
    layout = intfa.paged_layout(num_pages, page_size, heads_kv, head_dim, bits)
    dtypes = {"uint8": torch.uint8, "float32": torch.float32, "float16": torch.float16}
    return [torch.zeros(layout[name][0], dtype=dtypes[layout[name][1]])
            for name in ("k_data", "v_data", "k_scale", "v_scale")]


class ArgumentsCase(unittest.TestCase):
    def assert_invalid(self, field, call, *args, **kwargs):
        with self.assertRaises(intfa.InvalidArgument) as caught:
            call(*args, **kwargs)
        self.assertEqual(caught.exception.field, field, str(caught.exception))
        return caught.exception


@needs_torch
class PagedAppendArgumentsTest(ArgumentsCase):
    def setUp(self):
        self.cache = cache_tensors()
        self.k = torch.randn(5, 2, 64, dtype=torch.float16)
        self.slots = torch.arange(5, dtype=torch.int32)

    def test_valid_arguments_on_cpu_stop_at_the_device(self):
        error = self.assert_invalid("k.device", intfa.paged_append, self.k, self.k, *self.cache,
                                    self.slots)
        self.assertIn("CUDA", str(error))

    def test_int64_slot_mappings_are_accepted(self):
        self.assert_invalid("k.device", intfa.paged_append, self.k, self.k, *self.cache,
                            self.slots.long())

    def test_bad_rows(self):
        self.assert_invalid("k.dtype", intfa.paged_append, self.k.float(), self.k, *self.cache,
                            self.slots)
        self.assert_invalid("v.dtype", intfa.paged_append, self.k, self.k.bfloat16(), *self.cache,
                            self.slots)
        self.assert_invalid("k.shape", intfa.paged_append, self.k[0], self.k[0], *self.cache,
                            self.slots)
        self.assert_invalid("v.shape", intfa.paged_append, self.k, self.k[:4], *self.cache,
                            self.slots)
        other_heads = torch.randn(5, 4, 64, dtype=torch.float16)
        self.assert_invalid("k.shape", intfa.paged_append, other_heads, other_heads, *self.cache,
                            self.slots)

    def test_bad_cache_tensors(self):
        k_data, v_data, k_scale, v_scale = self.cache
        self.assert_invalid("k_data.shape", intfa.paged_append, self.k, self.k,
                            k_data[..., :48], v_data, k_scale, v_scale, self.slots)
        self.assert_invalid("k_scale.dtype", intfa.paged_append, self.k, self.k, k_data, v_data,
                            k_scale.half(), v_scale, self.slots)
        self.assert_invalid("v_scale.shape", intfa.paged_append, self.k, self.k, k_data, v_data,
                            k_scale, v_scale[:2], self.slots)
        self.assert_invalid("v_data.stride", intfa.paged_append, self.k, self.k, k_data,
                            v_data.transpose(1, 2).contiguous().transpose(1, 2), k_scale, v_scale,
                            self.slots)

    def test_bad_slots_and_offset(self):
        self.assert_invalid("slot_mapping.dtype", intfa.paged_append, self.k, self.k, *self.cache,
                            self.slots.float())
        self.assert_invalid("slot_mapping.shape", intfa.paged_append, self.k, self.k, *self.cache,
                            self.slots[:3])
        self.assert_invalid("k_offset.shape", intfa.paged_append, self.k, self.k, *self.cache,
                            self.slots, k_offset=torch.zeros(2, 32))


@needs_torch
class PagedDecodeArgumentsTest(ArgumentsCase):
    def setUp(self):
        self.cache = cache_tensors()
        self.q = torch.randn(3, 8, 64, dtype=torch.float16)
        self.table = torch.zeros(3, 4, dtype=torch.int32)
        self.lengths = torch.ones(3, dtype=torch.int32)

    def decode(self, *args, **kwargs):
        return intfa.paged_decode(*args, **kwargs)

    def test_valid_arguments_on_cpu_stop_at_the_device(self):
        self.assert_invalid("q.device", self.decode, self.q, *self.cache, self.table, self.lengths)
        q4 = torch.randn(3, 4, 8, 64, dtype=torch.bfloat16)
        self.assert_invalid("q.device", self.decode, q4, *self.cache, self.table, self.lengths,
                            causal=True, return_lse=True, num_splits=3, max_seq_len=20)

    def test_bad_queries(self):
        self.assert_invalid("q.dtype", self.decode, self.q.float(), *self.cache, self.table,
                            self.lengths)
        self.assert_invalid("q.shape", self.decode, self.q[0], *self.cache, self.table,
                            self.lengths)
        self.assert_invalid("q.shape", self.decode, torch.randn(3, 65, 8, 64).half(), *self.cache,
                            self.table, self.lengths)
        self.assert_invalid("q.shape", self.decode, torch.randn(3, 5, 64).half(), *self.cache,
                            self.table, self.lengths)  # 5 heads over 2
        self.assert_invalid("k_data.shape", self.decode, torch.randn(3, 8, 128).half(),
                            *self.cache, self.table, self.lengths)

    def test_bad_tables_lengths_and_options(self):
        self.assert_invalid("block_table.dtype", self.decode, self.q, *self.cache,
                            self.table.float(), self.lengths)
        self.assert_invalid("block_table.shape", self.decode, self.q, *self.cache, self.table[:2],
                            self.lengths)
        self.assert_invalid("seq_lens.shape", self.decode, self.q, *self.cache, self.table,
                            self.lengths[:2])
        self.assert_invalid("max_seq_len", self.decode, self.q, *self.cache, self.table,
                            self.lengths, max_seq_len=65)
        self.assert_invalid("num_splits", self.decode, self.q, *self.cache, self.table,
                            self.lengths, num_splits=0)
        self.assert_invalid("sm_scale", self.decode, self.q, *self.cache, self.table,
                            self.lengths, sm_scale=-1.0)
        self.assert_invalid("causal", self.decode, self.q, *self.cache, self.table, self.lengths,
                            causal=1)
        self.assert_invalid("config", self.decode, self.q, *self.cache, self.table, self.lengths,
                            config=(16, 64))


@needs_torch
class PagedPrefillArgumentsTest(ArgumentsCase):
    def setUp(self):
        self.cache = cache_tensors()
        self.q = torch.randn(10, 8, 64, dtype=torch.float16)  # 3 sequences: 4, 1 and 5 queries
        self.starts = torch.tensor([0, 4, 5, 10], dtype=torch.int32)
        self.table = torch.zeros(3, 4, dtype=torch.int32)
        self.lengths = torch.tensor([20, 1, 5], dtype=torch.int32)

    def prefill(self, *args, **kwargs):
        return intfa.paged_prefill(*args, **kwargs)

    def test_valid_arguments_on_cpu_stop_at_the_device(self):
        self.assert_invalid("q.device", self.prefill, self.q, *self.cache, self.starts,
                            self.table, self.lengths)
        self.assert_invalid("q.device", self.prefill, self.q.bfloat16(), *self.cache,
                            self.starts.long(), self.table, self.lengths, max_q_len=5,
                            max_seq_len=20, kv_tokens=26, causal=False, return_lse=True)

    def test_bad_queries(self):
        self.assert_invalid("q.dtype", self.prefill, self.q.float(), *self.cache, self.starts,
                            self.table, self.lengths)
        self.assert_invalid("q.shape", self.prefill, self.q[0], *self.cache, self.starts,
                            self.table, self.lengths)
        self.assert_invalid("q.shape", self.prefill, torch.randn(10, 5, 64).half(), *self.cache,
                            self.starts, self.table, self.lengths)  # 5 heads over 2
        self.assert_invalid("q.stride", self.prefill, self.q.transpose(1, 2).contiguous()
                            .transpose(1, 2), *self.cache, self.starts, self.table, self.lengths)
        self.assert_invalid("k_data.shape", self.prefill, torch.randn(10, 8, 128).half(),
                            *self.cache, self.starts, self.table, self.lengths)

    def test_bad_offsets_tables_lengths_and_bounds(self):
        self.assert_invalid("query_start_loc.dtype", self.prefill, self.q, *self.cache,
                            self.starts.float(), self.table, self.lengths)
        self.assert_invalid("query_start_loc.shape", self.prefill, self.q, *self.cache,
                            self.starts[:1], self.table, self.lengths)
        self.assert_invalid("block_table.shape", self.prefill, self.q, *self.cache, self.starts,
                            self.table[:2], self.lengths)
        self.assert_invalid("seq_lens.shape", self.prefill, self.q, *self.cache, self.starts,
                            self.table, self.lengths[:2])
        self.assert_invalid("max_seq_len", self.prefill, self.q, *self.cache, self.starts,
                            self.table, self.lengths, max_seq_len=65)
        self.assert_invalid("max_q_len", self.prefill, self.q, *self.cache, self.starts,
                            self.table, self.lengths, max_q_len=11)
        self.assert_invalid("kv_tokens", self.prefill, self.q, *self.cache, self.starts,
                            self.table, self.lengths, max_seq_len=20, kv_tokens=19)
        self.assert_invalid("sm_scale", self.prefill, self.q, *self.cache, self.starts,
                            self.table, self.lengths, sm_scale=0.0)
        self.assert_invalid("causal", self.prefill, self.q, *self.cache, self.starts, self.table,
                            self.lengths, causal=1)


@needs_torch
class MergeStatesArgumentsTest(ArgumentsCase):
    def setUp(self):
        self.v = torch.randn(7, 4, 128, dtype=torch.float16)
        self.s = torch.randn(7, 4)

    def test_valid_arguments_on_cpu_stop_at_the_device(self):
        self.assert_invalid("v_a.device", intfa.merge_states, self.v, self.s, self.v, self.s)
        self.assert_invalid("v_a.device", intfa.merge_states, self.v, self.s, self.v, self.s,
                            out=self.v, out_lse=self.s)

    def test_bad_states(self):
        self.assert_invalid("v_b.dtype", intfa.merge_states, self.v, self.s, self.v.bfloat16(),
                            self.s)
        self.assert_invalid("v_b.shape", intfa.merge_states, self.v, self.s, self.v[:3], self.s)
        self.assert_invalid("s_a.dtype", intfa.merge_states, self.v, self.s.half(), self.v, self.s)
        self.assert_invalid("s_b.shape", intfa.merge_states, self.v, self.s, self.v, self.s[:3])
        self.assert_invalid("v_a.shape", intfa.merge_states, self.v[..., :96], self.s,
                            self.v[..., :96], self.s)
        self.assert_invalid("out_lse", intfa.merge_states, self.v, self.s, self.v, self.s,
                            out=self.v)


if __name__ == "__main__":
    unittest.main()


@needs_torch
class PagedOpSchemaTest(unittest.TestCase):
    """The ops that write into their arguments declare it, so that torch.compile and functional
    transforms know the cache and the merged state change in place."""

    def written(self, op):
        return {argument.name for argument in op.default._schema.arguments
                if argument.alias_info is not None and argument.alias_info.is_write}

    def test_the_ops_declare_what_they_write(self):
        intfa.paged_append  # (the ops are registered when intfa._paged is imported)
        self.assertEqual(self.written(torch.ops.intfa.paged_append),
                         {"k_data", "v_data", "k_scale", "v_scale"})
        self.assertEqual(self.written(torch.ops.intfa.merge_states_into), {"out", "out_lse"})
        self.assertEqual(self.written(torch.ops.intfa.paged_decode), set())
        self.assertEqual(self.written(torch.ops.intfa.paged_prefill), set())
        self.assertEqual(self.written(torch.ops.intfa.attention), set())
