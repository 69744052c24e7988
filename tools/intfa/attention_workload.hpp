// Device tensors for one attention problem (random 16-bit inputs, their quantized forms, the
// output), and CUDA-event timing of the pieces. Shared by `intfa run` and `intfa bench`.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "device/device_memory.hpp"
#include "intfa/attention.hpp"
#include "intfa/quantize.hpp"
#include "reference/input_families.hpp"
#include "reference/reference.hpp"

namespace intfa::cli {

class AttentionWorkload {
 public:
  // Q and K are quantized as attention_forward_16bit would under `options` (smooth_k, rotate_qk).
  AttentionWorkload(const AttentionProblem& problem, const AttentionOptions& options, DType io_type,
                    reference::InputFamily inputs, std::uint64_t seed);

  void quantize(CUstream stream);  // Q, K (and V for full INT8) into the attention inputs
  void attend(CUstream stream);    // one attention_forward
  // Times another tile config on the same tensors (the numerics options stay).
  void use_config(const KernelConfig& config) { options_.config = config; }
  const AttentionProblem& problem() const { return problem_; }
  const AttentionTensors& tensors() const { return tensors_; }
  const AttentionOptions& options() const { return options_; }
  // The 16-bit Q, K, V and the output, as attention_forward_16bit takes them (any variant: V as
  // given).
  AttentionInputs inputs_16bit() const;

  // The host memory the constructor takes at its peak for `problem`: the random inputs as floats
  // and one tensor's 16-bit copy (under the verbs' limits far below 2^64).
  static std::uint64_t host_bytes(const AttentionProblem& problem);

  // 4 * B * Hq * Nq * Nkv * D, halved for causal square problems (FlashAttention's convention).
  double operations() const;
  std::uint64_t quantize_bytes_moved() const;  // bytes read + written by quantize()

 private:
  AttentionProblem problem_;
  AttentionOptions options_;
  DType io_type_;
  TensorShape q_shape_, kv_shape_;
  device::DeviceBuffer q_, k_, v_, q8_, k8_, v8_, q_scale_, k_scale_, v_scale_, out_;
  device::DeviceBuffer k_mean_;        // K smoothing: K's channel means
  device::DeviceBuffer q_dot_k_mean_;  // and q . mean per query row (the LSE term)
  device::DeviceBuffer rotated_heads_;  // automatic rotation: K's heads' decisions
  AttentionTensors tensors_;
};

// Refuses a workload whose host buffers (`bytes`) this machine's memory cannot hold: a UsageError
// naming `shape` (the options that size it) and the size, before anything looks for a GPU, where
// a huge shape ended in std::bad_alloc.
void require_host_memory(std::uint64_t bytes, const std::string& shape);

struct Timing {
  double median_ms = 0;
  double min_ms = 0;
  int repeats = 0;
};

// Warm-up runs, then `repeats` runs each between two events on `stream`: every run's ms, in order.
std::vector<double> run_times(const std::function<void(CUstream)>& body, CUstream stream,
                              int warmup, int repeats);

// The middle value of `values` (the upper of the two middle ones for an even count); 0 when empty.
double median(std::vector<double> values);

// The same, as their median and min.
Timing time_on_stream(const std::function<void(CUstream)>& body, CUstream stream, int warmup,
                      int repeats);

}  // namespace intfa::cli
