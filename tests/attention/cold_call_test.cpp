// A call's first run on a cold cache (issue 49, item 7): attention_forward_16bit (and paged
// decode with splits) plans every kernel it will launch, then fetches the cubins it lacks all at
// once (KernelRuntime::load_all: compiled on several threads, or read from the disk cache) before
// its first launch. What it fetched is exactly what it then launches: nothing compiled on the way,
// nothing compiled that is not launched. A compile error reaches the caller as the CompileError
// NVRTC's log makes, and no thread outlives the call.
//
// The bodies run in a child process on the fake driver (an H100-like sm_90a, launches counted per
// kernel), with a fresh kernel cache, so that every kernel is compiled by NVRTC there.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "intfa/attention.hpp"
#include "intfa/errors.hpp"
#include "intfa/paged.hpp"
#include "launch/kernel_runtime.hpp"
#include "render/embedded_templates.hpp"
#include "support/child_test.hpp"
#include "support/fake_driver.hpp"
#include "support/temp_dir.hpp"

namespace intfa {
namespace {

constexpr const char* kChild = "INTFA_TEST_COLD_CALL_CHILD";

// Host memory standing in for device memory (the fake driver never reads it), freed at exit.
void* fake_device_memory(std::size_t bytes) {
  static std::vector<std::unique_ptr<void, decltype(&std::free)>> blocks;
  blocks.emplace_back(std::aligned_alloc(256, (bytes + 255) / 256 * 256), &std::free);
  return blocks.back().get();
}

// The distinct kernels the fake driver has seen launched so far (it is the libcuda.so.1 intfa loads
// in the child, the first of LD_LIBRARY_PATH).
unsigned long long kernels_launched() {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW);
  const auto counter = driver == nullptr ? nullptr
                                         : reinterpret_cast<unsigned long long (*)()>(
                                               dlsym(driver, "intfa_fake_driver_functions_launched"));
  if (counter == nullptr) throw std::runtime_error("the CUDA driver is not the fake one");
  return counter();
}

std::size_t threads_of_this_process() {
  return static_cast<std::size_t>(std::distance(std::filesystem::directory_iterator("/proc/self/task"),
                                                std::filesystem::directory_iterator()));
}

// One attention_forward_16bit of B=1, H=8, d=128 FP16 over `seq_kv` keys.
struct SixteenBitCall {
  AttentionProblem problem;
  AttentionOptions options;

  explicit SixteenBitCall(int seq_kv = 1024) {
    problem.batch = 1;
    problem.heads_q = problem.heads_kv = 8;
    problem.seq_q = 1024;
    problem.seq_kv = seq_kv;
    problem.head_dim = 128;
  }

  void operator()() const {
    const TensorShape q{1, 8, problem.seq_q, 128}, kv{1, 8, problem.seq_kv, 128};
    AttentionInputs inputs;
    const auto view = [](const TensorShape& shape) {
      const std::size_t bytes = 2 * static_cast<std::size_t>(shape.heads) * shape.seq * 128;
      return TensorView::dense(fake_device_memory(bytes), DType::kF16, Layout::kBHND, shape);
    };
    inputs.q = view(q);
    inputs.k = view(kv);
    inputs.v = view(kv);
    inputs.out = view(q);
    const std::size_t bytes = attention_workspace_bytes(problem);
    attention_forward_16bit(problem, inputs, fake_device_memory(bytes), bytes, nullptr, options);
  }
};

// paged_decode over an INT8 cache, in `splits` splits (two: the kernel's clusters merge them; more:
// the merge kernel follows).
void paged_decode_call(int splits, int head_dim = 128) {
  PagedKVCache cache;
  cache.page_size = 16, cache.heads_kv = 8, cache.head_dim = head_dim, cache.bits = 8;
  PagedDecodeProblem decode;
  decode.batch = 2, decode.heads_q = 32, decode.max_seq_len = 1024;
  decode.max_pages = decode.max_seq_len / cache.page_size;
  cache.num_pages = decode.batch * decode.max_pages;
  cache.k_data = fake_device_memory(paged_data_bytes(cache));
  cache.v_data = fake_device_memory(paged_data_bytes(cache));
  cache.k_scale = fake_device_memory(paged_scale_bytes(cache));
  cache.v_scale = fake_device_memory(paged_scale_bytes(cache));
  const TensorShape rows{decode.batch, decode.heads_q, 1, cache.head_dim};
  PagedDecodeTensors tensors;
  tensors.q = TensorView::dense(fake_device_memory(1 << 16), DType::kF16, Layout::kBHND, rows);
  tensors.out = TensorView::dense(fake_device_memory(1 << 16), DType::kF16, Layout::kBHND, rows);
  tensors.block_table = static_cast<const int*>(fake_device_memory(sizeof(int) * 128));
  tensors.seq_lens = static_cast<const int*>(fake_device_memory(sizeof(int) * 2));
  PagedDecodeOptions options;
  options.num_splits = splits;
  tensors.workspace_bytes = paged_decode_workspace_bytes(cache, decode, options);
  tensors.workspace = fake_device_memory(tensors.workspace_bytes);
  paged_decode(cache, decode, tensors, nullptr, options);
}

struct CallCase {
  std::string name;
  std::function<void()> call;
  int kernels;      // the distinct kernels the call launches that no case before it launched
  int batches = 1;  // the fetches they come in
};

// What a call did to the runtime's counts and the driver's distinct launched kernels.
struct Change {
  launch::RuntimeStats before, after;
  unsigned long long launched_before = 0, launched_after = 0;

