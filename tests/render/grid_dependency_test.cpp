// Every kernel template waits for the kernel before it first: on sm_90 and later intfa launches
// each kernel as a programmatic dependent launch (src/launch/kernel_runtime.hpp), which may run
// it while its predecessor on the stream still writes (templates/common/grid_dependency.cuh).
#include <gtest/gtest.h>

#include <string>

#include "render/embedded_templates.hpp"

namespace intfa::render {
namespace {

TEST(KernelTemplates, EveryKernelWaitsForThePreviousGridFirst) {
  int kernels = 0;
  for (const EmbeddedFile& file : embedded_template_files()) {
    const std::string text(file.data, file.size);
    for (std::size_t at = text.find("__global__ "); at != std::string::npos;
         at = text.find("__global__ ", at + 1)) {
      // The body starts at the first brace: launch bounds and parameters use parentheses.
      const std::size_t body = text.find('{', at);
      ASSERT_NE(body, std::string::npos) << file.path;
      const std::string name = text.substr(at, text.find('(', text.find(')', at) + 1) - at);
      const std::size_t wait = text.find("wait_for_previous_grid();", body);
      const std::size_t allow = text.find("allow_next_grid_to_launch();", body);
      // The parameters hold every pointer a kernel reads or writes through.
      const std::size_t first_use = text.find("params", body);
      const std::size_t next_kernel = text.find("__global__ ", at + 1);
      ++kernels;
      EXPECT_TRUE(wait != std::string::npos && wait < first_use && wait < next_kernel)
          << file.path << ": " << name << " touches its parameters before it waits";
      EXPECT_TRUE(allow != std::string::npos && wait < allow && allow < next_kernel)
          << file.path << ": " << name << " never lets the next grid launch after its wait";
    }
  }
  // attention (2), decode (3), quantize (6): a scan that finds fewer looks in the wrong place.
  EXPECT_GE(kernels, 11);
}

}  // namespace
}  // namespace intfa::render
