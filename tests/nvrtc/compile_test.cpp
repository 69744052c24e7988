#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "families/any_spec.hpp"
#include "intfa/errors.hpp"
#include "nvrtc/compiler.hpp"
#include "render/render.hpp"
#include "support/temp_dir.hpp"

namespace intfa::nvrtc {
namespace {

quantize::QuantizeSpec quantize_spec(device::Arch arch, int head_dim = 128) {
  quantize::QuantizeSpec spec;
  spec.kernel = quantize::QuantizeKernel::kRows;
  spec.arch = arch;
  spec.head_dim = head_dim;
  return spec;
}

// The embedded templates with `text` appended to quantize/quantize_rows.cuh, written out and read
// back as a template directory is.
render::TemplateSet templates_with_quantize_rows_appended(const std::string& text) {
  testing::TempDir dir;
  const render::TemplateSet embedded = render::TemplateSet::embedded();
  for (const auto& [path, contents] : embedded.files()) {
    std::filesystem::create_directories((dir.path() / path).parent_path());
    std::ofstream(dir.path() / path) << contents;
  }
  std::ofstream(dir.path() / "quantize" / "quantize_rows.cuh", std::ios::app) << text;
  return render::TemplateSet::from_directory(dir.path());
}

Cubin compile_spec(const quantize::QuantizeSpec& spec, const render::TemplateSet& templates) {
  return compile(families::kernel_source(spec, templates), compile_options(spec.arch), templates);
}

TEST(Nvrtc, CompilesTheQuantizeTemplateForEveryArchWithThatArchInTheElfHeader) {
  const render::TemplateSet templates = render::TemplateSet::embedded();
  for (device::Arch arch : device::all_archs()) {
    const Cubin cubin = compile_spec(quantize_spec(arch), templates);
    EXPECT_FALSE(cubin.lowered_name.empty());
    EXPECT_NE(cubin.lowered_name.find("quantize_rows"), std::string::npos);
    EXPECT_EQ(cubin_sm_number(cubin.image), device::arch_sm_number(arch)) << device::arch_name(arch);
  }
}

TEST(Nvrtc, CompilesEveryQuantizeFamilyForEveryArchAndHeadDim) {
  const render::TemplateSet templates = render::TemplateSet::embedded();
  for (device::Arch arch : device::all_archs()) {
    for (int head_dim : {64, 128, 256}) {
      quantize::QuantizeSpec spec = quantize_spec(arch, head_dim);
      for (quantize::QuantizeKernel kernel :
           {quantize::QuantizeKernel::kChannelMean, quantize::QuantizeKernel::kVScale,
            quantize::QuantizeKernel::kV, quantize::QuantizeKernel::kKVScale}) {
        spec.kernel = kernel;
        const Cubin cubin = compile_spec(spec, templates);
        EXPECT_NE(cubin.lowered_name.find(quantize::kernel_name(kernel)), std::string::npos)
            << spec.to_string();
        EXPECT_EQ(cubin.log.find("warning"), std::string::npos) << spec.to_string() << cubin.log;
      }
      // K smoothed and rotated where its heads' decisions say (attention_forward_16bit's K with
      // the default automatic rotation); Q with the LSE term.
      spec.kernel = quantize::QuantizeKernel::kRows;
      spec.smooth_k = true;
      spec.rotate = QKRotation::kAuto;
      const Cubin smoothed = compile_spec(spec, templates);
      EXPECT_EQ(smoothed.log.find("warning"), std::string::npos)
          << spec.to_string() << smoothed.log;
      spec.smooth_k = false;
      spec.rotate = QKRotation::kOff;
      spec.q_dot_k_mean = true;
      const Cubin lse_term = compile_spec(spec, templates);
      EXPECT_EQ(lse_term.log.find("warning"), std::string::npos)
          << spec.to_string() << lse_term.log;
      // K with one scale per 64-row block, smoothed and rotated (quantize_row_blocks).
      spec.q_dot_k_mean = false;
      spec.smooth_k = true;
      spec.rotate = QKRotation::kOn;
      spec.k_granularity = kernels::KScaleGranularity::kPerBlock;
      const Cubin blocks = compile_spec(spec, templates);
      EXPECT_NE(blocks.lowered_name.find("quantize_row_blocks"), std::string::npos);
      EXPECT_EQ(blocks.log.find("warning"), std::string::npos) << spec.to_string() << blocks.log;
      spec.k_granularity = kernels::KScaleGranularity::kPerToken;
      // K's rows, smoothed and rotated head by head, with V's per-channel max pass in one launch.
      spec.kernel = quantize::QuantizeKernel::kKVScale;
      spec.rotate = QKRotation::kAuto;
      spec.v_granularity = kernels::VScaleGranularity::kPerChannel;
      const Cubin k_and_v = compile_spec(spec, templates);
      EXPECT_NE(k_and_v.lowered_name.find("quantize_k_v_scale"), std::string::npos);
      EXPECT_EQ(k_and_v.log.find("warning"), std::string::npos) << spec.to_string() << k_and_v.log;
      // K's rows and all of V in one clustered launch (run on sm_90a; it compiles everywhere).
      spec.kernel = quantize::QuantizeKernel::kKV;
      const Cubin one_launch = compile_spec(spec, templates);
      EXPECT_NE(one_launch.lowered_name.find("12quantize_k_vI"), std::string::npos)
          << one_launch.lowered_name;
      EXPECT_EQ(one_launch.log.find("warning"), std::string::npos)
          << spec.to_string() << one_launch.log;
      spec.v_granularity = kernels::VScaleGranularity::kPerTensor;
      spec.smooth_k = false;
      spec.rotate = QKRotation::kOff;
    }
  }
}

TEST(Nvrtc, CubinSmNumberRejectsBytesThatAreNotACudaElf) {
  EXPECT_FALSE(cubin_sm_number({}).has_value());
  EXPECT_FALSE(cubin_sm_number(std::vector<char>(64, 0)).has_value());
  std::vector<char> elf(64, 0);
  elf[0] = 0x7f, elf[1] = 'E', elf[2] = 'L', elf[3] = 'F';
  elf[18] = 62;  // EM_X86_64
  EXPECT_FALSE(cubin_sm_number(elf).has_value());
}

TEST(Nvrtc, AFailedCompileCarriesTheWholeLogAndTheSpec) {
  const render::TemplateSet broken =
      templates_with_quantize_rows_appended("\nnamespace intfa { this_is_not_cuda; }\n");
  const quantize::QuantizeSpec spec = quantize_spec(device::Arch::kSm80);
  try {
    compile_spec(spec, broken);
    FAIL() << "expected CompileError";
  } catch (const CompileError& error) {
    EXPECT_EQ(error.spec(), spec.to_string());
    EXPECT_NE(error.log().find("this_is_not_cuda"), std::string::npos) << error.log();
    EXPECT_NE(std::string(error.what()).find(error.log()), std::string::npos);
    EXPECT_EQ(error.status(), Status::kCompileError);
  }
}

// A compile that succeeds keeps what NVRTC said (the runtime logs it with INTFA_LOG=1: ptxas
// warns there when it serializes wgmma or spills), as text: NVRTC 13 ends a log ptxas wrote to
// with two NULs, and one dropped leaves the other to be printed.
TEST(Nvrtc, ASuccessfulCompileKeepsItsLogWithoutNuls) {
  const render::TemplateSet warned = templates_with_quantize_rows_appended(
      "\nnamespace intfa { __device__ int never_used() { int unused_local; return 0; } }\n");
  const quantize::QuantizeSpec spec = quantize_spec(device::Arch::kSm90a);
  std::vector<std::string> options = compile_options(spec.arch);
  options.emplace_back("--ptxas-options=-v");  // ptxas's own part of the log
  const Cubin cubin = compile(families::kernel_source(spec, warned), options, warned);
  EXPECT_NE(cubin.log.find("unused_local"), std::string::npos) << cubin.log;
  EXPECT_NE(cubin.log.find("ptxas"), std::string::npos) << cubin.log;
  EXPECT_EQ(cubin.log.find('\0'), std::string::npos) << cubin.log;
}

TEST(Nvrtc, OptionsAreFixedPerArchAndLineinfoFollowsTheEnvironment) {
  {
    testing::ScopedEnv lineinfo("INTFA_LINEINFO", nullptr);
    const auto options = compile_options(device::Arch::kSm89);
    EXPECT_NE(std::find(options.begin(), options.end(), "--gpu-architecture=sm_89"), options.end());
    EXPECT_EQ(std::find(options.begin(), options.end(), "-lineinfo"), options.end());
    EXPECT_EQ(options, compile_options(device::Arch::kSm89));
  }
  testing::ScopedEnv lineinfo("INTFA_LINEINFO", "1");
  const auto options = compile_options(device::Arch::kSm89);
  EXPECT_NE(std::find(options.begin(), options.end(), "-lineinfo"), options.end());
  testing::ScopedEnv bad("INTFA_LINEINFO", "maybe");
  EXPECT_THROW(compile_options(device::Arch::kSm89), InvalidArgument);
}

TEST(Nvrtc, ThreadsCompileDifferentSpecsAtOnce) {
  const render::TemplateSet templates = render::TemplateSet::embedded();
  const std::vector<quantize::QuantizeSpec> specs = {
      quantize_spec(device::Arch::kSm80, 64), quantize_spec(device::Arch::kSm86, 128),
      quantize_spec(device::Arch::kSm89, 256), quantize_spec(device::Arch::kSm90a, 64)};
  std::vector<Cubin> cubins(specs.size());
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    threads.emplace_back([&, i] { cubins[i] = compile_spec(specs[i], templates); });
  }
  for (auto& thread : threads) thread.join();
  for (std::size_t i = 0; i < specs.size(); ++i) {
    EXPECT_EQ(cubin_sm_number(cubins[i].image), device::arch_sm_number(specs[i].arch));
  }
}

TEST(Nvrtc, CompileCountCountsEveryCompilation) {
  const std::uint64_t before = compile_count();
  compile_spec(quantize_spec(device::Arch::kSm86, 64), render::TemplateSet::embedded());
  EXPECT_EQ(compile_count(), before + 1);
}

TEST(Nvrtc, WhereNvrtcAndTheHeadersCameFromIsNamedByTheirFolder) {
  // pip's layout of the CUDA 13 wheels (nvidia-cuda-nvrtc, nvidia-cuda-runtime), in a venv or a
  // system site-packages, against the toolkit's.
  const std::string site = "/v/lib/python3.12/site-packages/nvidia/cu13";
  EXPECT_EQ(library_origin(site + "/lib/libnvrtc.so.13"), "PyPI package nvidia-cuda-nvrtc");
  EXPECT_EQ(library_origin("/usr/lib/python3/dist-packages/nvidia/cu14/lib/libnvrtc.so.14"),
            "PyPI package nvidia-cuda-nvrtc");
  EXPECT_EQ(library_origin("/usr/local/cuda-13.0/lib/libnvrtc.so.13"), "CUDA toolkit");
  EXPECT_EQ(library_origin("/opt/nvidia/cuda/lib/libnvrtc.so.13"), "CUDA toolkit");
  EXPECT_EQ(library_origin("/x/nvidia/cu13/include/libnvrtc.so.13"), "CUDA toolkit");
  EXPECT_EQ(library_origin(""), "origin unknown");
  EXPECT_EQ(include_dir_origin(site + "/include"), "PyPI package nvidia-cuda-runtime");
  EXPECT_EQ(include_dir_origin(site + "/include/"), "PyPI package nvidia-cuda-runtime");
  EXPECT_EQ(include_dir_origin("/usr/local/cuda/include"), "CUDA toolkit");
  // This process's NVRTC: the file it was opened from, which exists.
  const std::string loaded = library_path();
  ASSERT_FALSE(loaded.empty());
  EXPECT_TRUE(std::filesystem::exists(loaded)) << loaded;
  EXPECT_NE(loaded.find("libnvrtc"), std::string::npos) << loaded;
}

}  // namespace
}  // namespace intfa::nvrtc
