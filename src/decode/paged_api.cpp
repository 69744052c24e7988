// The paged KV cache's public API (include/intfa/paged.hpp): every check before any launch, then
// the family's kernels through the JIT runtime.
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdio>

#include "common/log.hpp"
#include "common/tensor_checks.hpp"
#include "decode/paged_checks.hpp"
#include "device/device_info.hpp"
#include "device/driver_api.hpp"
#include "families/paged_family.hpp"
#include "intfa/errors.hpp"
#include "intfa/paged.hpp"
#include "launch/kernel_runtime.hpp"

namespace intfa {

using paged::require_pointer;
using paged::require_positive;
using paged::validate_cache;
using paged::validate_cache_geometry;
using paged::where;
using paged::Where;

namespace {

constexpr int kMaxGridYZ = 65535;
constexpr int kMaxQueries = 64;
constexpr double kLog2E = 1.4426950408889634;

void require_head_dim(int head_dim, const std::string& field) {
  if (head_dim != 64 && head_dim != 128 && head_dim != 256) {
    throw InvalidArgument(field, std::to_string(head_dim),
                          "supported head dims are 64, 128 and 256");
  }
}

kernels::ElementType float_type(const TensorView& view, const std::string& field) {
  if (view.dtype == DType::kF16) return kernels::ElementType::kF16;
  if (view.dtype == DType::kBF16) return kernels::ElementType::kBF16;
  throw InvalidArgument(field + ".dtype", dtype_name(view.dtype), "expected f16 or bf16");
}

void validate_problem(const PagedKVCache& cache, const PagedDecodeProblem& problem) {
  require_positive(problem.batch, "problem.batch");
  require_positive(problem.q_len, "problem.q_len");
  if (problem.q_len > kMaxQueries) {
    throw InvalidArgument("problem.q_len", std::to_string(problem.q_len),
                          "expected at most 64 queries per sequence (decode; use "
                          "paged_prefill for more)");
  }
  paged::validate_query_heads(cache, problem.heads_q);
  if (static_cast<long long>(problem.batch) * cache.heads_kv > kMaxGridYZ) {
    throw InvalidArgument("problem.batch", std::to_string(problem.batch),
                          "expected batch * heads_kv <= 65535 (the grid's z dimension)");
  }
  const long long rows = static_cast<long long>(problem.q_len) * (problem.heads_q / cache.heads_kv);
  if ((rows + 15) / 16 > kMaxGridYZ) {
    throw InvalidArgument("problem.heads_q", std::to_string(problem.heads_q),
                          "expected q_len * heads_q / heads_kv <= 16 * 65535 rows");
  }
  paged::validate_sequence_bounds(cache, problem.max_pages, problem.max_seq_len);
}

void validate_options(const PagedDecodeOptions& options) {
  if (!std::isfinite(options.softmax_scale) || options.softmax_scale < 0.0) {
    throw InvalidArgument("options.softmax_scale", std::to_string(options.softmax_scale),
                          "expected a finite value > 0 (or 0 for 1/sqrt(head_dim))");
  }
  const double scale_log2 = options.softmax_scale * kLog2E;
  if (options.softmax_scale != 0.0 && !(scale_log2 >= FLT_MIN && scale_log2 <= FLT_MAX)) {
    char value[32];
    std::snprintf(value, sizeof value, "%g", options.softmax_scale);
    throw InvalidArgument("options.softmax_scale", value,
                          "expected a scale float32 holds (times log2(e), in [1.2e-38, 3.4e38])");
  }
  if (options.num_splits < 0 || options.num_splits > paged::kMaxSplits) {
    throw InvalidArgument("options.num_splits", std::to_string(options.num_splits),
                          "expected 0 (the heuristic) or 1..64");
  }
  const PagedDecodeConfig& config = options.config;
  if (config.block_rows != 0 && config.block_rows != 8 && config.block_rows != 16 &&
      config.block_rows != 32 && config.block_rows != 64) {
    throw InvalidArgument("options.config.block_rows", std::to_string(config.block_rows),
                          "expected 0 (the heuristic), 8, 16, 32 or 64");
  }
  if (config.stage_tokens != 0 && config.stage_tokens != 64 && config.stage_tokens != 128) {
    throw InvalidArgument("options.config.stage_tokens", std::to_string(config.stage_tokens),
                          "expected 0 (the heuristic), 64 or 128");
  }
  if (config.stages != 0 && (config.stages < 2 || config.stages > 4)) {
    throw InvalidArgument("options.config.stages", std::to_string(config.stages),
                          "expected 0 (the heuristic), 2, 3 or 4");
  }
}

// A decode kernel chosen for `rows` rows per KV head, and the splits it takes. The splits follow
// from the device and the config alone (paged::resident_blocks), never from the query type or
// the compiled kernel, so that paged_decode_workspace_bytes and paged_decode agree.
struct DecodePlan {
  paged::PagedSpec spec;
  unsigned shared_bytes = 0;
  int row_blocks = 0;
  int splits = 1;
};

// The row blocks of the config the options resolve to fit the grid's y dimension (8-row blocks
// take twice as many as the 16 rows validate_problem counts with).
void validate_row_blocks(const PagedKVCache& cache, const PagedDecodeProblem& problem,
                         const PagedDecodeOptions& options) {
  const long long rows = static_cast<long long>(problem.q_len) * (problem.heads_q / cache.heads_kv);
  const PagedDecodeConfig config =
      paged::resolve_config(options.config, static_cast<int>(rows), cache.head_dim, cache.bits);
  if ((rows + config.block_rows - 1) / config.block_rows > kMaxGridYZ) {
    throw InvalidArgument("options.config.block_rows", std::to_string(config.block_rows),
                          "expected q_len * heads_q / heads_kv <= block_rows * 65535 rows");
  }
}

DecodePlan plan_decode(const PagedKVCache& cache, const PagedDecodeProblem& problem,
                       const PagedDecodeOptions& options, kernels::ElementType query,
                       kernels::ElementType output, const device::DeviceInfo& info) {
  const int group = problem.heads_q / cache.heads_kv;
  const int rows = problem.q_len * group;
  DecodePlan plan;
  const PagedDecodeConfig config =
      paged::resolve_config(options.config, rows, cache.head_dim, cache.bits);
  plan.spec = paged::decode_spec(info.arch, cache.head_dim, cache.bits, query, output, config);
  paged::check_decode_config(plan.spec, info.max_shared_bytes_per_block_optin);
  plan.shared_bytes = static_cast<unsigned>(paged::decode_shared_bytes(plan.spec));
  plan.row_blocks = (rows + config.block_rows - 1) / config.block_rows;
  if (options.num_splits > 0) {
    plan.splits = options.num_splits;
  } else {
    const long long units =
        static_cast<long long>(problem.batch) * cache.heads_kv * plan.row_blocks;
    plan.splits = paged::heuristic_splits(units, problem.max_seq_len,
                                          paged::resident_blocks(plan.spec, info));
  }
  return plan;
}

// `head_dim` is the merge kernel's (paged::merge_spec).
void launch_merge(const launch::LoadedKernel& kernel, int head_dim,
                  kernels::MergeStatesParams params, CUstream stream) {
  const long long rows = static_cast<long long>(params.outer) * params.inner * params.heads;
  params.state_groups = paged::merge_state_groups(params.num_states, head_dim);
  const int rows_per_block = kernels::paged_rows_per_set(head_dim) / params.state_groups;
  launch::LaunchShape shape;
  shape.grid[0] = static_cast<unsigned>((rows + rows_per_block - 1) / rows_per_block);
  shape.block[0] = kernels::kPagedRowThreads;
  launch::launch(kernel, shape, stream, &params);
}

void set3(kernels::i64 (&target)[3], std::int64_t a, std::int64_t b, std::int64_t c) {
  target[0] = a;
  target[1] = b;
  target[2] = c;
}

}  // namespace

void paged::require_pointer(const void* pointer, const std::string& field, int alignment) {
  if (pointer == nullptr) throw InvalidArgument(field, "null", "expected a device pointer");
  const auto address = reinterpret_cast<std::uintptr_t>(pointer);
  if (address % static_cast<std::uintptr_t>(alignment) != 0) {
    throw InvalidArgument(field, std::to_string(address),
                          "expected " + std::to_string(alignment) + "-byte alignment");
  }
}

void paged::require_positive(long long value, const std::string& field) {
  if (value < 1) throw InvalidArgument(field, std::to_string(value), "expected >= 1");
}

void paged::validate_query_heads(const PagedKVCache& cache, int heads_q) {
  require_positive(heads_q, "problem.heads_q");
  if (heads_q % cache.heads_kv != 0) {
    throw InvalidArgument(
        "problem.heads_q", std::to_string(heads_q),
        "expected a multiple of cache.heads_kv = " + std::to_string(cache.heads_kv) + " (GQA/MQA)");
  }
}

void paged::validate_sequence_bounds(const PagedKVCache& cache, int max_pages, int max_seq_len) {
  require_positive(max_pages, "problem.max_pages");
  require_positive(max_seq_len, "problem.max_seq_len");
  const long long capacity = static_cast<long long>(max_pages) * cache.page_size;
  if (max_seq_len > capacity) {
    throw InvalidArgument("problem.max_seq_len", std::to_string(max_seq_len),
                          "expected at most max_pages * page_size = " + std::to_string(capacity));
  }
}

void paged::validate_cache_geometry(const PagedKVCache& cache) {
  require_positive(cache.num_pages, "cache.num_pages");
  if (cache.page_size != 16 && cache.page_size != 32 && cache.page_size != 64 &&
      cache.page_size != 128) {
    throw InvalidArgument("cache.page_size", std::to_string(cache.page_size),
                          "expected 16, 32, 64 or 128 tokens");
  }
  require_positive(cache.heads_kv, "cache.heads_kv");
  if (cache.heads_kv > kMaxGridYZ) {
    throw InvalidArgument("cache.heads_kv", std::to_string(cache.heads_kv), "expected <= 65535");
  }
  require_head_dim(cache.head_dim, "cache.head_dim");
  if (cache.bits != 8 && cache.bits != 4) {
    throw InvalidArgument("cache.bits", std::to_string(cache.bits), "expected 8 or 4");
  }
  // The kernels index cache rows (page, head, position) with 32-bit integers.
  const long long rows = static_cast<long long>(cache.num_pages) * cache.heads_kv * cache.page_size;
  if (rows > INT_MAX) {
    throw InvalidArgument("cache.num_pages", std::to_string(cache.num_pages),
                          "expected num_pages * heads_kv * page_size < 2^31 (32-bit row indices)");
  }
}

void paged::validate_cache(const PagedKVCache& cache) {
  validate_cache_geometry(cache);
  require_pointer(cache.k_data, "cache.k_data", 16);
  require_pointer(cache.v_data, "cache.v_data", 16);
  require_pointer(cache.k_scale, "cache.k_scale", 16);
  require_pointer(cache.v_scale, "cache.v_scale", 16);
  if (cache.k_offset != nullptr) require_pointer(cache.k_offset, "cache.k_offset", 4);
}

paged::Where paged::where(CUstream stream) {
  Where result;
  result.context = launch::launch_context(stream);
  CUdevice device = 0;
  INTFA_DRIVER(cuCtxGetDevice, &device);
  result.info = &device::cached_device_info(device);
  return result;
}

void paged::validate_decode(const PagedKVCache& cache, const PagedDecodeProblem& problem,
                            const PagedDecodeOptions& options) {
  validate_cache_geometry(cache);
  validate_problem(cache, problem);
  validate_options(options);
  validate_row_blocks(cache, problem, options);
}

std::size_t paged_data_bytes(const PagedKVCache& cache) {
  validate_cache_geometry(cache);
  return static_cast<std::size_t>(cache.num_pages) * cache.heads_kv * cache.page_size *
         kernels::paged_row_bytes(cache.head_dim, cache.bits);
}

std::size_t paged_scale_bytes(const PagedKVCache& cache) {
  validate_cache_geometry(cache);
  return static_cast<std::size_t>(cache.num_pages) * cache.heads_kv * cache.page_size *
         kernels::paged_scales_per_row(cache.head_dim, cache.bits) *
         kernels::paged_scale_bytes(cache.bits);
}

void paged_append(const PagedKVCache& cache, const TensorView& k, const TensorView& v,
                  const int* slot_mapping, int tokens, CUstream stream) {
  validate_cache(cache);
  if (tokens < 0) throw InvalidArgument("tokens", std::to_string(tokens), "expected >= 0");
  const kernels::ElementType input = float_type(k, "k");
  if (v.dtype != k.dtype) {
    throw InvalidArgument("v.dtype", dtype_name(v.dtype),
                          "expected " + dtype_name(k.dtype) + " as k");
  }
  if (tokens == 0) return;
  // The kernel indexes the rows of K or V (and a block's worth past them) in 31 bits. Checked
  // before the views, which too many tokens make overlap: that named k.strides, not tokens.
  const long long rows_per_tensor = static_cast<long long>(tokens) * cache.heads_kv;
  if (rows_per_tensor >= (1LL << 30)) {
    throw InvalidArgument("tokens", std::to_string(tokens), "expected tokens * heads_kv < 2^30");
  }
  const std::array<std::int64_t, 4> extents = {1, cache.heads_kv, tokens, cache.head_dim};
  checks::validate_view(k, {"k", extents, 2, 16});
  checks::validate_view(v, {"v", extents, 2, 16});
  require_pointer(slot_mapping, "slot_mapping", 4);
  const int rows_per_block = kernels::paged_append_rows_per_block(cache.head_dim);
  const long long blocks = (rows_per_tensor + rows_per_block - 1) / rows_per_block;

  const Where at = where(stream);
  const paged::PagedSpec spec =
      paged::append_spec(at.info->arch, cache.head_dim, cache.bits, input);
  kernels::PagedAppendParams params{};
  params.k = k.data;
  params.v = v.data;
  params.k_head_stride = k.strides[1];
  params.k_token_stride = k.strides[2];
  params.v_head_stride = v.strides[1];
  params.v_token_stride = v.strides[2];
  params.slot_mapping = slot_mapping;
  params.rows = static_cast<int>(rows_per_tensor);
  params.heads_kv_divisor = kernels::make_fast_divisor(cache.heads_kv);
  params.cache = paged::cache_params(cache);
  const launch::LoadedKernel& kernel = launch::KernelRuntime::instance().load(spec, at.context, 0);
  launch::LaunchShape shape;
  shape.grid[0] = static_cast<unsigned>(blocks);
  shape.grid[1] = 2;  // K's rows, V's rows
  shape.block[0] = kernels::kPagedRowThreads;
  launch::launch(kernel, shape, stream, &params);
}

int paged_decode_splits(const PagedKVCache& cache, const PagedDecodeProblem& problem,
                        const PagedDecodeOptions& options) {
  paged::validate_decode(cache, problem, options);
  return plan_decode(cache, problem, options, kernels::ElementType::kF16,
                     kernels::ElementType::kF16, *where(nullptr).info)
      .splits;
}

std::size_t paged_decode_workspace_bytes(const PagedKVCache& cache,
                                         const PagedDecodeProblem& problem,
                                         const PagedDecodeOptions& options) {
  paged::validate_decode(cache, problem, options);
  const device::DeviceInfo& info = *where(nullptr).info;
  std::size_t most = 0;
  // Fewer sequences or queries may take more splits: the largest need over all of them.
  for (int q_len = 1; q_len <= problem.q_len; ++q_len) {
    PagedDecodeProblem smaller = problem;
    smaller.q_len = q_len;
    smaller.batch = 1;
    const DecodePlan plan = plan_decode(cache, smaller, options, kernels::ElementType::kF16,
                                        kernels::ElementType::kF16, info);
    for (int batch = 1; batch <= problem.batch; ++batch) {
      const int splits = options.num_splits > 0
                             ? options.num_splits
                             : paged::heuristic_splits(
                                   static_cast<long long>(batch) * cache.heads_kv * plan.row_blocks,
                                   problem.max_seq_len, paged::resident_blocks(plan.spec, info));
      most = std::max(
          most, paged::workspace_bytes(splits, batch, q_len, problem.heads_q, cache.head_dim));
    }
  }
  return most;
}

void paged_decode(const PagedKVCache& cache, const PagedDecodeProblem& problem,
                  const PagedDecodeTensors& tensors, CUstream stream,
                  const PagedDecodeOptions& options) {
  validate_cache(cache);
  validate_problem(cache, problem);
  validate_options(options);
  validate_row_blocks(cache, problem, options);
  const kernels::ElementType query = float_type(tensors.q, "tensors.q");
  const kernels::ElementType output = float_type(tensors.out, "tensors.out");
  const std::array<std::int64_t, 4> extents = {problem.batch, problem.heads_q, problem.q_len,
                                               cache.head_dim};
  checks::validate_view(tensors.q, {"tensors.q", extents, 2, 16});
  checks::validate_view(tensors.out, {"tensors.out", extents, 2, 16});
  if (tensors.lse != nullptr) require_pointer(tensors.lse, "tensors.lse", 4);
  require_pointer(tensors.block_table, "tensors.block_table", 4);
  require_pointer(tensors.seq_lens, "tensors.seq_lens", 4);

  const Where at = where(stream);
  const DecodePlan plan = plan_decode(cache, problem, options, query, output, *at.info);
  // The workspace follows from the plan (the device's splits), and is checked before the kernel
  // is compiled: a bad input compiles nothing (a null workspace compiled and cached the kernel).
  const std::size_t needed = paged::workspace_bytes(plan.splits, problem.batch, problem.q_len,
                                                    problem.heads_q, cache.head_dim);
  if (needed > 0) {
    require_pointer(tensors.workspace, "tensors.workspace", 16);
    if (tensors.workspace_bytes < needed) {
      throw InvalidArgument("tensors.workspace_bytes", std::to_string(tensors.workspace_bytes),
                            "expected at least " + std::to_string(needed) + " for " +
                                std::to_string(plan.splits) +
                                " splits (paged_decode_workspace_bytes)");
    }
  }
  launch::LaunchShape shape;
  shape.grid[0] = static_cast<unsigned>(plan.splits);
  shape.grid[1] = static_cast<unsigned>(plan.row_blocks);
  shape.grid[2] = static_cast<unsigned>(problem.batch * cache.heads_kv);
  shape.block[0] = kernels::kPagedDecodeWarps * 32;
  shape.dynamic_shared_bytes = plan.shared_bytes;
  // Two splits of a row block are one cluster, which merges them (paged_decode.cuh, "The
  // cluster's merge"): no workspace state and no second launch, where paged::
  // splits_may_merge_in_clusters and the clusters take no more waves than the blocks alone.
  // Otherwise merge_states merges them, loaded with the decode kernel's so that on a cold cache
  // the two compile at once (unless clusters were asked about first: the decode kernel is then
  // loaded before the merge's).
  const launch::LoadedKernel* decode_kernel = nullptr;
  const launch::LoadedKernel* merge_kernel = nullptr;
  const bool may_cluster = plan.splits > 1 && paged::splits_may_merge_in_clusters(plan.spec,
                                                                                  plan.splits);
  bool cluster_merge = false;
  if (plan.splits == 1 || may_cluster) {
    decode_kernel =
        &launch::KernelRuntime::instance().load(plan.spec, at.context, plan.shared_bytes);
    if (may_cluster) {
      shape.cluster_blocks = static_cast<unsigned>(plan.splits);
      const long long clusters =
          static_cast<long long>(plan.row_blocks) * problem.batch * cache.heads_kv;
      const long long at_once = launch::max_active_clusters(*decode_kernel, shape);
      const long long resident = paged::resident_blocks(plan.spec, *at.info);
      cluster_merge = paged::clusters_take_no_more_waves(clusters, plan.splits, at_once, resident);
      if (log::info_wanted()) {
        log::info_once("paged_decode: " + std::to_string(clusters) + " clusters of " +
                       std::to_string(plan.splits) + " splits, " + std::to_string(at_once) +
                       " of them at once: " +
                       (cluster_merge ? "the clusters merge" : "merge_states merges"));
      }
      if (!cluster_merge) shape.cluster_blocks = 1;
    }
  }
  if (plan.splits > 1 && !cluster_merge) {
    const paged::PagedSpec merge_spec =
        paged::merge_spec(at.info->arch, cache.head_dim, kernels::ElementType::kF32, output);
    launch::CallKernels call_kernels;
    call_kernels.add(plan.spec, plan.shared_bytes, &decode_kernel);
    call_kernels.add(merge_spec, 0, &merge_kernel);
    call_kernels.load(at.context);
  }

  const double softmax_scale = options.softmax_scale > 0.0
                                   ? options.softmax_scale
                                   : 1.0 / std::sqrt(static_cast<double>(cache.head_dim));
  kernels::PagedDecodeParams params{};
  params.q = tensors.q.data;
  params.q_batch_stride = tensors.q.strides[0];
  params.q_head_stride = tensors.q.strides[1];
  params.q_token_stride = tensors.q.strides[2];
  params.out = tensors.out.data;
  params.out_batch_stride = tensors.out.strides[0];
  params.out_head_stride = tensors.out.strides[1];
  params.out_token_stride = tensors.out.strides[2];
  params.lse = tensors.lse;
  params.block_table = tensors.block_table;
  params.block_table_stride = problem.max_pages;
  params.seq_lens = tensors.seq_lens;
  params.cache = paged::cache_params(cache);
  params.batch = problem.batch;
  params.q_len = problem.q_len;
  params.heads_q = problem.heads_q;
  params.group = problem.heads_q / cache.heads_kv;
  params.num_splits = plan.splits;
  params.causal = problem.causal ? 1 : 0;
  params.scale_log2 = static_cast<float>(softmax_scale * kLog2E);
  if (plan.splits > 1 && !cluster_merge) {
    auto* workspace = static_cast<unsigned char*>(tensors.workspace);
    params.partial_out = reinterpret_cast<float*>(workspace);
    params.partial_lse = reinterpret_cast<float*>(
        workspace + paged::workspace_lse_offset(plan.splits, problem.batch, problem.q_len,
                                                problem.heads_q, cache.head_dim));
  }
  launch::launch(*decode_kernel, shape, stream, &params);
  if (plan.splits == 1 || cluster_merge) return;

  // The combine: merge_states of the splits' FP32 states into out and lse.
  const std::int64_t heads_q = problem.heads_q, q_len = problem.q_len, d = cache.head_dim;
  kernels::MergeStatesParams merge{};
  merge.first_values = params.partial_out;
  merge.rest_values = params.partial_out + problem.batch * q_len * heads_q * d;
  merge.first_lse = params.partial_lse;
  merge.rest_lse = params.partial_lse + problem.batch * q_len * heads_q;
  merge.values_state_stride = problem.batch * q_len * heads_q * d;
  merge.lse_state_stride = problem.batch * q_len * heads_q;
  set3(merge.first_values_strides, q_len * heads_q * d, heads_q * d, d);
  set3(merge.rest_values_strides, q_len * heads_q * d, heads_q * d, d);
  set3(merge.first_lse_strides, q_len * heads_q, heads_q, 1);
  set3(merge.rest_lse_strides, q_len * heads_q, heads_q, 1);
  merge.merged = tensors.out.data;
  set3(merge.merged_strides, tensors.out.strides[0], tensors.out.strides[2],
       tensors.out.strides[1]);
  merge.merged_lse = tensors.lse;
  set3(merge.merged_lse_strides, q_len * heads_q, heads_q, 1);
  merge.outer = problem.batch;
  merge.inner = problem.q_len;
  merge.heads = problem.heads_q;
  merge.num_states = plan.splits;
  launch_merge(*merge_kernel, cache.head_dim, merge, stream);
}

AttentionState AttentionState::of(const TensorView& values, float* lse, const TensorShape& shape) {
  AttentionState state;
  state.values = values;
  state.lse = lse;
  state.lse_strides = {static_cast<std::int64_t>(shape.heads) * shape.seq, shape.seq, 1};
  return state;
}

void merge_states(const TensorShape& shape, const AttentionState& a, const AttentionState& b,
                  const AttentionState& out, CUstream stream) {
  require_positive(shape.batch, "shape.batch");
  require_positive(shape.heads, "shape.heads");
  require_positive(shape.seq, "shape.seq");
  require_head_dim(shape.head_dim, "shape.head_dim");
  const long long rows = static_cast<long long>(shape.batch) * shape.heads * shape.seq;
  if (rows > INT_MAX) {
    throw InvalidArgument("shape", std::to_string(rows) + " rows",
                          "expected at most 2^31 - 1 rows (batch * heads * seq)");
  }
  const kernels::ElementType state_type = float_type(a.values, "a.values");
  if (b.values.dtype != a.values.dtype) {
    throw InvalidArgument("b.values.dtype", dtype_name(b.values.dtype),
                          "expected " + dtype_name(a.values.dtype) + " as a.values");
  }
  const kernels::ElementType output = float_type(out.values, "out.values");
  const std::array<std::int64_t, 4> extents = {shape.batch, shape.heads, shape.seq, shape.head_dim};
  checks::validate_view(a.values, {"a.values", extents, 2, 16});
  checks::validate_view(b.values, {"b.values", extents, 2, 16});
  checks::validate_view(out.values, {"out.values", extents, 2, 16});
  require_pointer(a.lse, "a.lse", 4);
  require_pointer(b.lse, "b.lse", 4);
  if (out.lse != nullptr) require_pointer(out.lse, "out.lse", 4);
  // The LSEs' strides follow the views' rules: 2^62 or INT64_MAX wrapped the last row's offset,
  // and {0, 0, 0} had every row write one slot.
  const std::array<std::int64_t, 3> lse_extents = {shape.batch, shape.heads, shape.seq};
  for (const auto* state : {&a, &b, &out}) {
    const char* name = state == &a ? "a" : state == &b ? "b" : "out";
    if (state->lse == nullptr) continue;
    checks::validate_strides(state->lse_strides, lse_extents, sizeof(float), name, ".lse_strides");
  }
  // In place: the merge reads each element and LSE of a state before it writes the same one,
  // which holds only where out lays them out exactly as that state does.
  for (const auto* state : {&a, &b}) {
    const std::string name = state == &a ? "a" : "b";
    if (out.values.data == state->values.data &&
        (out.values.strides != state->values.strides || out.values.dtype != state->values.dtype)) {
      throw InvalidArgument(
          "out.values", "(" + name + ".values with other strides or dtype)",
          "expected the same strides and dtype as " + name + ".values when merging in place");
    }
    if (out.lse != nullptr && out.lse == state->lse && out.lse_strides != state->lse_strides) {
      throw InvalidArgument("out.lse_strides", "(" + name + ".lse with other strides)",
                            "expected " + name + ".lse_strides when merging in place");
    }
  }

  const Where at = where(stream);
  kernels::MergeStatesParams params{};
  params.first_values = a.values.data;
  params.rest_values = b.values.data;
  params.first_lse = a.lse;
  params.rest_lse = b.lse;
  const auto& av = a.values.strides;
  const auto& bv = b.values.strides;
  const auto& ov = out.values.strides;
  // Kernel rows are (batch, seq, heads); views and LSE strides are (batch, heads, seq).
  set3(params.first_values_strides, av[0], av[2], av[1]);
  set3(params.rest_values_strides, bv[0], bv[2], bv[1]);
  set3(params.first_lse_strides, a.lse_strides[0], a.lse_strides[2], a.lse_strides[1]);
  set3(params.rest_lse_strides, b.lse_strides[0], b.lse_strides[2], b.lse_strides[1]);
  params.merged = out.values.data;
  set3(params.merged_strides, ov[0], ov[2], ov[1]);
  params.merged_lse = out.lse;
  set3(params.merged_lse_strides, out.lse_strides[0], out.lse_strides[2], out.lse_strides[1]);
  params.outer = shape.batch;
  params.inner = shape.seq;
  params.heads = shape.heads;
  params.num_states = 2;
  launch_merge(
      launch::KernelRuntime::instance().load(
          paged::merge_spec(at.info->arch, shape.head_dim, state_type, output), at.context, 0),
      shape.head_dim, params, stream);
}

}  // namespace intfa
