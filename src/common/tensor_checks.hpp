// The checks of the public API's tensor and shape arguments that every entry point shares
// (attention, quantize, the paged cache, the Python module, the CLI): views, scales, varlen
// offsets, Q/K shapes and the INT8 V layout's arguments, and the small requirements they are
// made of. Each failure is an InvalidArgument naming the field ("tensors.k.strides") and the
// value. The attention-specific checks (problem, options, the tensors of one call) are
// src/attention/validation.hpp's.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "intfa/attention.hpp"
#include "intfa/types.hpp"

namespace intfa::checks {

// The launch grid's y and z dimensions hold at most 65535 blocks: heads and batches of the
// attention kernel, heads and batches of the V quantize kernels.
constexpr int kMaxGridYZ = 65535;
// Offsets inside one (batch, head) are 32-bit in the kernels.
constexpr int kMaxSeq = 1 << 28;
// The quantize kernels index rows with 32-bit integers (their grid's x dimension with them).
constexpr long long kMaxRows = 2147483647LL;

// `field` names the value (with `member` after it, for a struct's: "shape" ".batch"); the
// message's strings are built only when the value is refused, since every launch runs these.
void require_at_most(int value, int limit, const char* field, const char* why,
                     const char* member = "");
void require_positive(int value, const char* field, const char* member = "");
void require_dtype(const TensorView& view, const std::string& field,
                   std::initializer_list<DType> allowed);
// "[s0, s1, s2, s3]", for messages.
template <std::size_t N>
std::string strides_text(const std::array<std::int64_t, N>& strides) {
  std::string text = "[";
  for (std::size_t dim = 0; dim < N; ++dim) {
    text += (dim == 0 ? "" : ", ") + std::to_string(strides[dim]);
  }
  return text + "]";
}

struct ViewRequirements {
  const char* field;                    // "tensors.q"
  std::array<std::int64_t, 4> extents;  // logical [batch, heads, seq, head_dim]
  int element_bytes;                    // bytes per stride unit
  int alignment_bytes;                  // of the data pointer and of the batch/head/row strides
  int contiguous_dim = 3;               // the dimension that must have stride 1
};
void validate_view(const TensorView& view, const ViewRequirements& requirements);
// The rules of a view's strides (validate_view's) for any strided argument, `field` and `member`
// naming them ("out" ".lse_strides", as require_at_most's): each >= 0, the last element's byte
// offset within int64 (INT64_MAX - 31 and 2^62 once wrapped to a small offset), and no two elements
// at one address (a stride of 0 had every row write one slot). A dimension of extent 1 takes any
// stride >= 0. N is 3 or 4.
template <std::size_t N>
void validate_strides(const std::array<std::int64_t, N>& strides,
                      const std::array<std::int64_t, N>& extents, int element_bytes,
                      const char* field, const char* member = "");
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

}  // namespace intfa::checks
