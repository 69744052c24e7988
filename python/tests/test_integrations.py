"""The integrations without a GPU: ``patch_sdpa``, the transformers attention function and the
diffusers backend function keep their client's contract (SDPA's top-left causal mask, GQA, the
layout, masks) and send what intfa does not serve to the client's own SDPA call, counted. Where a
test needs intfa's own path, the C++ plan is the float64 stand-in of stand_in.py and CPU tensors
stand for CUDA ones; elsewhere CPU tensors make every call a fallback ("device")."""
import importlib.util
import inspect
import unittest
from types import SimpleNamespace

import intfa

from stand_in import reference, stand_in_kernels
from support import needs_torch, torch
from test_attention_layer import FallbackCase, halves, max_error

needs_transformers = unittest.skipIf(importlib.util.find_spec("transformers") is None,
                                     "needs transformers")
needs_diffusers = unittest.skipIf(importlib.util.find_spec("diffusers") is None,
                                  "needs diffusers")


def sdpa():
    return torch.nn.functional.scaled_dot_product_attention


@needs_torch
class SettingsTest(unittest.TestCase):
    """Options are checked when an integration is installed, naming the option."""

    def assert_invalid(self, field, **settings):
        with self.assertRaises(intfa.InvalidArgument) as caught:
            intfa.patch_sdpa(**settings)
        self.assertEqual(caught.exception.field, field, str(caught.exception))
        self.assertIs(sdpa(), torch._C._nn.scaled_dot_product_attention)  # nothing installed

    def test_bad_options_are_refused_at_installation(self):
        self.assert_invalid("varient", varient="half_int8")
        self.assert_invalid("variant", variant="int4")
        self.assert_invalid("p_scale", p_scale="global")
        self.assert_invalid("fallback", fallback="raise")
        self.assert_invalid("decode_seq_q", decode_seq_q=-1)
        self.assert_invalid("decode_seq_q", decode_seq_q=True)

    def test_falsy_options_are_refused_not_read_as_the_default(self):
        # Issue 42, item 9: only None is the default; 0 is per-tensor V to C.
        for name, value in (("v_granularity", 0), ("p_encoding", 0), ("p_scale", False),
                            ("k_granularity", ""), ("v_granularity", []), ("variant", ""),
                            ("smooth_k", 0), ("rotate", "no"), ("check", "yes")):
            with self.subTest(name=name, value=value):
                self.assert_invalid(name, **{name: value})

    def test_the_options_are_intfa_attentions(self):
        from intfa.integrations import _client
        for name in ("variant", "v_granularity", "smooth_k", "p_encoding", "p_scale", "check"):
            self.assertIn(name, _client.OPTION_NAMES)
        for name in ("layout", "out", "return_lse", "fallback", "sm_scale"):
            self.assertNotIn(name, _client.OPTION_NAMES)


