"""torch.compile keeps intfa's ops: a full-graph capture of a module that calls them, on fake CUDA
tensors (shapes and dtypes only), so no GPU is needed."""
import unittest

import intfa

from support import needs_torch, torch


def intfa_ops(graph_module):
    return [str(node.target) for node in graph_module.graph.nodes
            if node.op == "call_function" and str(node.target).startswith("intfa.")]


@needs_torch
class CompiledGraphTest(unittest.TestCase):
    def capture(self, module, *shapes, dtype=None):
        from torch._subclasses.fake_tensor import FakeTensorMode
        with FakeTensorMode():
            inputs = tuple(torch.empty(shape, dtype=dtype or torch.float16, device="cuda")
                           for shape in shapes)
            # strict=True traces with dynamo, as torch.compile(fullgraph=True) does: any graph
            # break in intfa's Python layer is an error here.
            return torch.export.export(module, inputs, strict=True).graph_module

    def test_attention_is_one_node_in_a_full_graph(self):
        class Block(torch.nn.Module):
            def forward(self, q, k, v):
                return intfa.attention(q, k, v, is_causal=True, variant="half_int8") * 2

        graph = self.capture(Block(), (2, 8, 100, 64), (2, 2, 130, 64), (2, 2, 130, 64))
        self.assertEqual(intfa_ops(graph), ["intfa.attention.default"])

    def test_quantize_then_attention_int8_in_a_full_graph(self):
        class Block(torch.nn.Module):
            def forward(self, q, k, v):
                quantized = intfa.quantize(q, k, v, layout="NHD", v_granularity="channel",
                                           smooth_k=True)
                return intfa.attention_int8(*quantized[:6], layout="NHD", return_lse=True)

        graph = self.capture(Block(), (1, 77, 4, 128), (1, 300, 4, 128), (1, 300, 4, 128),
                             dtype=torch.bfloat16)
        self.assertEqual(intfa_ops(graph), ["intfa.quantize_qk.default",
                                            "intfa.quantize_qk.default",
                                            "intfa.quantize_v.default",
                                            "intfa.attention_int8.default"])


if __name__ == "__main__":
    unittest.main()
