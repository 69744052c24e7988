// Every tile config the tuner may try compiles for sm_90a (without a GPU), without warnings, for
// both variants and each head dim: a config the tuner can reach must never fail at run time.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "attention/attention_spec.hpp"
#include "nvrtc/compiler.hpp"
#include "render/render.hpp"

namespace intfa::attention {
namespace {

TEST(AttentionConfigCompile, EveryCandidateConfigCompiles) {
  std::vector<render::KernelSpec> specs;
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
  const render::TemplateSet& templates = render::TemplateSet::active();
  std::atomic<std::size_t> next{0};
  std::mutex mutex;
  std::vector<std::string> failures;
  auto worker = [&] {
    for (std::size_t i = next++; i < specs.size(); i = next++) {
      try {
        const render::RenderedUnit unit = render::render(specs[i], templates);
        const nvrtc::Cubin cubin =
            nvrtc::compile(unit, specs[i], nvrtc::compile_options(specs[i].arch), templates);
        if (cubin.log.find("warning") != std::string::npos) {
          std::lock_guard<std::mutex> lock(mutex);
          failures.push_back(specs[i].to_string() + ": NVRTC warned:\n" + cubin.log);
        }
      } catch (const std::exception& error) {
        std::lock_guard<std::mutex> lock(mutex);
        failures.push_back(specs[i].to_string() + ": " + error.what());
      }
    }
  };
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < std::max(2u, std::thread::hardware_concurrency()); ++i) {
    threads.emplace_back(worker);
  }
  for (auto& thread : threads) thread.join();
  for (const std::string& failure : failures) ADD_FAILURE() << failure;
}

}  // namespace
}  // namespace intfa::attention