@needs_torch
class PatchSdpaTest(FallbackCase):
    def test_a_context_manager_replaces_the_function_and_restores_it(self):
        original = sdpa()
        with intfa.patch_sdpa() as patch:
            self.assertIs(sdpa(), patch.function)
            self.assertIsNot(sdpa(), original)
            self.assertEqual(list(inspect.signature(sdpa()).parameters),
                             ["query", "key", "value", "attn_mask", "dropout_p", "is_causal",
                              "scale", "enable_gqa"])
        self.assertIs(sdpa(), original)

    def test_a_plain_call_lasts_until_undo(self):
        original = sdpa()
        patch = intfa.patch_sdpa()
        self.addCleanup(patch.undo)
        self.assertIs(sdpa(), patch.function)
        patch.undo()
        patch.undo()
        self.assertIs(sdpa(), original)

    def test_patches_undo_last_in_first_out(self):
        original = sdpa()
        outer = intfa.patch_sdpa()
        inner = intfa.patch_sdpa(variant="half_int8")
        with self.assertRaises(intfa.InvalidArgument):
            outer.undo()
        self.assertIs(inner.previous, outer.function)
        inner.undo()
        outer.undo()
        self.assertIs(sdpa(), original)

    def test_calls_intfa_does_not_serve_give_sdpas_own_results(self):
        original = sdpa()
        q, k, v = (halves(2, 4, 16, 64, seed=seed) for seed in range(3))
        mask = torch.rand(16, 16, generator=torch.Generator().manual_seed(5)) > 0.5
        calls = [((q, k, v), {}), ((q, k, v), dict(is_causal=True)),
                 ((q, k, v), dict(attn_mask=mask)), ((q[0], k[0], v[0]), dict(scale=0.3)),
                 ((q, k[:, :2], v[:, :2]), dict(enable_gqa=True))]
        with intfa.patch_sdpa():
            for tensors, options in calls:
                self.assertTrue(torch.equal(sdpa()(*tensors, **options),
                                            original(*tensors, **options)), options)
        self.assertEqual(intfa.fallback_stats(), {"device": 4, "attn_mask": 1})

    def test_gqa_without_enable_gqa_is_sdpas_own_error(self):
        q, kv = halves(1, 4, 8, 64), halves(1, 2, 8, 64)
        with self.assertRaises(RuntimeError) as expected:
            sdpa()(q, kv, kv)
        with intfa.patch_sdpa():
            with self.assertRaises(RuntimeError) as caught:
                sdpa()(q, kv, kv)
        self.assertEqual(str(caught.exception), str(expected.exception))
        self.assertEqual(intfa.fallback_stats(), {})

    def test_served_calls_keep_sdpas_top_left_causal_mask(self):
        q = halves(1, 4, 20, 64)
        k, v = halves(1, 4, 50, 64, seed=1), halves(1, 4, 50, 64, seed=2)
        with stand_in_kernels() as plans, intfa.patch_sdpa():
            fewer_queries = sdpa()(q, k, v, is_causal=True)
            more_queries = sdpa()(k, q, q, is_causal=True)
        # Top-left: query i sees keys 0..i, so only the first 20 keys reach the kernel.
        self.assertLess(max_error(fewer_queries, reference(q, k, v, True, top_left=True)[0]),
                        2e-3)
        self.assertEqual([plan.views[1][0] for plan in plans], [(1, 4, 20, 64)])
        self.assertTrue(plans[0].is_causal)
        # More queries than keys: intfa's mask would differ, so SDPA runs.
        self.assertLess(max_error(more_queries, reference(k, q, q, True, top_left=True)[0]),
                        2e-3)
        self.assertEqual(intfa.fallback_stats(), {"causal_alignment": 1})

    def test_served_calls_take_three_dimensions_gqa_and_the_scale(self):
        q, k, v = halves(4, 20, 80), halves(2, 20, 80, seed=1), halves(2, 20, 80, seed=2)
        with stand_in_kernels() as plans, intfa.patch_sdpa():
            out = sdpa()(q, k, v, scale=0.2, enable_gqa=True)
        self.assertEqual(out.shape, q.shape)
        expected = reference(q[None], k[None], v[None], scale=0.2)[0][0]
        self.assertLess(max_error(out, expected), 2e-3)
        self.assertEqual(plans[-1].head_dim, 80)  # the C++ call serves it with the d=128 kernel
        self.assertEqual(intfa.fallback_stats(), {})

    def test_decode_shaped_calls_go_to_sdpa_unless_decode_seq_q_is_0(self):
        q, kv = halves(1, 4, 2, 64), halves(1, 4, 40, 64, seed=1)
        with stand_in_kernels() as plans:
            with intfa.patch_sdpa():
                routed = sdpa()(q, kv, kv)
            self.assertEqual(plans, [])
            with intfa.patch_sdpa(decode_seq_q=0):
                served = sdpa()(q, kv, kv)
            self.assertEqual(len(plans), 1)
        for out in (routed, served):
            self.assertLess(max_error(out, reference(q, kv, kv)[0]), 2e-3)
        self.assertEqual(intfa.fallback_stats(), {"decode": 1})

    def test_the_options_reach_the_kernel(self):
        q = halves(1, 2, 16, 64)
        with stand_in_kernels() as plans, intfa.patch_sdpa(variant="half_int8", smooth_k=True,
                                                            p_scale="running"):
            sdpa()(q, q, q)
        self.assertEqual(plans[-1].variant, "half_int8")
        self.assertTrue(plans[-1].smooth_k)
        self.assertEqual(plans[-1].numerics["p_scale"], "running")

    def test_policy_error_raises_instead_of_falling_back(self):
        q = halves(1, 2, 16, 64)
        with intfa.patch_sdpa(fallback="error"):
            with self.assertRaises(intfa.Unsupported):
                sdpa()(q, q, q, attn_mask=torch.ones(16, 16, dtype=torch.bool))
            with self.assertRaises(intfa.InvalidArgument):
                sdpa()(q, q, q)  # CPU tensors
            with self.assertRaises(intfa.Unsupported):
                sdpa()(q, q[:, :, :8], q[:, :, :8], is_causal=True)  # intfa's alignment differs


