#include "attention/validation.hpp"

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <numeric>
#include <string>

#include "intfa/errors.hpp"
#include "numerics/option_names.hpp"
#include "spec/attention_spec.hpp"

namespace intfa::attention {

using checks::kMaxGridYZ;
using checks::kMaxSeq;
using checks::require_at_most;
using checks::require_dtype;
using checks::require_positive;
using checks::strides_text;

void validate_problem(const AttentionProblem& problem) {
  require_positive(problem.batch, "problem.batch");
  require_positive(problem.heads_q, "problem.heads_q");
  require_positive(problem.heads_kv, "problem.heads_kv");
  require_positive(problem.seq_q, "problem.seq_q");
  require_positive(problem.seq_kv, "problem.seq_kv");
  if (problem.head_dim != 64 && problem.head_dim != 128 && problem.head_dim != 256) {
    throw InvalidArgument("problem.head_dim", std::to_string(problem.head_dim),
                          "supported head dims are 64, 128 and 256");
  }
  if (problem.heads_q % problem.heads_kv != 0) {
    throw InvalidArgument("problem.heads_q", std::to_string(problem.heads_q),
                          "expected a multiple of problem.heads_kv = " +
                              std::to_string(problem.heads_kv) + " (GQA/MQA)");
  }
  if (problem.qk_bits != 8 && problem.qk_bits != 4) {
    throw InvalidArgument("problem.qk_bits", std::to_string(problem.qk_bits), "expected 8 or 4");
  }
  require_at_most(problem.batch, kMaxGridYZ, "problem.batch", "the grid's z dimension");
  require_at_most(problem.heads_q, kMaxGridYZ, "problem.heads_q", "the grid's y dimension");
  if (problem.seq_q > kMaxSeq || problem.seq_kv > kMaxSeq) {
    throw InvalidArgument(problem.seq_q > kMaxSeq ? "problem.seq_q" : "problem.seq_kv",
                          std::to_string(std::max(problem.seq_q, problem.seq_kv)),
                          "expected <= 2^28");
  }
}

void validate_options(const AttentionProblem& problem, const AttentionOptions& options) {
  if (!std::isfinite(options.softmax_scale) || options.softmax_scale < 0.0) {
    throw InvalidArgument("options.softmax_scale", std::to_string(options.softmax_scale),
                          "expected a finite value > 0 (or 0 for 1/sqrt(head_dim))");
  }
  // The kernels take scale * log2(e) as a float32: 1e300 would become infinity and 1e-320 zero.
  const double scale_log2 = options.softmax_scale * 1.4426950408889634;
  if (options.softmax_scale != 0.0 && !(scale_log2 >= FLT_MIN && scale_log2 <= FLT_MAX)) {
    char value[32];
    std::snprintf(value, sizeof value, "%g", options.softmax_scale);
    throw InvalidArgument("options.softmax_scale", value,
                          "expected a scale float32 holds (times log2(e), in [1.2e-38, 3.4e38])");
  }
  const int rotation = static_cast<int>(options.rotate_qk);
  if (rotation < 0 || rotation >= static_cast<int>(option_count<QKRotation>())) {
    throw InvalidArgument("options.rotate_qk", std::to_string(rotation),
                          "expected " + option_names_text<QKRotation>());
  }
  if (options.numerics.k_granularity == KScaleGranularity::kPerBlock && problem.qk_bits != 8) {
    throw InvalidArgument("options.k_granularity", "block",
                          "per-block K scales need 8-bit Q.K (problem.qk_bits is " +
                              std::to_string(problem.qk_bits) + ")");
  }
  if (options.config) {
    // The config's own rules, before the device is looked up: a config that is wrong everywhere is
    // an InvalidArgument even without a GPU. Its arch and shared memory wait for the device.
    const SpecRequest request = request_for(
        options.config->path == KernelPath::kWgmma ? device::Arch::kSm90a : device::Arch::kSm80,
        problem, options, DType::kF16);
    validate_config(make_spec(request, *options.config), std::numeric_limits<int>::max());
  }
}

namespace {

// The [batch, rows] a view of Q (or K) spans: the problem's, or one packed batch of all rows.
struct RowExtent {
  std::int64_t batch, rows;
};

}  // namespace

void validate_tensors(const AttentionProblem& p, const AttentionTensors& t,
                      const AttentionOptions& options, int channels) {
  const std::int64_t out_channels = channels > 0 ? channels : p.head_dim;
  const bool varlen = t.varlen.enabled();
  if (varlen) validate_varlen(t.varlen, "tensors.varlen");
  if (varlen && options.numerics.k_granularity == KScaleGranularity::kPerBlock) {
    throw InvalidArgument("options.k_granularity", "block",
                          "per-block K scales are for dense batches, not packed sequences");
  }
  if (!varlen && (t.varlen.total_q != 0 || t.varlen.total_kv != 0)) {
    // Totals without offsets: the caller meant packed sequences, and would get a dense call.
    throw InvalidArgument(
        t.varlen.total_q != 0 ? "tensors.varlen.total_q" : "tensors.varlen.total_kv",
        std::to_string(t.varlen.total_q != 0 ? t.varlen.total_q : t.varlen.total_kv),
        "expected 0 without cu_seqlens_q and cu_seqlens_kv (a dense call)");
  }
  const RowExtent q_rows = varlen ? RowExtent{1, t.varlen.total_q} : RowExtent{p.batch, p.seq_q};
  const RowExtent kv_rows =
      varlen ? RowExtent{1, t.varlen.total_kv} : RowExtent{p.batch, p.seq_kv};
  const DType qk_dtype = p.qk_bits == 8 ? DType::kI8 : DType::kI4x2;
  const std::int64_t qk_row = p.qk_bits == 8 ? p.head_dim : p.head_dim / 2;
  require_dtype(t.q, "tensors.q", {qk_dtype});
  require_dtype(t.k, "tensors.k", {qk_dtype});
  validate_view(t.q, {"tensors.q", {q_rows.batch, p.heads_q, q_rows.rows, qk_row}, 1, 16});
  validate_view(t.k, {"tensors.k", {kv_rows.batch, p.heads_kv, kv_rows.rows, qk_row}, 1, 16});
  validate_scales(t.q_scale, "tensors.q_scale");
  validate_scales(t.k_scale, "tensors.k_scale");
  if (p.variant == Variant::kFullInt8) {
    require_dtype(t.v, "tensors.v", {DType::kI8});
    // The INT8 V layout: tokens contiguous (permuted), channels v_padded_seq apart at least.
    validate_view(t.v, {"tensors.v", {p.batch, p.heads_kv, v_padded_seq(p.seq_kv), p.head_dim}, 1,
                        16, 2});
    validate_scales(t.v_scale, "tensors.v_scale");
  } else {
    require_dtype(t.v, "tensors.v", {DType::kF16, DType::kBF16});
    validate_view(t.v, {"tensors.v", {kv_rows.batch, p.heads_kv, kv_rows.rows, out_channels}, 2,
                        16});
  }
  require_dtype(t.out, "tensors.out", {DType::kF16, DType::kBF16});
  validate_view(t.out, {"tensors.out", {q_rows.batch, p.heads_q, q_rows.rows, out_channels}, 2,
                        4});
  if (t.lse != nullptr && reinterpret_cast<std::uintptr_t>(t.lse) % 4 != 0) {
    throw InvalidArgument("tensors.lse", std::to_string(reinterpret_cast<std::uintptr_t>(t.lse)),
                          "expected 4-byte alignment");
  }
  if (reinterpret_cast<std::uintptr_t>(t.q_dot_k_mean) % 4 != 0) {
    throw InvalidArgument("tensors.q_dot_k_mean",
                          std::to_string(reinterpret_cast<std::uintptr_t>(t.q_dot_k_mean)),
                          "expected 4-byte alignment");
  }
  (void)options;
}

}  // namespace intfa::attention
