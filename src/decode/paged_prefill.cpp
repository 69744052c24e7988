// paged_prefill (include/intfa/paged.hpp): the gather of the sequences' cached rows into the
// varlen attention kernel's packed layout, Q's quantization, and the varlen attention call,
// every check before the first launch.
#include <algorithm>
#include <array>
#include <climits>
#include <string>

#include "attention/attention_launch.hpp"
#include "attention/validation.hpp"
#include "common/tensor_checks.hpp"
#include "decode/paged_checks.hpp"
#include "families/paged_family.hpp"
#include "intfa/attention.hpp"
#include "intfa/errors.hpp"
#include "intfa/paged.hpp"
#include "intfa/quantize.hpp"
#include "launch/kernel_runtime.hpp"

namespace intfa {
namespace {

using paged::require_positive;

constexpr std::size_t kPartAlignment = 256;
constexpr int kMaxGridY = 65535;

std::size_t align_up(std::size_t bytes) {
  return (bytes + kPartAlignment - 1) / kPartAlignment * kPartAlignment;
}

// The workspace's parts, in order, each 256-byte aligned.
struct PrefillWorkspace {
  std::size_t q8 = 0, q_scale = 0, q_dot_k_mean = 0, k8 = 0, k_scale = 0, v16 = 0,
              cu_seqlens_kv = 0, total = 0;
};

PrefillWorkspace workspace_layout(const PagedKVCache& cache, const PagedPrefillProblem& problem) {
  const std::size_t q_rows = static_cast<std::size_t>(problem.heads_q) * problem.total_q;
  const std::size_t kv_rows = static_cast<std::size_t>(cache.heads_kv) * problem.kv_tokens;
  const std::size_t d = static_cast<std::size_t>(cache.head_dim);
  PrefillWorkspace layout;
  std::size_t at = 0;
  auto part = [&](std::size_t& offset, std::size_t bytes) {
    offset = at;
    at += align_up(bytes);
  };
  part(layout.q8, q_rows * d);
  part(layout.q_scale, q_rows * sizeof(float));
  part(layout.q_dot_k_mean, cache.k_offset != nullptr ? q_rows * sizeof(float) : 0);
  part(layout.k8, kv_rows * d);
  part(layout.k_scale, kv_rows * sizeof(float));
  part(layout.v16, kv_rows * d * 2);
  part(layout.cu_seqlens_kv, (static_cast<std::size_t>(problem.batch) + 1) * sizeof(int));
  layout.total = at;
  return layout;
}

void validate_problem(const PagedKVCache& cache, const PagedPrefillProblem& problem) {
  require_positive(problem.batch, "problem.batch");
  if (problem.batch > kMaxGridY) {
    throw InvalidArgument("problem.batch", std::to_string(problem.batch), "expected <= 65535");
  }
  paged::validate_query_heads(cache, problem.heads_q);
  require_positive(problem.total_q, "problem.total_q");
  require_positive(problem.max_q_len, "problem.max_q_len");
  if (problem.max_q_len > problem.total_q) {
    throw InvalidArgument("problem.max_q_len", std::to_string(problem.max_q_len),
                          "expected at most problem.total_q = " + std::to_string(problem.total_q));
  }
  paged::validate_sequence_bounds(cache, problem.max_pages, problem.max_seq_len);
  if (problem.max_q_len > problem.max_seq_len) {
    throw InvalidArgument(
        "problem.max_q_len", std::to_string(problem.max_q_len),
        "expected at most problem.max_seq_len = " + std::to_string(problem.max_seq_len) +
            " (a sequence's queries are among its cached tokens)");
  }
  require_positive(problem.kv_tokens, "problem.kv_tokens");
  // Packed rows are 32-bit in the gather and the attention kernels.
  if (problem.kv_tokens > checks::kMaxSeq || problem.total_q > checks::kMaxSeq) {
    const bool kv = problem.kv_tokens > checks::kMaxSeq;
    throw InvalidArgument(kv ? "problem.kv_tokens" : "problem.total_q",
                          std::to_string(kv ? problem.kv_tokens : problem.total_q),
                          "expected at most 2^28 rows");
  }
  // The gather's rows (token, head) of one sequence are 32-bit.
  if (static_cast<long long>(problem.max_seq_len) * cache.heads_kv > INT_MAX) {
    throw InvalidArgument("problem.max_seq_len", std::to_string(problem.max_seq_len),
                          "expected max_seq_len * heads_kv < 2^31");
  }
  if (problem.kv_tokens < problem.max_seq_len) {
    throw InvalidArgument("problem.kv_tokens", std::to_string(problem.kv_tokens),
                          "expected at least problem.max_seq_len = " +
                              std::to_string(problem.max_seq_len) + " (the sum of seq_lens)");
  }
}

void validate_tensors(const PagedKVCache& cache, const PagedPrefillProblem& problem,
                      const PagedPrefillTensors& tensors, std::size_t needed) {
  checks::require_dtype(tensors.q, "tensors.q", {DType::kF16, DType::kBF16});
  if (tensors.out.dtype != tensors.q.dtype) {
    throw InvalidArgument("tensors.out.dtype", dtype_name(tensors.out.dtype),
                          "expected " + dtype_name(tensors.q.dtype) + " as tensors.q");
  }
  const std::array<std::int64_t, 4> extents = {1, problem.heads_q, problem.total_q, cache.head_dim};
  checks::validate_view(tensors.q, {"tensors.q", extents, 2, 16});
  checks::validate_view(tensors.out, {"tensors.out", extents, 2, 16});
  if (tensors.lse != nullptr) paged::require_pointer(tensors.lse, "tensors.lse", 4);
  paged::require_pointer(tensors.query_start_loc, "tensors.query_start_loc", 4);
  paged::require_pointer(tensors.block_table, "tensors.block_table", 4);
  paged::require_pointer(tensors.seq_lens, "tensors.seq_lens", 4);
  paged::require_pointer(tensors.workspace, "tensors.workspace", 256);
  if (tensors.workspace_bytes < needed) {
    throw InvalidArgument(
        "tensors.workspace_bytes", std::to_string(tensors.workspace_bytes),
        "expected at least paged_prefill_workspace_bytes = " + std::to_string(needed));
  }
}

TensorView packed_rows(void* data, DType dtype, int heads, long long rows, int head_dim) {
  return TensorView::dense(data, dtype, Layout::kBHND,
                           {1, heads, static_cast<int>(rows), head_dim});
}

}  // namespace

std::size_t paged_prefill_workspace_bytes(const PagedKVCache& cache,
                                          const PagedPrefillProblem& problem) {
  paged::validate_cache_geometry(cache);
  validate_problem(cache, problem);
  return workspace_layout(cache, problem).total;
}

void paged_prefill(const PagedKVCache& cache, const PagedPrefillProblem& problem,
                   const PagedPrefillTensors& tensors, CUstream stream,
                   const PagedPrefillOptions& options) {
  paged::validate_cache(cache);
  validate_problem(cache, problem);
  const PrefillWorkspace layout = workspace_layout(cache, problem);
  validate_tensors(cache, problem, tensors, layout.total);
  const DType dtype = tensors.q.dtype;
  const kernels::ElementType v_type =
      dtype == DType::kBF16 ? kernels::ElementType::kBF16 : kernels::ElementType::kF16;
  auto* workspace = static_cast<unsigned char*>(tensors.workspace);
  auto* q_scale = reinterpret_cast<float*>(workspace + layout.q_scale);
  auto* q_dot_k_mean = cache.k_offset != nullptr
                           ? reinterpret_cast<float*>(workspace + layout.q_dot_k_mean)
                           : nullptr;
  auto* k_scale = reinterpret_cast<float*>(workspace + layout.k_scale);
  auto* cu_seqlens_kv = reinterpret_cast<int*>(workspace + layout.cu_seqlens_kv);
  const TensorView q8 = packed_rows(workspace + layout.q8, DType::kI8, problem.heads_q,
                                    problem.total_q, cache.head_dim);
  const TensorView k8 = packed_rows(workspace + layout.k8, DType::kI8, cache.heads_kv,
                                    problem.kv_tokens, cache.head_dim);
  const TensorView v16 =
      packed_rows(workspace + layout.v16, dtype, cache.heads_kv, problem.kv_tokens, cache.head_dim);

  AttentionProblem attention;
  attention.batch = problem.batch;
  attention.heads_q = problem.heads_q;
  attention.heads_kv = cache.heads_kv;
  attention.seq_q = problem.max_q_len;
  attention.seq_kv = problem.max_seq_len;
  attention.head_dim = cache.head_dim;
  attention.causal = problem.causal;
  attention.variant = Variant::kHalfInt8;
  AttentionTensors attend;
  attend.q = q8;
  attend.k = k8;
  attend.v = v16;
  attend.q_scale = q_scale;
  attend.k_scale = k_scale;
  attend.out = tensors.out;
  attend.lse = tensors.lse;
  attend.varlen = VarlenLayout{tensors.query_start_loc, cu_seqlens_kv, problem.total_q,
                               static_cast<int>(problem.kv_tokens)};
  attend.q_dot_k_mean = q_dot_k_mean;
  AttentionOptions attention_options;
  attention_options.softmax_scale = options.softmax_scale;
  // K was smoothed by the cache's k_offset or not at all, and nothing is rotated: the Q pass must
  // do the same (the options' defaults, K smoothed and rotation automatic, are the 16-bit call's).
  attention_options.smooth_k = cache.k_offset != nullptr;
  attention_options.rotate_qk = QKRotation::kOff;
  // The Hopper kernel quantizes the 16-bit Q itself (no pass over Q); with K smoothed, it also
  // writes q . k_offset, the LSE's term (the cache's k_offset is the packed K's channel means).
  attention::SixteenBitCall sixteen_bit;
  sixteen_bit.q = tensors.q;
  sixteen_bit.k_channel_mean = cache.k_offset;
  sixteen_bit.q_dot_k_mean = q_dot_k_mean;
  // Every check of the attention call, and its kernel loaded, before the first launch.
  attention::validate_problem(attention);
  attention::validate_options(attention, attention_options);
  const attention::PlannedLaunch planned =
      attention::plan_launch(attention, attend, stream, attention_options, &sixteen_bit);

  const paged::PagedSpec spec =
      paged::gather_spec(planned.spec.arch, cache.head_dim, cache.bits, v_type);
  kernels::PagedGatherParams params{};
  params.cache = paged::cache_params(cache);
  params.block_table = tensors.block_table;
  params.block_table_stride = problem.max_pages;
  params.seq_lens = tensors.seq_lens;
  params.batch = problem.batch;
  params.max_seq_len = problem.max_seq_len;
  params.kv_rows = static_cast<int>(problem.kv_tokens);
  params.heads_kv_divisor = kernels::make_fast_divisor(cache.heads_kv);
  params.k = static_cast<kernels::u8*>(k8.data);
  params.k_scale = k_scale;
  params.v = v16.data;
  params.cu_seqlens_kv = cu_seqlens_kv;
  const int rows_per_block = kernels::paged_gather_rows_per_block(cache.head_dim);
  const long long rows = static_cast<long long>(problem.max_seq_len) * cache.heads_kv;
  const launch::LoadedKernel& gather =
      launch::KernelRuntime::instance().load(spec, planned.context, 0);
  launch::LaunchShape shape;
  shape.grid[0] = static_cast<unsigned>((rows + rows_per_block - 1) / rows_per_block);
  shape.grid[1] = static_cast<unsigned>(problem.batch);
  shape.block[0] = kernels::kPagedRowThreads;

  if (!planned.quantizes_q) {  // the portable kernel: Q's own pass (its checks before launching)
    QuantizeOptions q_options;
    if (cache.k_offset != nullptr) {
      // The cache's K was smoothed by k_offset: the LSE adds q . k_offset back (K smoothing).
      q_options.k_channel_mean = cache.k_offset;
      q_options.q_dot_k_mean = q_dot_k_mean;
      q_options.k_channel_mean_heads = cache.heads_kv;
    }
    quantize_qk(TensorShape{1, problem.heads_q, problem.total_q, cache.head_dim}, tensors.q, q8,
                q_scale, stream, q_options);
  }
  launch::launch(gather, shape, stream, &params);
  launch::launch(*planned.kernel, planned.shape, stream, planned.arguments());
}

}  // namespace intfa