@needs_torch
class DiffusersFunctionTest(FallbackCase):
    """The backend function through its documented signature: [B, N, H, D] tensors."""

    def backend(self, **settings):
        from intfa.integrations import diffusers
        return diffusers.backend(**settings)

    def test_it_has_the_dispatchers_argument_names(self):
        self.assertEqual(list(inspect.signature(self.backend()).parameters),
                         ["query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale",
                          "enable_gqa", "return_lse", "_parallel_config"])

    def test_served_call_with_the_lse(self):
        q, k, v = halves(2, 50, 4, 72), halves(2, 70, 2, 72, seed=1), halves(2, 70, 2, 72, seed=2)
        with stand_in_kernels():
            out, lse = self.backend()(q, k, v, enable_gqa=True, return_lse=True)
        expected, expected_lse = reference(q, k, v, layout="NHD")
        self.assertEqual((out.shape, tuple(lse.shape)), (q.shape, (2, 4, 50)))
        self.assertLess(max_error(out, expected), 2e-3)
        self.assertLess(max_error(lse, expected_lse), 1e-4)

    def test_a_key_padding_mask_runs_sdpa_as_the_native_backend(self):
        q, k, v = (halves(2, 12, 2, 64, seed=seed) for seed in range(3))
        mask = torch.ones(2, 12, dtype=torch.bool)
        mask[1, 7:] = False
        with stand_in_kernels():
            out = self.backend()(q, k, v, attn_mask=mask)
        permuted = [x.permute(0, 2, 1, 3) for x in (q, k, v)]
        expected = torch._C._nn.scaled_dot_product_attention(
            *permuted, attn_mask=mask[:, None, None, :]).permute(0, 2, 1, 3)
        self.assertLess(max_error(out, expected), 1e-3)
        self.assertEqual(intfa.fallback_stats(), {"attn_mask": 1})

    def test_top_left_causal_as_the_native_backend(self):
        q, k, v = halves(1, 6, 2, 64), halves(1, 9, 2, 64, seed=1), halves(1, 9, 2, 64, seed=2)
        with stand_in_kernels():
            out = self.backend()(q, k, v, is_causal=True)
        self.assertLess(max_error(out, reference(q, k, v, True, layout="NHD", top_left=True)[0]),
                        2e-3)

    def test_a_parallel_config_without_context_parallelism_is_a_local_call(self):
        # Tensor parallelism only, or context parallelism over one rank: the call is local.
        q = halves(1, 8, 2, 64)
        for config in (SimpleNamespace(context_parallel_config=None),
                       SimpleNamespace(context_parallel_config=SimpleNamespace(
                           ring_degree=1, ulysses_degree=1))):
            with stand_in_kernels() as plans:
                out = self.backend()(q, q, q, _parallel_config=config)
            self.assertEqual(len(plans), 1)
            self.assertLess(max_error(out, reference(q, q, q, layout="NHD")[0]), 2e-3)

    def test_context_parallel_calls_intfa_does_not_serve_go_to_the_replaced_backend(self):
        # What intfa.distributed does not take: masks, causal calls (diffusers' shards are not
        # zig-zag), uneven shards, FP32, head dims the quantize kernels lack, inputs that need
        # gradients, CPU tensors; counted, and run by the function that replaced backend's
        # (raising Unsupported where there is none).
        q = halves(1, 8, 2, 64)
        mask = torch.ones(1, 8, dtype=torch.bool)
        ring = SimpleNamespace(ring_degree=2, ulysses_degree=1, ring_anything=False,
                               ulysses_anything=False)
        uneven = SimpleNamespace(**dict(vars(ring), ring_anything=True))
        cases = [("attn_mask", dict(attn_mask=mask), ring), ("context_parallel",
                                                             dict(is_causal=True), ring),
                 ("context_parallel", {}, uneven), ("dtype", dict(inputs=q.float()), ring),
                 ("head_dim", dict(inputs=halves(1, 8, 2, 72)), ring),
                 ("autograd", dict(inputs=q.clone().requires_grad_()), ring), ("device", {}, ring)]
        for reason, arguments, config in cases:
            with self.subTest(reason=reason, arguments=arguments):
                intfa.reset_fallback_stats()
                received = []
                arguments = dict(arguments)
                x = arguments.pop("inputs", q)
                backend = self.backend(context_parallel=lambda **call: received.append(call))
                backend(x, x, x, _parallel_config=SimpleNamespace(context_parallel_config=config),
                        **arguments)
                self.assertEqual(len(received), 1)
                self.assertIs(received[0]["_parallel_config"].context_parallel_config, config)
                self.assertEqual(intfa.fallback_stats(), {reason: 1})
                with self.assertRaises(intfa.Unsupported):
                    self.backend()(x, x, x, _parallel_config=SimpleNamespace(
                        context_parallel_config=config), **arguments)


