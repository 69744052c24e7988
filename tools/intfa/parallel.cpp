#include "intfa/parallel.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <mutex>

#include "api/kernel_lists.hpp"

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

CompileSummary compile_in_parallel(const std::vector<families::AnySpec>& specs,
                                   const std::string& label, unsigned threads,
                                   const CompileFunction& compile) {
  Progress progress(label, specs.size());
  const aot::CompileSummary compiled = aot::compile_in_parallel(
      specs, threads, compile, [&progress](std::size_t done) { progress.advance(done); });
  progress.advance(specs.size(), true);
  CompileSummary summary;
  summary.compiled = compiled.compiled;
  summary.cached = compiled.cached;
  summary.failures = compiled.failures;
  return summary;
}

}  // namespace intfa::cli