  std::uint64_t fetched() const { return after.fetched - before.fetched; }
  std::uint64_t batches() const { return after.fetch_batches - before.fetch_batches; }
  std::uint64_t loaded() const { return after.module_loads - before.module_loads; }
  std::uint64_t launched() const { return launched_after - launched_before; }
  // Cubins from anywhere: NVRTC, the user cache, a bundle.
  std::uint64_t cubins() const {
    return (after.nvrtc_compiles - before.nvrtc_compiles) + (after.disk_hits - before.disk_hits) +
           (after.bundle_hits - before.bundle_hits);
  }
};

Change run(const std::function<void()>& call) {
  Change change;
  change.before = launch::KernelRuntime::instance().stats();
  change.launched_before = kernels_launched();
  call();
  change.after = launch::KernelRuntime::instance().stats();
  change.launched_after = kernels_launched();
  return change;
}

// ColdCallChild.DISABLED_* is a body ColdCall.* runs in a child process, not a test to run by
// hand (support/child_test.hpp); ctest does not list it.
//
// Each call on a fresh cache: the kernels it launches are the ones it fetched together, each
// compiled once, before its first launch; the same call again fetches, compiles and loads nothing.
// The cases cover each way K and V are launched (one clustered launch, K's rows with V's maximum
// then V, the separate passes of per-block K), rotated Q and K (the Hopper kernel rotates Q in its
// own Q pass) and paged decode with its splits merged by its clusters or by the merge kernel.
TEST(ColdCallChild, DISABLED_EachCallFetchesExactlyTheKernelsItLaunchesAtOnce) {
  if (std::getenv(kChild) == nullptr) GTEST_SKIP() << "run by ColdCall.*";
  SixteenBitCall defaults, half, long_kv(16384), per_block_k, rotated;
  half.problem.variant = Variant::kHalfInt8;
  per_block_k.options.numerics.k_granularity = KScaleGranularity::kPerBlock;
  rotated.options.rotate_qk = QKRotation::kOn;
  const std::vector<CallCase> cases = {
      // K's channel means, K's rows with all of V, the Hopper kernel (which quantizes Q).
      {"full INT8, defaults", defaults, 3},
      // K's rows, the half-INT8 kernel (the means are the first case's).
      {"half INT8", half, 2},
      // V past 16 slices: K's rows with V's maximum, then V; the kernel of a longer sequence.
      {"full INT8, 16k keys", long_kv, 3},
      // K's row blocks, V's maximum in a pass of its own, the per-block kernel (V's quantize
      // pass is the case before's).
      {"per-block K", per_block_k, 3},
      // Rotated K's rows with V, and the kernel that rotates and quantizes Q itself.
      {"rotated Q and K", rotated, 2},
      // The decode kernel, whose clusters merge two splits (d=64); the decode kernel and the merge
      // of eight splits (d=128), fetched together.
      {"paged decode, 2 splits", [] { paged_decode_call(2, 64); }, 1},
      {"paged decode, 8 splits", [] { paged_decode_call(8); }, 2},
      // Two splits where no cluster fits at once (d=256): the decode kernel, fetched before the
      // clusters are asked about, then the merge kernel.
      {"paged decode, 2 splits, no cluster at once",
       [] {
         setenv("INTFA_FAKE_CLUSTERS_AT_ONCE", "0", 1);
         paged_decode_call(2, 256);
         unsetenv("INTFA_FAKE_CLUSTERS_AT_ONCE");
       },
       2, 2},
  };
  for (const CallCase& c : cases) {
    SCOPED_TRACE(c.name);
    const Change first = run(c.call);
    EXPECT_EQ(first.fetched(), static_cast<std::uint64_t>(c.kernels)) << "kernels fetched";
    EXPECT_EQ(first.batches(), static_cast<std::uint64_t>(c.batches))
        << "the call's kernels were not fetched as few times as they can be";
    EXPECT_EQ(first.cubins(), first.fetched()) << "a cubin compiled or read outside a fetch";
    EXPECT_EQ(first.loaded(), first.fetched()) << "a kernel loaded that was not fetched with the "
                                                  "others, or fetched and not loaded";
    EXPECT_EQ(first.launched(), first.loaded()) << "a kernel loaded and not launched";
    const Change again = run(c.call);
    EXPECT_EQ(again.batches(), 0u);
    EXPECT_EQ(again.fetched(), 0u);
    EXPECT_EQ(again.cubins(), 0u);
    EXPECT_EQ(again.loaded(), 0u);
  }
  // The compiles ran at once: as many together as there were cores for, unless
  // INTFA_PARALLEL_COMPILE=0 put them one after another.
  const std::uint64_t most = launch::KernelRuntime::instance().stats().most_fetching_at_once;
  if (launch::parallel_compile_enabled()) {
    EXPECT_GE(most, std::min(2u, std::max(1u, std::thread::hardware_concurrency())));
    EXPECT_LE(most, std::max(1u, std::thread::hardware_concurrency()));
  } else {
    EXPECT_EQ(most, 1u);
  }
}

// With one template broken (the Hopper attention kernel's), the call throws the CompileError that
// kernel's compile threw, with NVRTC's log, after the other compiles ended; it launches nothing,
// leaves no thread behind, and throws the same again when called again. (The broken kernel is
// the last one asked for, fetched first, and fails fast: while the calling thread takes it and
// then K's channel means, another compiles K and V, so a thread left running would show.)
TEST(ColdCallChild, DISABLED_ACompileErrorOnAThreadReachesTheCallerAsItWasThrown) {
  if (std::getenv(kChild) == nullptr) GTEST_SKIP() << "run by ColdCall.*";
  const SixteenBitCall call;
  for (int attempt = 0; attempt < 2; ++attempt) {
    SCOPED_TRACE("attempt " + std::to_string(attempt));
    const std::size_t threads = threads_of_this_process();
    const launch::RuntimeStats before = launch::KernelRuntime::instance().stats();
    try {
      call();
      ADD_FAILURE() << "no CompileError";
    } catch (const CompileError& error) {
      EXPECT_EQ(error.spec().rfind("attention_wgmma", 0), 0u) << error.spec();
      EXPECT_NE(error.log().find("intfa_cold_call_broken"), std::string::npos) << error.log();
    }
    const launch::RuntimeStats after = launch::KernelRuntime::instance().stats();
    EXPECT_EQ(threads_of_this_process(), threads) << "a compile thread outlived the call";
    // The first attempt compiled all three at once; the second only the one that failed.
    EXPECT_EQ(after.fetched - before.fetched, attempt == 0 ? 3u : 1u);
    EXPECT_EQ(after.fetch_batches - before.fetch_batches, 1u);
    EXPECT_EQ(after.module_loads, before.module_loads) << "a kernel was loaded before the error";
    EXPECT_EQ(kernels_launched(), 0u);
  }
}

void run_child(const std::string& test, std::vector<std::string> environment) {
  const testing::TempDir cache, control;
  environment.push_back(testing::fake_driver_setting());
  environment.push_back(std::string(kChild) + "=1");
  environment.push_back("INTFA_CACHE_DIR=" + cache.path().string());
  testing::ChildTest child({test, environment, {"INTFA_DEPLOY_CACHE", "INTFA_CACHE_DISABLE"},
                            control.path() / "child.txt"});
  EXPECT_EQ(child.wait_until(std::chrono::steady_clock::now() + std::chrono::minutes(10)), 0)
      << child.output();
}

TEST(ColdCall, EachCallFetchesExactlyTheKernelsItLaunchesAtOnce) {
  run_child("ColdCallChild.DISABLED_EachCallFetchesExactlyTheKernelsItLaunchesAtOnce",
            {"INTFA_PARALLEL_COMPILE=1"});
}

// INTFA_PARALLEL_COMPILE=0 (docs/environment.md: for comparisons) fetches the same kernels,
// one after another.
TEST(ColdCall, WithoutParallelCompilesTheSameKernelsAreFetchedOneAfterAnother) {
  run_child("ColdCallChild.DISABLED_EachCallFetchesExactlyTheKernelsItLaunchesAtOnce",
            {"INTFA_PARALLEL_COMPILE=0"});
}

TEST(ColdCall, ACompileErrorOnAThreadReachesTheCallerAsItWasThrown) {
  // The embedded templates, the Hopper attention kernel's broken.
  const testing::TempDir templates;
  for (const render::EmbeddedFile& file : render::embedded_template_files()) {
    std::string text(file.data, file.size);
    if (std::string(file.path) == "attention/attention_forward_wgmma.cuh") {
      text += "\nintfa_cold_call_broken this is not CUDA;\n";
    }
    const std::filesystem::path path = templates.path() / file.path;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << text;
  }
  run_child("ColdCallChild.DISABLED_ACompileErrorOnAThreadReachesTheCallerAsItWasThrown",
            {"INTFA_TEMPLATE_DIR=" + templates.path().string()});
}

}  // namespace
}  // namespace intfa
