// Every tile config the tuner may try compiles for sm_90a (without a GPU), without warnings, for
// both variants and each head dim: a config the tuner can reach must never fail at run time.
#include <gtest/gtest.h>

#include "spec/attention_spec.hpp"
#include "support/compile_all.hpp"

namespace intfa::attention {
namespace {

TEST(AttentionConfigCompile, EveryCandidateConfigCompiles) {
  std::vector<families::AnySpec> specs;
  for (int head_dim : {64, 128, 256}) {
    for (Variant variant : {Variant::kFullInt8, Variant::kHalfInt8}) {
      SpecRequest request;
      request.arch = device::Arch::kSm90a;
      request.head_dim = head_dim;
      request.variant = variant;
      for (const KernelConfig& config : candidate_configs(request)) {
        specs.push_back(make_spec(request, config));
      }
    }
  }
  for (const testing::CompileFailure& failure :
       testing::compile_all(specs, render::TemplateSet::active())) {
    ADD_FAILURE() << failure.spec << ": " << failure.message;
  }
}

}  // namespace
}  // namespace intfa::attention
