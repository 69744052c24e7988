#include "support/compile_all.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>

#include "device/arch.hpp"
#include "families/any_spec.hpp"
#include "nvrtc/compiler.hpp"
#include "render/render.hpp"

namespace intfa::testing {

std::vector<CompileFailure> compile_all(const std::vector<families::AnySpec>& specs,
                                        const render::TemplateSet& templates) {
  std::vector<CompileFailure> failures;
  std::mutex mutex;
  auto fail = [&](const families::AnySpec& spec, std::string message) {
    std::lock_guard<std::mutex> lock(mutex);
    failures.push_back({spec.to_string(), std::move(message)});
  };
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i = next++; i < specs.size(); i = next++) {
      const families::AnySpec& spec = specs[i];
      try {
        const nvrtc::Cubin cubin = nvrtc::compile(families::kernel_source(spec, templates),
                                                  nvrtc::compile_options(spec.arch()), templates);
        if (nvrtc::cubin_sm_number(cubin.image) != device::arch_sm_number(spec.arch())) {
          fail(spec, "cubin is for another arch");
        }
        if (cubin.log.find("warning") != std::string::npos) {
          fail(spec, "NVRTC warned:\n" + cubin.log);
        }
      } catch (const std::exception& error) {
        fail(spec, error.what());
      }
    }
  };
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < std::max(2u, std::thread::hardware_concurrency()); ++i) {
    threads.emplace_back(worker);
  }
  for (auto& thread : threads) thread.join();
  return failures;
}

}  // namespace intfa::testing
