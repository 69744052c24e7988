// Programmatic dependent launch: on sm_90 and later intfa launches a kernel so that it may run
// while its predecessor on the stream still writes (src/launch/kernel_runtime.hpp), which is safe
// only for kernels that wait first (templates/common/grid_dependency.cuh).
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <string>

#include "families/any_spec.hpp"
#include "launch/kernel_runtime.hpp"
#include "render/embedded_templates.hpp"
#include "render/render.hpp"
#include "render/template_set.hpp"
#include "support/temp_dir.hpp"

namespace intfa::render {
namespace {

using families::render;
using quantize::QuantizeKernel;
using quantize::QuantizeSpec;

std::string without_comments(const std::string& text) {
  return std::regex_replace(text, std::regex(R"(//[^\n]*)"), "");
}

// Every block of every kernel waits before anything else, unconditionally: a grid completes
// only after all its blocks have waited, so each kernel's completion implies its predecessors'.
TEST(KernelTemplates, EveryKernelWaitsForThePreviousGridFirst) {
  const std::regex kernel(R"(__global__\s)");
  const std::regex prologue(
      R"(^\{\s*wait_for_previous_grid\(\);\s*allow_next_grid_to_launch\(\);)");
  int kernels = 0;
  for (const EmbeddedFile& file : embedded_template_files()) {
    const std::string text = without_comments(std::string(file.data, file.size));
    for (auto it = std::sregex_iterator(text.begin(), text.end(), kernel);
         it != std::sregex_iterator(); ++it) {
      const std::size_t at = static_cast<std::size_t>(it->position());
      // The body starts at the first brace: launch bounds and parameters use parentheses.
      const std::size_t body = text.find('{', at);
      ASSERT_NE(body, std::string::npos) << file.path;
      ++kernels;
      EXPECT_TRUE(std::regex_search(text.substr(body, 200), prologue))
          << file.path << ": the kernel at " << text.substr(at, 120)
          << "... does not begin with wait_for_previous_grid(); allow_next_grid_to_launch();";
    }
  }
  // attention (2), decode (3), quantize (6): a scan that finds fewer looks in the wrong place.
  EXPECT_GE(kernels, 11);
}

QuantizeSpec quantize_rows_spec() {
  QuantizeSpec spec;
  spec.kernel = QuantizeKernel::kRows;
  spec.head_dim = 128;
  return spec;
}

TEST(ProgrammaticLaunch, OnlyKernelsThatWaitForThePreviousGridLaunchEarly) {
  EXPECT_TRUE(
      launch::waits_for_previous_grid(render(quantize_rows_spec(), TemplateSet::embedded())));
  // A template tree from before the prologue (INTFA_TEMPLATE_DIR): quantize_rows.cuh without it.
  testing::TempDir root;
  for (const EmbeddedFile& file : embedded_template_files()) {
    std::string text(file.data, file.size);
    if (std::string(file.path) == "quantize/quantize_rows.cuh") {
      text = std::regex_replace(text, std::regex(R"(#include "common/grid_dependency.cuh"\n)"), "");
      text = std::regex_replace(
          text, std::regex(R"(\s*wait_for_previous_grid\(\);\s*allow_next_grid_to_launch\(\);)"),
          "");
    }
    const std::filesystem::path path = root.path() / file.path;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << text;
  }
  const TemplateSet old_tree = TemplateSet::from_directory(root.path());
  EXPECT_FALSE(launch::waits_for_previous_grid(render(quantize_rows_spec(), old_tree)));
}

}  // namespace
}  // namespace intfa::render
