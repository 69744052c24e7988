// Runs intfa end to end on random inputs and checks it against both CPU references: the
// quantized tensors exactly against the model's quantizers, the output tightly against the
// quantized model (a kernel bug) and, reported, against float64 attention of the original inputs
// (quantization error). Used by the GPU tests, `intfa run` and `intfa bench --accuracy`.
#pragma once

#include <cstdint>
#include <string>

#include "intfa/attention.hpp"
#include "intfa/types.hpp"
#include "reference/reference.hpp"

namespace intfa::reference {

struct CheckCase {
  AttentionProblem problem;
  AttentionOptions options;
  Layout layout = Layout::kBHND;  // of Q, K, V, the quantized Q, K and the output
  DType io_type = DType::kF16;    // of Q, K, V and the output
  Distribution distribution = Distribution::kNormal;
  std::uint64_t seed = 0;
  bool with_lse = true;
  bool smooth_k = false;  // quantize K with K smoothing (the model uses the kernel's means)
  bool compare_to_f64 = true;
  // Elements after each output row that the kernel must leave alone; 2 makes rows only 4-byte
  // aligned (with 16-bit outputs), so the kernels cannot store them in 16-byte pieces.
  int out_row_padding = 0;
  std::string to_string() const;
};

struct CheckResult {
  ErrorMetrics vs_model;    // kernel vs the quantized model: must be tiny
  ErrorMetrics vs_f64;      // kernel vs float64 of the original inputs (when compared)
  ErrorMetrics model_vs_f64;
  double lse_max_abs_error = 0;  // vs the model's LSE, over rows with a finite LSE
  std::size_t lse_infinity_mismatches = 0;
  std::size_t unwritten_outputs = 0;  // output elements still holding the poison
  std::size_t overwritten_padding = 0;  // padding (out_row_padding) the kernel wrote
  // Quantized tensors that differ from the CPU quantizers (must be 0).
  std::size_t q_mismatches = 0, k_mismatches = 0, v_mismatches = 0, scale_mismatches = 0;
  std::size_t mean_mismatches = 0;  // K smoothing means off float64 by more than FP32 summation
  std::string to_string() const;
};

// Needs a GPU with a current context (throws NoDevice otherwise).
CheckResult run_check(const CheckCase& check);

}  // namespace intfa::reference
