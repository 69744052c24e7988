// The kernel templates are real CUDA: each header, and the unit rendered for each family, compiles
// with nvcc on its own (skipped where nvcc is not installed).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "families/any_spec.hpp"
#include "render/render.hpp"
#include "support/temp_dir.hpp"

namespace intfa::render {
namespace {

using families::AnySpec;
using families::render;

#ifdef INTFA_TEST_NVCC
int nvcc(const std::string& arguments, const std::filesystem::path& log) {
  const std::string command = std::string(INTFA_TEST_NVCC) + " -std=c++17 -I" +
                              INTFA_TEST_TEMPLATE_DIR + " " + arguments + " > " + log.string() +
                              " 2>&1";
  return std::system(command.c_str());
}

std::string read(const std::filesystem::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
#endif

TEST(TemplatesWithNvcc, EveryHeaderCompilesOnItsOwn) {
#ifndef INTFA_TEST_NVCC
  GTEST_SKIP() << "nvcc was not found when the tests were configured";
#else
  testing::TempDir dir;
  const TemplateSet embedded = TemplateSet::embedded();
  for (const auto& [path, contents] : embedded.files()) {
    const auto unit = dir.path() / "unit.cu";
    std::ofstream(unit) << "#include \"" << path << "\"\n";
    const int status = nvcc("-arch=sm_80 -c " + unit.string() + " -o " +
                                (dir.path() / "unit.o").string(),
                            dir.path() / "log.txt");
    EXPECT_EQ(status, 0) << path << ":\n" << read(dir.path() / "log.txt");
  }
#endif
}

TEST(TemplatesWithNvcc, RenderedUnitsOfEveryFamilyCompile) {
#ifndef INTFA_TEST_NVCC
  GTEST_SKIP() << "nvcc was not found when the tests were configured";
#else
  testing::TempDir dir;
  std::vector<AnySpec> specs;
  quantize::QuantizeSpec rows;
  rows.kernel = quantize::QuantizeKernel::kRows;
  rows.head_dim = 128;
  specs.push_back(rows);
  quantize::QuantizeSpec rotated_q = rows;  // the rotation's shuffles and Q's LSE term
  rotated_q.rotate = QKRotation::kAuto;
  rotated_q.q_dot_k_mean = true;
  specs.push_back(rotated_q);
  quantize::QuantizeSpec mean = rows;
  mean.kernel = quantize::QuantizeKernel::kChannelMean;
  specs.push_back(mean);
  quantize::QuantizeSpec v = rows;
  v.kernel = quantize::QuantizeKernel::kV;
  specs.push_back(v);
  v.kernel = quantize::QuantizeKernel::kVScale;
  specs.push_back(v);
  quantize::QuantizeSpec k_and_v = rows;  // K smoothed, with V's per-channel max pass
  k_and_v.kernel = quantize::QuantizeKernel::kKVScale;
  k_and_v.smooth_k = true;
  k_and_v.v_granularity = kernels::VScaleGranularity::kPerChannel;
  specs.push_back(k_and_v);
  k_and_v.kernel = quantize::QuantizeKernel::kKV;  // the same, V read once (clusters)
  specs.push_back(k_and_v);
  attention::AttentionSpec attention;
  attention.path = KernelPath::kMmaSync;
  attention.head_dim = 64;
  attention.block_m = 64;
  attention.block_n = 64;
  attention.warps = 4;
  attention.stages = 2;
  specs.push_back(attention);
  paged::PagedSpec append;
  append.kernel = paged::PagedKernel::kAppend;
  append.head_dim = 128;
  specs.push_back(append);
  paged::PagedSpec decode = append;
  decode.kernel = paged::PagedKernel::kDecode;
  decode.bits = 4;
  decode.config = PagedDecodeConfig{16, 64, 3};  // four warps: the decode kernel's own
  specs.push_back(decode);
  paged::PagedSpec merge = append;
  merge.kernel = paged::PagedKernel::kMergeStates;
  merge.input_type = kernels::ElementType::kF32;
  specs.push_back(merge);
  for (const AnySpec& spec : specs) {
    const RenderedUnit unit = render(spec, TemplateSet::embedded());
    const auto file = dir.path() / unit.file_name;
    std::ofstream(file) << unit.source;
    const int status = nvcc("-gencode=arch=compute_80,code=sm_80 -cubin " + file.string() +
                                " -o " + (dir.path() / "unit.cubin").string(),
                            dir.path() / "log.txt");
    EXPECT_EQ(status, 0) << spec.to_string() << ":\n" << read(dir.path() / "log.txt");
  }
#endif
}

}  // namespace
}  // namespace intfa::render
