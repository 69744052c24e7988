// Every template of the paged KV-cache family compiles with NVRTC, without warnings, for every
// target of device::all_archs() (no GPU needed): the append, the decode in each of its shapes
// (INT8 and INT4, every head dim, FP16 and BF16, each row tiling, 128-token and 4-stage
// pipelines), the merge of FP32 and 16-bit states and paged prefill's gather (INT8 and INT4). A
// few kernels per arch keep CI short; the sanitize workflow compiles for sm_80 and sm_90a only
// (CMakePresets.json).
#include <gtest/gtest.h>

#include <set>

#include "families/paged_family.hpp"
#include "support/arch_printer.hpp"
#include "support/compile_all.hpp"

namespace intfa::paged {
namespace {

using kernels::ElementType;

std::vector<families::AnySpec> one_of_each(device::Arch arch) {
  return {
      append_spec(arch, 128, 8, ElementType::kF16),
      append_spec(arch, 64, 4, ElementType::kBF16),
      append_spec(arch, 256, 4, ElementType::kF16),
      decode_spec(arch, 128, 8, ElementType::kF16, ElementType::kF16, {16, 64, 3}),
      decode_spec(arch, 128, 4, ElementType::kBF16, ElementType::kBF16, {64, 64, 3}),
      decode_spec(arch, 64, 4, ElementType::kF16, ElementType::kBF16, {32, 128, 4}),
      decode_spec(arch, 256, 8, ElementType::kBF16, ElementType::kF16, {32, 64, 2}),
      decode_spec(arch, 256, 4, ElementType::kF16, ElementType::kF16, {16, 64, 2}),
      merge_spec(arch, 128, ElementType::kF32, ElementType::kF16),
      merge_spec(arch, 64, ElementType::kBF16, ElementType::kBF16),
      gather_spec(arch, 128, 8, ElementType::kF16),
      gather_spec(arch, 64, 4, ElementType::kBF16),
      gather_spec(arch, 256, 4, ElementType::kF16),
  };
}

class PagedCompile : public ::testing::TestWithParam<device::Arch> {};

TEST_P(PagedCompile, EveryTemplateCompilesWithoutWarnings) {
  const std::vector<families::AnySpec> specs = one_of_each(GetParam());
  std::set<std::string> distinct;
  for (const families::AnySpec& spec : specs) distinct.insert(spec.to_string());
  EXPECT_EQ(distinct.size(), specs.size()) << "two specs describe themselves alike";
  for (const testing::CompileFailure& failure :
       testing::compile_all(specs, render::TemplateSet::embedded())) {
    ADD_FAILURE() << failure.spec << ": " << failure.message;
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, PagedCompile, ::testing::ValuesIn(device::all_archs()),
                         [](const ::testing::TestParamInfo<device::Arch>& param) {
                           return device::arch_name(param.param);
                         });

// What `intfa precompile --paged-bits` and intfa::precompile_paged compile: every decode config
// of the heuristic fits the shared memory of every arch, at every head dim and both widths, and
// each kernel is listed once.
TEST(PagedCompile, TheAheadOfTimeListFitsEveryArch) {
  for (device::Arch arch : device::all_archs()) {
    for (int head_dim : {64, 128, 256}) {
      for (int bits : {8, 4}) {
        const std::vector<PagedSpec> specs = family_specs(arch, head_dim, bits, DType::kBF16);
        std::set<std::string> distinct;
        for (const PagedSpec& spec : specs) {
          distinct.insert(spec.to_string());
          if (spec.kernel == PagedKernel::kDecode) {
            EXPECT_NO_THROW(check_decode_config(spec, device::default_max_shared_bytes(arch)))
                << spec.to_string();
          }
        }
        EXPECT_EQ(distinct.size(), specs.size());
      }
    }
  }
}

}  // namespace
}  // namespace intfa::paged
