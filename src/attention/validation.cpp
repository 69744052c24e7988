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
#include "spec/attention_spec.hpp"

namespace intfa::attention {
namespace {

// The launch grid's y and z dimensions hold at most 65535 blocks: heads and batches of the
// attention kernel, heads and batches of the V quantize kernels.
constexpr int kMaxGridYZ = 65535;
// Offsets inside one (batch, head) are 32-bit in the kernels.
constexpr int kMaxSeq = 1 << 28;
// The quantize kernels index rows with 32-bit integers (their grid's x dimension with them).
constexpr long long kMaxRows = INT_MAX;

void require_at_most(int value, int limit, const std::string& field, const std::string& why) {
  if (value > limit) {
    throw InvalidArgument(field, std::to_string(value),
                          "expected <= " + std::to_string(limit) + " (" + why + ")");
  }
}

std::string strides_text(const std::array<std::int64_t, 4>& strides) {
  return "[" + std::to_string(strides[0]) + ", " + std::to_string(strides[1]) + ", " +
         std::to_string(strides[2]) + ", " + std::to_string(strides[3]) + "]";
}

void require_positive(int value, const std::string& field) {
  if (value < 1) throw InvalidArgument(field, std::to_string(value), "expected >= 1");
}

void require_dtype(const TensorView& view, const std::string& field,
                   std::initializer_list<DType> allowed) {
  if (std::find(allowed.begin(), allowed.end(), view.dtype) != allowed.end()) return;
  std::string names;
  for (DType dtype : allowed) names += (names.empty() ? "" : " or ") + dtype_name(dtype);
  throw InvalidArgument(field + ".dtype", dtype_name(view.dtype), "expected " + names);
}

}  // namespace

void validate_shape(const TensorShape& shape, const char* field) {
  const std::string prefix = field;
  require_positive(shape.batch, prefix + ".batch");
  require_positive(shape.heads, prefix + ".heads");
  require_positive(shape.seq, prefix + ".seq");
  if (shape.head_dim != 64 && shape.head_dim != 128 && shape.head_dim != 256) {
    throw InvalidArgument(prefix + ".head_dim", std::to_string(shape.head_dim),
                          "supported head dims are 64, 128 and 256");
  }
  require_at_most(shape.batch, kMaxGridYZ, prefix + ".batch", "a grid dimension");
  require_at_most(shape.heads, kMaxGridYZ, prefix + ".heads", "a grid dimension");
  require_at_most(shape.seq, kMaxSeq, prefix + ".seq", "32-bit offsets in the kernels");
  const long long rows = static_cast<long long>(shape.batch) * shape.heads * shape.seq;
  if (rows > kMaxRows) {
    throw InvalidArgument(prefix, std::to_string(rows) + " rows (batch * heads * seq)",
                          "expected at most 2^31 - 1 rows (32-bit row indices in the kernels)");
  }
}

void validate_v_seq(int seq_kv) {
  require_positive(seq_kv, "seq_kv");
  require_at_most(seq_kv, kMaxSeq, "seq_kv", "32-bit offsets in the kernels");
}

void validate_v_layout(int batch, int heads_kv, int seq_kv, int head_dim) {
  require_positive(batch, "batch");
  require_positive(heads_kv, "heads_kv");
  require_at_most(batch, kMaxGridYZ, "batch", "a grid dimension");
  require_at_most(heads_kv, kMaxGridYZ, "heads_kv", "a grid dimension");
  validate_v_seq(seq_kv);
  if (head_dim != 64 && head_dim != 128 && head_dim != 256) {
    throw InvalidArgument("head_dim", std::to_string(head_dim),
                          "supported head dims are 64, 128 and 256");
  }
}

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
  if (options.k_granularity == KScaleGranularity::kPerBlock && problem.qk_bits != 8) {
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

void validate_view(const TensorView& view, const ViewRequirements& r) {
  const std::string field = r.field;
  if (view.data == nullptr) throw InvalidArgument(field + ".data", "null", "expected a device pointer");
  if (reinterpret_cast<std::uintptr_t>(view.data) % r.alignment_bytes != 0) {
    throw InvalidArgument(field + ".data", std::to_string(reinterpret_cast<std::uintptr_t>(view.data)),
                          "expected " + std::to_string(r.alignment_bytes) + "-byte alignment");
  }
  const auto& strides = view.strides;
  if (strides[r.contiguous_dim] != 1) {
    throw InvalidArgument(field + ".strides", strides_text(strides),
                          "expected stride 1 on dimension " + std::to_string(r.contiguous_dim));
  }
  // Overflow-safe: the byte offset of the last element must fit in int64, or products of the
  // strides below wrap around (2^62 strides once aliased, and INT64_MAX - 31 passed).
  std::int64_t last = 0;
  for (int dim = 0; dim < 4; ++dim) {
    if (strides[dim] < 0) {
      throw InvalidArgument(field + ".strides", strides_text(strides), "expected strides >= 0");
    }
    std::int64_t step = 0;
    if (__builtin_mul_overflow(strides[dim], r.extents[dim] - 1, &step) ||
        __builtin_add_overflow(last, step, &last)) {
      throw InvalidArgument(field + ".strides", strides_text(strides),
                            "the view spans more than 2^63 elements");
    }
  }
  std::int64_t last_byte = 0;
  if (__builtin_add_overflow(last, 1, &last_byte) ||
      __builtin_mul_overflow(last_byte, std::int64_t{r.element_bytes}, &last_byte)) {
    throw InvalidArgument(field + ".strides", strides_text(strides),
                          "the view spans more than 2^63 bytes");
  }
  for (int dim = 0; dim < 4; ++dim) {
    if (dim == r.contiguous_dim || r.extents[dim] == 1) continue;
    // No overflow: a stride of a dimension of extent > 1 is at most `last`.
    if ((strides[dim] * r.element_bytes) % r.alignment_bytes != 0) {
      throw InvalidArgument(field + ".strides", strides_text(strides),
                            "dimension " + std::to_string(dim) + " must step by a multiple of " +
                                std::to_string(r.alignment_bytes) + " bytes");
    }
  }
  // No two elements may share an address: ordered by stride, each dimension must step over the
  // whole extent of the dimensions below it.
  std::array<int, 4> order{0, 1, 2, 3};
  std::sort(order.begin(), order.end(),
            [&](int a, int b) { return strides[a] < strides[b]; });
  std::int64_t span = 1;
  for (int dim : order) {
    if (r.extents[dim] == 1) continue;
    if (strides[dim] < span) {
      throw InvalidArgument(field + ".strides", strides_text(strides),
                            "strides overlap: dimension " + std::to_string(dim) + " (stride " +
                                std::to_string(strides[dim]) + ") steps inside dimensions that span " +
                                std::to_string(span) + " elements");
    }
    // Saturates past the last element: only a later stride >= INT64_MAX could compare with it,
    // and none fits under `last`.
    if (__builtin_mul_overflow(strides[dim], r.extents[dim], &span)) {
      span = std::numeric_limits<std::int64_t>::max();
    }
  }
}

void validate_scales(const float* scales, const char* field) {
  if (scales == nullptr) throw InvalidArgument(field, "null", "expected a device pointer");
  if (reinterpret_cast<std::uintptr_t>(scales) % 4 != 0) {
    throw InvalidArgument(field, std::to_string(reinterpret_cast<std::uintptr_t>(scales)),
                          "expected 4-byte alignment");
  }
}

void validate_offsets(const int* offsets, const char* field) {
  if (offsets == nullptr) throw InvalidArgument(field, "null", "expected a device pointer");
  if (reinterpret_cast<std::uintptr_t>(offsets) % 4 != 0) {
    throw InvalidArgument(field, std::to_string(reinterpret_cast<std::uintptr_t>(offsets)),
                          "expected 4-byte alignment");
  }
}

namespace {

// The [batch, rows] a view of Q (or K) spans: the problem's, or one packed batch of all rows.
struct RowExtent {
  std::int64_t batch, rows;
};

}  // namespace

void validate_varlen(const VarlenLayout& varlen, const std::string& field) {
  validate_offsets(varlen.cu_seqlens_q, (field + ".cu_seqlens_q").c_str());
  validate_offsets(varlen.cu_seqlens_kv, (field + ".cu_seqlens_kv").c_str());
  require_positive(varlen.total_q, field + ".total_q");
  require_positive(varlen.total_kv, field + ".total_kv");
}

void validate_tensors(const AttentionProblem& p, const AttentionTensors& t,
                      const AttentionOptions& options) {
  const bool varlen = t.varlen.enabled();
  if (varlen) validate_varlen(t.varlen, "tensors.varlen");
  if (varlen && options.k_granularity == KScaleGranularity::kPerBlock) {
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
    validate_view(t.v, {"tensors.v", {kv_rows.batch, p.heads_kv, kv_rows.rows, p.head_dim}, 2, 16});
  }
  require_dtype(t.out, "tensors.out", {DType::kF16, DType::kBF16});
  validate_view(t.out, {"tensors.out", {q_rows.batch, p.heads_q, q_rows.rows, p.head_dim}, 2, 4});
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
