// 32 host threads calling attention_forward at once on one device, each on its own stream, with a
// mix of specs (both variants, head dims 64 and 128, causal or not, GQA, sequence tails, two tile
// configs, both layouts): the runtime compiles and loads each kernel once while the others wait,
// and every output matches the quantized model. Skipped without a GPU.
#include <gtest/gtest.h>

#include <cstdio>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "intfa/attention.hpp"
#include "reference/attention_check.hpp"
#include "support/gpu.hpp"

namespace intfa {
namespace {

constexpr int kThreads = 32;
constexpr double kModelRelativeL2 = 1e-3;  // as in attention_gpu_test: rounding order only

struct Shape {
  int batch, heads_q, heads_kv, seq_q, seq_kv, head_dim;
  bool causal;
};

reference::CheckCase thread_case(int thread) {
  static const std::vector<Shape> shapes = {
      {1, 2, 2, 77, 130, 64, true}, {1, 4, 2, 200, 257, 128, false}, {2, 2, 1, 129, 64, 64, false},
      {1, 8, 2, 1, 300, 128, true}, {1, 2, 2, 300, 300, 128, true},  {1, 4, 4, 65, 1000, 64, false},
      {2, 4, 1, 33, 33, 128, true}, {1, 2, 2, 500, 100, 64, true},
  };
  const Shape& s = shapes[static_cast<std::size_t>(thread) % shapes.size()];
  reference::CheckCase check;
  check.problem =
      AttentionProblem{s.batch, s.heads_q, s.heads_kv, s.seq_q, s.seq_kv, s.head_dim, s.causal};
  check.problem.variant = thread / 8 % 2 == 0 ? Variant::kFullInt8 : Variant::kHalfInt8;
  check.options.config =
      thread / 16 == 0 ? KernelConfig{128, 64, 8, 2} : KernelConfig{64, 64, 4, 3};
  check.layout = thread % 3 == 0 ? Layout::kBNHD : Layout::kBHND;
  check.seed = reference::fresh_seed();
  check.compare_to_f64 = false;  // the model comparison is the tight one; f64 costs CPU time
  return check;
}

TEST(AttentionThreadsGpu, ThirtyTwoThreadsWithMixedSpecsAllGetCorrectOutputs) {
  INTFA_REQUIRE_GPU();
  std::vector<reference::CheckCase> cases;
  for (int thread = 0; thread < kThreads; ++thread) cases.push_back(thread_case(thread));
  std::vector<reference::CheckResult> results(kThreads);
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (std::size_t thread = 0; thread < cases.size(); ++thread) {
    threads.emplace_back([&, thread] {
      try {
        device::use_primary_context();
        results[thread] = reference::run_check(cases[thread]);
      } catch (const std::exception& error) {
        errors[thread] = error.what();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();

  for (std::size_t thread = 0; thread < cases.size(); ++thread) {
    const std::string where = "thread " + std::to_string(thread) + ": " + cases[thread].to_string();
    const reference::CheckResult& result = results[thread];
    std::printf("  %s\n    %s\n", where.c_str(), result.to_string().c_str());
    EXPECT_EQ(errors[thread], "") << where;
    EXPECT_EQ(result.unwritten_outputs, 0u) << where;
    EXPECT_EQ(result.vs_model.non_finite, 0u) << where;
    EXPECT_LE(result.vs_model.relative_l2, kModelRelativeL2) << where;
    EXPECT_EQ(
        result.q_mismatches + result.k_mismatches + result.v_mismatches + result.scale_mismatches,
        0u)
        << where;
  }
}

}  // namespace
}  // namespace intfa
