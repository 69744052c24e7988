// Runs intfa end to end on random inputs and checks it against both CPU references: the
// quantized tensors exactly against the model's quantizers, the output tightly against the
// quantized model (a kernel bug) and, reported, against float64 attention of the original inputs
// (quantization error). Used by the GPU tests, `intfa run` and `intfa bench --accuracy`.
#pragma once

#include <cstdint>
#include <string>

#include "intfa/attention.hpp"
#include "intfa/types.hpp"
#include "reference/input_families.hpp"
#include "reference/reference.hpp"

namespace intfa::reference {

struct CheckCase {
  AttentionProblem problem;
  // Also how Q and K are quantized: options.smooth_k (K with its sampled channel means, Q with the
  // LSE term, which the attention kernel gets) and options.rotate_qk, as
  // attention_forward_16bit does; the model uses the kernels' means and LSE terms.
  AttentionOptions options;
  Layout layout = Layout::kBHND;  // of Q, K, V, the quantized Q, K and the output
  DType io_type = DType::kF16;    // of Q, K, V and the output
  InputFamily inputs = InputFamily::kNormal;
  std::uint64_t seed = 0;
  bool with_lse = true;
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
  // The same less two rounding ties of P per row (ModelOptions::p_unit_share): what the tests
  // bound. Sharp rows (outlier channels without smoothing) sum few P units, so one P rounded the
  // other way at a tie moves their LSE by ~1e-3 with no fault in the kernel.
  double lse_max_error_past_ties = 0;
  // vs float64 attention of the original inputs (when compared): the LSE of the original scores
  // whatever K smoothing subtracted, to quantization error.
  double lse_vs_f64_max_abs_error = 0;
  std::size_t lse_infinity_mismatches = 0;
  std::size_t unwritten_outputs = 0;  // output elements still holding the poison
  std::size_t overwritten_padding = 0;  // padding (out_row_padding) the kernel wrote
  // Quantized tensors that differ from the CPU quantizers (must be 0).
  std::size_t q_mismatches = 0, k_mismatches = 0, v_mismatches = 0, scale_mismatches = 0;
  // K smoothing's means off a float64 mean of the sampled keys by more than FP32 summation, and
  // Q's LSE terms off float64 q . mean likewise.
  std::size_t mean_mismatches = 0;
  std::size_t lse_term_mismatches = 0;
  // Automatic rotation (options.rotate_qk kAuto): heads whose decision differs from the model's
  // (rotation_decisions; heads within FP32 rounding of the threshold are not counted), or was not
  // written as 0 or 1; and how many KV heads were rotated.
  std::size_t rotation_mismatches = 0;
  std::size_t rotated_heads = 0;
  std::string to_string() const;
};

// Needs a GPU with a current context (throws NoDevice otherwise).
CheckResult run_check(const CheckCase& check);

}  // namespace intfa::reference