@needs_torch
@needs_diffusers
class DiffusersRegistrationTest(FallbackCase):
    def test_register_replaces_a_backend_until_undone(self):
        from diffusers.models import attention_dispatch as dispatch
        from intfa.integrations import diffusers as intfa_diffusers
        native = dispatch._AttentionBackendRegistry._backends[dispatch.AttentionBackendName.NATIVE]
        q = halves(1, 8, 2, 64)
        with stand_in_kernels() as plans:
            with intfa_diffusers.register(variant="half_int8") as registration:
                out = dispatch.dispatch_attention_fn(q, q, q)
                self.assertIs(registration.previous, native)
            self.assertEqual(plans[-1].variant, "half_int8")
            self.assertIs(dispatch._AttentionBackendRegistry._backends[
                dispatch.AttentionBackendName.NATIVE], native)
        self.assertLess(max_error(out, reference(q, q, q, layout="NHD")[0]), 2e-3)

    def test_an_unknown_backend_is_refused_naming_it(self):
        from intfa.integrations import diffusers as intfa_diffusers
        with self.assertRaises(intfa.InvalidArgument) as caught:
            intfa_diffusers.register("intfa")
        self.assertEqual(caught.exception.field, "name")


def tiny_llama(model_type="llama", dtype=None, **changes):
    """A randomly initialised tiny causal LM (no weights downloaded): Llama- or Qwen2-style, GQA
    4/2, head dim 64 (80 for Qwen2: a head dim between the kernels')."""
    import transformers
    common = dict(vocab_size=256, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)
    if model_type == "qwen2":
        config = transformers.Qwen2Config(**dict(common, hidden_size=320, **changes))
        model = transformers.Qwen2ForCausalLM(config)
    else:
        config = transformers.LlamaConfig(**dict(common, **changes))
        model = transformers.LlamaForCausalLM(config)
    return model.to(dtype or torch.float16).eval()


def set_attention(model, name):
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation(name)
    else:  # older transformers
        model.config._attn_implementation = name


@needs_torch
@needs_transformers
class TransformersTest(FallbackCase):
    def setUp(self):
        super().setUp()
        from intfa.integrations import transformers as intfa_transformers
        self.name = intfa_transformers.register()
        torch.manual_seed(0)

    def test_register_adds_the_attention_and_its_mask_function(self):
        from transformers import AttentionInterface, AttentionMaskInterface
        from transformers.masking_utils import sdpa_mask
        self.assertIn("intfa", AttentionInterface._global_mapping)
        self.assertIs(AttentionMaskInterface._global_mapping["intfa"], sdpa_mask)
        with self.assertRaises(intfa.InvalidArgument) as caught:
            from intfa.integrations import transformers as intfa_transformers
            intfa_transformers.register("")
        self.assertEqual(caught.exception.field, "name")

    def logits(self, model, name, input_ids, **inputs):
        set_attention(model, name)
        with torch.no_grad():
            return model(input_ids, **inputs).logits.float()

    def test_prefill_on_intfa_matches_sdpa(self):
        # Qwen2's head dim of 80 reaches the plan as it is (the C++ call runs the d=128 kernels).
        for model_type, head_dim in (("llama", 64), ("qwen2", 80)):
            model = tiny_llama(model_type)
            input_ids = torch.randint(0, 256, (2, 24))
            with stand_in_kernels() as plans:
                served = self.logits(model, "intfa", input_ids)
            expected = self.logits(model, "sdpa", input_ids)
            self.assertEqual(len(plans), 1, model_type)  # one signature, both layers
            self.assertTrue(plans[-1].is_causal)
            self.assertEqual(plans[-1].head_dim, head_dim)
            self.assertEqual(plans[-1].views[1][0][1], 2)  # two KV heads: GQA in the kernel
            error = ((served - expected).norm() / expected.norm()).item()
            self.assertLess(error, 2e-3, model_type)
            self.assertEqual(intfa.fallback_stats(), {})

    def test_a_padding_mask_runs_transformers_sdpa_path(self):
        model = tiny_llama()
        input_ids = torch.randint(0, 256, (2, 12))
        attention_mask = torch.ones(2, 12, dtype=torch.long)
        attention_mask[1, :5] = 0  # left padding
        with stand_in_kernels() as plans:
            served = self.logits(model, "intfa", input_ids, attention_mask=attention_mask)
        expected = self.logits(model, "sdpa", input_ids, attention_mask=attention_mask)
        self.assertEqual(plans, [])
        self.assertTrue(torch.equal(served, expected))
        self.assertEqual(intfa.fallback_stats(), {"attn_mask": 2})

    def test_generate_decodes_on_sdpa_and_prefills_on_intfa(self):
        model = tiny_llama()
        input_ids = torch.randint(0, 256, (1, 20))
        set_attention(model, "intfa")
        with stand_in_kernels() as plans, torch.no_grad():
            tokens = model.generate(input_ids, max_new_tokens=4, do_sample=False)
        self.assertEqual(tokens.shape, (1, 24))
        self.assertEqual(len(plans), 1)
        self.assertEqual(intfa.fallback_stats(), {"decode": 2 * 3})  # 2 layers, 3 decode steps


if __name__ == "__main__":
    unittest.main()
