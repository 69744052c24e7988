// intfa_host_path: what intfa's own C++ costs on the host per call, and how many launches each
// entry point makes, on the fake CUDA driver of the tests (tests/fake_driver: every driver call
// returns at once, launches only count), so without a GPU and without the driver's own cost. The
// problem is bench/python_overhead.py's tiny one (B=1, H=8, N=128, d=64, FP16), whose calls are
// host-bound on a GPU.
//
//   LD_LIBRARY_PATH=build/fake-driver build/bin/intfa_host_path [--calls N]
//
// Each row: the least, over 5 rounds of N calls, of the wall time per call (after 100 warm-up
// calls, the first of which compiles the kernels with NVRTC), and the driver calls (kernel
// launches and memsets) of one call, with how many of them carry the programmatic dependency
// that lets them start before the launch before them ends ("starting early"). Without the fake driver it fails, saying why. The
// paged decode rows take B=8, 32 query heads over 8 KV heads, d=128, 4096 tokens, INT4.
#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "intfa/attention.hpp"
#include "intfa/errors.hpp"
#include "intfa/paged.hpp"
#include "intfa/quantize.hpp"

namespace {

using namespace intfa;

using LaunchCounter = unsigned long long (*)();

// One of the fake driver's counters, from the driver intfa loaded (null when it is a real one):
// "intfa_fake_driver_launches" or "intfa_fake_driver_programmatic_launches".
LaunchCounter fake_driver_counter(const char* name) {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (driver == nullptr) return nullptr;
  return reinterpret_cast<LaunchCounter>(dlsym(driver, name));
}

struct Counters {
  LaunchCounter launches = nullptr;
  LaunchCounter programmatic = nullptr;
};

// Host memory at a device-like alignment, freed at exit: the fake driver never dereferences
// "device" pointers.
void* fake_device_memory(std::size_t bytes) {
  static std::vector<std::unique_ptr<void, decltype(&std::free)>> blocks;
  blocks.emplace_back(std::aligned_alloc(256, (bytes + 255) / 256 * 256), &std::free);
  return blocks.back().get();
}

template <class Call>
void row(const char* name, Call call, int calls, const Counters& counters) {
  for (int i = 0; i < 100; ++i) call();
  const unsigned long long before = counters.launches();
  const unsigned long long programmatic_before = counters.programmatic();
  call();
  const unsigned long long per_call = counters.launches() - before;
  const unsigned long long early = counters.programmatic() - programmatic_before;
  double best = 1e30;
  for (int round = 0; round < 5; ++round) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) call();
    const std::chrono::duration<double, std::micro> elapsed =
        std::chrono::steady_clock::now() - start;
    if (elapsed.count() / calls < best) best = elapsed.count() / calls;
  }
  std::printf("%-52s %9.2f us per call, %llu driver call%s, %llu starting early\n", name, best,
              per_call, per_call == 1 ? "" : "s", early);
}

}  // namespace

