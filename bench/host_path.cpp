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
// launches and memsets) of one call. Without the fake driver it fails, saying why.
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
#include "intfa/quantize.hpp"

namespace {

using namespace intfa;

using LaunchCounter = unsigned long long (*)();

// The fake driver's counter, from the driver intfa loaded (null when it is a real one).
LaunchCounter fake_driver_counter() {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (driver == nullptr) return nullptr;
  return reinterpret_cast<LaunchCounter>(dlsym(driver, "intfa_fake_driver_launches"));
}

// Host memory at a device-like alignment, freed at exit: the fake driver never dereferences
// "device" pointers.
void* fake_device_memory(std::size_t bytes) {
  static std::vector<std::unique_ptr<void, decltype(&std::free)>> blocks;
  blocks.emplace_back(std::aligned_alloc(256, (bytes + 255) / 256 * 256), &std::free);
  return blocks.back().get();
}

template <class Call>
void row(const char* name, Call call, int calls, LaunchCounter launches) {
  for (int i = 0; i < 100; ++i) call();
  const unsigned long long before = launches();
  call();
  const unsigned long long per_call = launches() - before;
  double best = 1e30;
  for (int round = 0; round < 5; ++round) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) call();
    const std::chrono::duration<double, std::micro> elapsed =
        std::chrono::steady_clock::now() - start;
    if (elapsed.count() / calls < best) best = elapsed.count() / calls;
  }
  std::printf("%-52s %9.2f us per call, %llu driver call%s\n", name, best, per_call,
              per_call == 1 ? "" : "s");
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
    const LaunchCounter launches = fake_driver_counter();
    if (launches == nullptr) {
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
  } catch (const Error& error) {
    std::fprintf(stderr, "intfa_host_path: %s\n", error.what());
    return 1;
  }
  return 0;
}
