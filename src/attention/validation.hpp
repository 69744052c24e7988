// Every check attention_forward makes before it launches anything. Each failure is an
// InvalidArgument naming the field ("tensors.k.strides") and the value.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "intfa/attention.hpp"
#include "intfa/types.hpp"

namespace intfa::attention {

void validate_problem(const AttentionProblem& problem);
void validate_options(const AttentionProblem& problem, const AttentionOptions& options);
void validate_tensors(const AttentionProblem& problem, const AttentionTensors& tensors,
                      const AttentionOptions& options);

// Shared view checks (also used by the quantize entry points).
struct ViewRequirements {
  const char* field;                   // "tensors.q"
  std::array<std::int64_t, 4> extents;  // logical [batch, heads, seq, head_dim]
  int element_bytes;                    // bytes per stride unit
  int alignment_bytes;                  // of the data pointer and of the batch/head/row strides
  int contiguous_dim = 3;               // the dimension that must have stride 1
};
void validate_view(const TensorView& view, const ViewRequirements& requirements);
void validate_scales(const float* scales, const char* field);
// Packed sequences' offsets and totals, named `field`.cu_seqlens_q, ...
void validate_varlen(const VarlenLayout& varlen, const std::string& field);
// A device int32 array of varlen offsets: not null, 4-byte aligned (its values stay on the GPU).
void validate_offsets(const int* offsets, const char* field);
void validate_shape(const TensorShape& shape, const char* field);
// The arguments of the INT8 V layout helpers (v_padded_seq, v_int8_bytes, ...), named as their
// parameters: what no problem can have is refused rather than computed into a wrong size.
void validate_v_seq(int seq_kv);
void validate_v_layout(int batch, int heads_kv, int seq_kv, int head_dim);

}  // namespace intfa::attention