int main(int argc, char** argv) {
  int calls = 20000;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--calls") == 0 && i + 1 < argc) {
      calls = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: intfa_host_path [--calls N]\n");
      return 2;
    }
  }
  if (calls < 1) calls = 1;

  AttentionProblem problem;
  problem.batch = 1;
  problem.heads_q = problem.heads_kv = 8;
  problem.seq_q = problem.seq_kv = 128;
  problem.head_dim = 64;
  const TensorShape shape{1, 8, 128, 64};
  const std::size_t bytes = std::size_t{1} << 20;
  AttentionInputs inputs;
  inputs.q = TensorView::dense(fake_device_memory(bytes), DType::kF16, Layout::kBHND, shape);
  inputs.k = TensorView::dense(fake_device_memory(bytes), DType::kF16, Layout::kBHND, shape);
  inputs.v = TensorView::dense(fake_device_memory(bytes), DType::kF16, Layout::kBHND, shape);
  inputs.out = TensorView::dense(fake_device_memory(bytes), DType::kF16, Layout::kBHND, shape);
  const std::size_t workspace_bytes = attention_workspace_bytes(problem);
  void* workspace = fake_device_memory(workspace_bytes);

  AttentionTensors tensors;
  tensors.q = TensorView::dense(fake_device_memory(bytes), DType::kI8, Layout::kBHND, shape);
  tensors.k = TensorView::dense(fake_device_memory(bytes), DType::kI8, Layout::kBHND, shape);
  tensors.v = v_int8_view(fake_device_memory(bytes), 1, 8, 128, 64);
  tensors.q_scale = static_cast<float*>(fake_device_memory(bytes));
  tensors.k_scale = static_cast<float*>(fake_device_memory(bytes));
  tensors.v_scale = static_cast<float*>(fake_device_memory(bytes));
  tensors.out = inputs.out;

  try {
    const AttentionOptions defaults;
    AttentionProblem half = problem;
    half.variant = Variant::kHalfInt8;
    // The first call loads the driver; only then is the counter there to find.
    attention_forward(problem, tensors, nullptr, defaults);
    const Counters launches{fake_driver_counter("intfa_fake_driver_launches"),
                            fake_driver_counter("intfa_fake_driver_programmatic_launches")};
    if (launches.launches == nullptr || launches.programmatic == nullptr) {
      std::fprintf(stderr,
                   "intfa_host_path: the CUDA driver is not the fake one of the tests "
                   "(LD_LIBRARY_PATH=<build>/fake-driver)\n");
      return 2;
    }
    std::printf("intfa's host time per call on the fake driver (B=1 H=8 N=128 d=64 f16, sm_90a)\n");
    row(
        "attention_forward_16bit (full INT8, defaults)",
        [&] {
          attention_forward_16bit(problem, inputs, workspace, workspace_bytes, nullptr, defaults);
        },
        calls, launches);
    row(
        "attention_forward_16bit (half INT8)",
        [&] {
          attention_forward_16bit(half, inputs, workspace, workspace_bytes, nullptr, defaults);
        },
        calls, launches);
    row(
        "attention_forward (INT8 tensors)",
        [&] { attention_forward(problem, tensors, nullptr, defaults); }, calls, launches);
    QuantizeOptions plain;
    float* k_scale = static_cast<float*>(fake_device_memory(bytes));
    row(
        "quantize_qk (K, plain)",
        [&] { quantize_qk(shape, inputs.k, tensors.k, k_scale, nullptr, plain); }, calls, launches);

    // Paged decode: one split (the kernel writes the output), two (its clusters merge them) and
    // eight (the merge kernel follows).
    PagedKVCache cache;
    cache.page_size = 16, cache.heads_kv = 8, cache.head_dim = 128, cache.bits = 4;
    PagedDecodeProblem decode;
    decode.batch = 8, decode.heads_q = 32, decode.max_seq_len = 4096;
    decode.max_pages = decode.max_seq_len / cache.page_size;
    cache.num_pages = decode.batch * decode.max_pages;
    const std::size_t data_bytes = paged_data_bytes(cache);
    const std::size_t scale_bytes = paged_scale_bytes(cache);
    cache.k_data = fake_device_memory(data_bytes), cache.v_data = fake_device_memory(data_bytes);
    cache.k_scale = fake_device_memory(scale_bytes),
    cache.v_scale = fake_device_memory(scale_bytes);
    const TensorShape rows{decode.batch, decode.heads_q, 1, cache.head_dim};
    PagedDecodeTensors paged;
    paged.q = TensorView::dense(fake_device_memory(bytes), DType::kF16, Layout::kBHND, rows);
    paged.out = TensorView::dense(fake_device_memory(bytes), DType::kF16, Layout::kBHND, rows);
    paged.block_table = static_cast<const int*>(fake_device_memory(
        sizeof(int) * static_cast<std::size_t>(decode.batch) * decode.max_pages));
    paged.seq_lens = static_cast<const int*>(fake_device_memory(sizeof(int) * decode.batch));
    for (int splits : {1, 2, 8}) {
      PagedDecodeOptions options;
      options.num_splits = splits;
      paged.workspace_bytes = paged_decode_workspace_bytes(cache, decode, options);
      paged.workspace =
          paged.workspace_bytes > 0 ? fake_device_memory(paged.workspace_bytes) : nullptr;
      const std::string name = "paged_decode (INT4, " + std::to_string(splits) + " split" +
                               (splits == 1 ? "" : "s") + ")";
      row(
          name.c_str(), [&] { paged_decode(cache, decode, paged, nullptr, options); }, calls,
          launches);
    }
  } catch (const Error& error) {
    std::fprintf(stderr, "intfa_host_path: %s\n", error.what());
    return 1;
  }
  return 0;
}
