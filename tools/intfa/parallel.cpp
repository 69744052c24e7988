#include "intfa/parallel.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>

#include "intfa/errors.hpp"
#include "launch/kernel_runtime.hpp"

namespace intfa::cli {
namespace {

class Progress {
 public:
  Progress(std::string label, std::size_t total)
      : label_(std::move(label)), total_(total), interactive_(isatty(STDERR_FILENO) != 0),
        started_(std::chrono::steady_clock::now()), last_print_(started_) {}

  void advance(std::size_t done, bool force = false) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto now = std::chrono::steady_clock::now();
    const double elapsed = std::chrono::duration<double>(now - started_).count();
    const double since_print = std::chrono::duration<double>(now - last_print_).count();
    if (!force && since_print < (interactive_ ? 0.1 : 5.0)) return;
    last_print_ = now;
    const double rate = elapsed > 0 ? static_cast<double>(done) / elapsed : 0;
    const double eta = rate > 0 ? static_cast<double>(total_ - done) / rate : 0;
    if (interactive_) {
      const int width = 30;
      const int filled = total_ ? static_cast<int>(width * done / total_) : width;
      std::fprintf(stderr, "\r%s [%.*s%*s] %zu/%zu  %.1f/s  ETA %.0fs ", label_.c_str(), filled,
                   "##############################", width - filled, "", done, total_, rate, eta);
      if (done == total_) std::fprintf(stderr, "\n");
    } else {
      std::fprintf(stderr, "%s: %zu/%zu kernels, %.1f/s, ETA %.0f s\n", label_.c_str(), done,
                   total_, rate, eta);
    }
  }

 private:
  std::string label_;
  std::size_t total_;
  bool interactive_;
  std::chrono::steady_clock::time_point started_;
  std::chrono::steady_clock::time_point last_print_;
  std::mutex mutex_;
};

}  // namespace

CompileSummary compile_in_parallel(const std::vector<render::KernelSpec>& specs,
                                   const std::string& label, unsigned threads,
                                   const CompileFunction& compile) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  CompileFunction compile_one = compile;
  if (!compile_one) {
    compile_one = [](const render::KernelSpec& spec) {
      return launch::KernelRuntime::instance().compile(spec);
    };
  }
  CompileSummary summary;
  std::mutex mutex;
  std::atomic<std::size_t> next{0};
  std::atomic<std::size_t> done{0};
  Progress progress(label, specs.size());
  auto worker = [&] {
    for (std::size_t index = next++; index < specs.size(); index = next++) {
      try {
        const launch::CompiledKernel compiled = compile_one(specs[index]);
        std::lock_guard<std::mutex> lock(mutex);
        ++(compiled.compiled_now ? summary.compiled : summary.cached);
      } catch (const std::exception& error) {  // one failure must not end the other compiles
        std::lock_guard<std::mutex> lock(mutex);
        summary.failures.push_back(specs[index].to_string() + ": " + error.what());
      }
      progress.advance(++done);
    }
  };
  std::vector<std::thread> pool;
  for (unsigned i = 0; i < std::min<std::size_t>(threads, specs.size()); ++i) pool.emplace_back(worker);
  for (std::thread& thread : pool) thread.join();
  progress.advance(done, true);
  return summary;
}

}  // namespace intfa::cli
