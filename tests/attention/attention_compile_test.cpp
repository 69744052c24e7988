// Every attention kernel the library can select compiles with NVRTC, without warnings, for each
// target (no GPU needed): head dims 64/128/256, causal on and off, both variants, every arch of
// device::all_archs() (the sanitize workflow compiles for sm_80 and sm_90a only: the host code
// ASan checks is the same for every arch; CMakePresets.json).
#include <gtest/gtest.h>

#include <set>

#include "spec/attention_spec.hpp"
#include "support/arch_printer.hpp"
#include "support/compile_all.hpp"

namespace intfa::attention {
namespace {

class AttentionCompile : public ::testing::TestWithParam<device::Arch> {};

// The heuristic's kernel for `arch` at every head dim, causality and variant, with K's scales at
// `k_granularity`.
std::vector<families::AnySpec> every_head_dim_causality_and_variant(
    device::Arch arch, KScaleGranularity k_granularity = KScaleGranularity::kPerToken) {
  std::vector<families::AnySpec> specs;
  for (int head_dim : {64, 128, 256}) {
    for (bool causal : {false, true}) {
      for (Variant variant : {Variant::kFullInt8, Variant::kHalfInt8}) {
        SpecRequest request;
        request.arch = arch;
        request.head_dim = head_dim;
        request.causal = causal;
        request.variant = variant;
        request.numerics.k_granularity = k_granularity;
        specs.push_back(make_spec(request, heuristic_config(request)));
      }
    }
  }
  return specs;
}

TEST_P(AttentionCompile, EveryHeadDimCausalityAndVariantCompiles) {
  const std::vector<families::AnySpec> specs = every_head_dim_causality_and_variant(GetParam());
  for (const testing::CompileFailure& failure :
       testing::compile_all(specs, render::TemplateSet::embedded())) {
    ADD_FAILURE() << failure.spec << ": " << failure.message;
  }
}

// Every numerics option of full INT8 (P encoding x P reference x V granularity x Q.K bits) and
// half INT8's Q.K bits, at one head dim (the options do not interact with it); causal with each
// P reference and V granularity, the options that change the masked inner loop.
TEST_P(AttentionCompile, EveryNumericsCombinationCompiles) {
  std::vector<families::AnySpec> specs;
  auto add = [&](Variant variant, int qk_bits, PEncoding encoding, PScaleReference reference,
                 VScaleGranularity granularity, bool causal) {
    SpecRequest request;
    request.arch = GetParam();
    request.head_dim = 128;
    request.variant = variant;
    request.qk_bits = qk_bits;
    request.numerics.p_encoding = encoding;
    request.numerics.p_scale = reference;
    request.numerics.v_granularity = granularity;
    request.causal = causal;
    specs.push_back(make_spec(request, heuristic_config(request)));
  };
  const VScaleGranularity granularities[] = {VScaleGranularity::kPerTensor,
                                             VScaleGranularity::kPerChannel,
                                             VScaleGranularity::kPerBlock};
  const PScaleReference references[] = {PScaleReference::kRunningMax, PScaleReference::kTileMax};
  for (int qk_bits : {8, 4}) {
    for (PEncoding encoding : {PEncoding::kSigned127, PEncoding::kUnsigned255}) {
      for (PScaleReference reference : references) {
        for (VScaleGranularity granularity : granularities) {
          add(Variant::kFullInt8, qk_bits, encoding, reference, granularity, false);
        }
      }
    }
    add(Variant::kHalfInt8, qk_bits, PEncoding::kUnsigned255, PScaleReference::kTileMax,
        VScaleGranularity::kPerTensor, false);
  }
  for (PScaleReference reference : references) {
    for (VScaleGranularity granularity : granularities) {
      add(Variant::kFullInt8, 8, PEncoding::kUnsigned255, reference, granularity, true);
    }
  }
  std::set<std::string> distinct;
  for (const families::AnySpec& spec : specs) distinct.insert(spec.to_string());
  EXPECT_EQ(distinct.size(), specs.size()) << "two combinations made the same kernel";
  for (const testing::CompileFailure& failure :
       testing::compile_all(specs, render::TemplateSet::embedded())) {
    ADD_FAILURE() << failure.spec << ": " << failure.message;
  }
}

// Per-block K (the softmax folds each 64-key block's scale into the exponent multiplier): every
// head dim, both variants, causal on and off, and the portable kernel's key tiles of 32, 64 and
// 128 (within a block, one block, two blocks); with its quantize kernel (quantize_row_blocks).
TEST_P(AttentionCompile, PerBlockKKernelsCompile) {
  std::vector<families::AnySpec> specs =
      every_head_dim_causality_and_variant(GetParam(), KScaleGranularity::kPerBlock);
  SpecRequest portable;
  portable.arch = GetParam();
  portable.head_dim = 64;
  portable.numerics.k_granularity = KScaleGranularity::kPerBlock;
  for (int block_n : {32, 64, 128}) specs.push_back(make_spec(portable, {64, block_n, 4, 2}));
  for (const families::AnySpec& spec : specs) {
    EXPECT_NE(spec.to_string().find(" k-scale=block"), std::string::npos) << spec.to_string();
  }
  for (const testing::CompileFailure& failure :
       testing::compile_all(specs, render::TemplateSet::embedded())) {
    ADD_FAILURE() << failure.spec << ": " << failure.message;
  }
}

// The Hopper kernel that quantizes Q itself (attention_forward_16bit's request): every head dim,
// both variants, both 16-bit types, with and without K smoothing's LSE term, causal and not. On
// the other archs the same requests are the portable kernels the other tests compile.
TEST_P(AttentionCompile, QInKernelKernelsCompile) {
  std::vector<families::AnySpec> specs;
  std::set<std::string> distinct;
  struct Case {
    int head_dim;
    Variant variant;
    DType dtype;
    bool smooth_k, causal;
  };
  for (const Case& c : {Case{64, Variant::kFullInt8, DType::kF16, true, false},
                        Case{128, Variant::kFullInt8, DType::kBF16, false, true},
                        Case{256, Variant::kFullInt8, DType::kF16, true, false},
                        Case{64, Variant::kHalfInt8, DType::kBF16, true, true},
                        Case{128, Variant::kHalfInt8, DType::kF16, false, false},
                        Case{256, Variant::kHalfInt8, DType::kF16, true, false}}) {
    AttentionProblem problem;
    problem.head_dim = c.head_dim;
    problem.variant = c.variant;
    problem.causal = c.causal;
    AttentionOptions options;
    options.smooth_k = c.smooth_k;
    const SpecRequest request = request_for(GetParam(), problem, options, c.dtype);
    const AttentionSpec spec =
        make_spec(with_q_in_kernel(request, options, c.dtype), heuristic_config(request));
    EXPECT_EQ(spec.quantizes_q, GetParam() == device::Arch::kSm90a) << spec.to_string();
    if (spec.quantizes_q && distinct.insert(spec.to_string()).second) specs.push_back(spec);
  }
  for (const testing::CompileFailure& failure :
       testing::compile_all(specs, render::TemplateSet::embedded())) {
    ADD_FAILURE() << failure.spec << ": " << failure.message;
  }
}

// Varlen kernels (one head dim: the packed addressing does not depend on it), with the numerics
// options that change what the kernel reads per sequence (per-block V scales, INT4 Q.K).
TEST_P(AttentionCompile, VarlenKernelsCompile) {
  std::vector<families::AnySpec> specs;
  auto add = [&](SpecRequest request) {
    request.arch = GetParam();
    request.head_dim = 128;
    request.varlen = true;
    specs.push_back(make_spec(request, heuristic_config(request)));
  };
  for (bool causal : {false, true}) {
    for (Variant variant : {Variant::kFullInt8, Variant::kHalfInt8}) {
      SpecRequest request;
      request.causal = causal;
      request.variant = variant;
      add(request);
    }
  }
  SpecRequest per_block_int4;
  per_block_int4.numerics.v_granularity = VScaleGranularity::kPerBlock;
  per_block_int4.qk_bits = 4;
  add(per_block_int4);
  for (const families::AnySpec& spec : specs) {
    EXPECT_NE(spec.to_string().find(" varlen"), std::string::npos) << spec.to_string();
  }
  for (const testing::CompileFailure& failure :
       testing::compile_all(specs, render::TemplateSet::embedded())) {
    ADD_FAILURE() << failure.spec << ": " << failure.message;
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, AttentionCompile, ::testing::ValuesIn(device::all_archs()),
                         [](const auto& param_info) { return device::arch_name(param_info.param); });

}  // namespace
}  // namespace intfa::attention
