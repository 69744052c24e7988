// intfa::attention_forward_16bit: FP16/BF16 inputs quantized into a caller's workspace, then
// attention_forward; the one C++ call behind `intfa.attention`.
#include <cmath>
#include <cstdint>
#include <string>

#include "attention/attention_launch.hpp"
#include "attention/validation.hpp"
#include "intfa/attention.hpp"
#include "intfa/errors.hpp"
#include "intfa/quantize.hpp"
#include "launch/kernel_runtime.hpp"
#include "quantize/quantize_internal.hpp"
#include "spec/attention_spec.hpp"

namespace intfa {
namespace {

constexpr std::size_t kWorkspaceAlignment = 256;

// Where each quantized tensor lives in the workspace (byte offsets, each 256-byte aligned).
struct WorkspaceLayout {
  std::size_t q = 0, q_scale = 0, q_dot_k_mean = 0, k = 0, k_scale = 0, k_mean = 0,
              rotated_heads = 0, v = 0, v_scale = 0;
  std::size_t total = 0;
};

// Packed sequences: their offsets or their totals are set (a dense call with totals is refused
// by attention_forward's checks).
bool packed(const VarlenLayout& varlen) {
  return varlen.enabled() || varlen.total_q != 0 || varlen.total_kv != 0;
}

// Q and K as quantize_qk sees them: the problem's [batch, heads, seq, head_dim], or packed
// sequences as one batch of the total rows.
TensorShape q_rows_shape(const AttentionProblem& problem, const VarlenLayout& varlen) {
  return packed(varlen)
             ? TensorShape{1, problem.heads_q, varlen.total_q, problem.head_dim}
             : TensorShape{problem.batch, problem.heads_q, problem.seq_q, problem.head_dim};
}

TensorShape k_rows_shape(const AttentionProblem& problem, const VarlenLayout& varlen) {
  return packed(varlen)
             ? TensorShape{1, problem.heads_kv, varlen.total_kv, problem.head_dim}
             : TensorShape{problem.batch, problem.heads_kv, problem.seq_kv, problem.head_dim};
}

std::size_t rows_of(const TensorShape& shape) {
  return static_cast<std::size_t>(shape.batch) * shape.heads * shape.seq;
}

// The length that sizes a part of the workspace, for messages: a sequence length of the problem,
// or the total of packed sequences.
struct Length {
  const char* field;
  int value;
};

Length q_length(const AttentionProblem& problem, const VarlenLayout& varlen) {
  return packed(varlen) ? Length{"varlen.total_q", varlen.total_q}
                        : Length{"problem.seq_q", problem.seq_q};
}

Length k_length(const AttentionProblem& problem, const VarlenLayout& varlen) {
  return packed(varlen) ? Length{"varlen.total_kv", varlen.total_kv}
                        : Length{"problem.seq_kv", problem.seq_kv};
}

// K smoothing's buffers are always there (a float per query row and per KV head and channel), and
// automatic rotation's (an int per KV head), so that the size does not depend on the options. Every
// part's bytes and offset are checked: the rows fit a size_t under validate_problem's limits, their
// bytes and the sum of the parts need not (batch 60047, heads_q 32768, seq_q 130210491 once summed
// to 25.8 MiB instead of 1.8e19).
WorkspaceLayout workspace_layout(const AttentionProblem& problem, const VarlenLayout& varlen) {
  const std::size_t row_bytes = static_cast<std::size_t>(problem.head_dim) * problem.qk_bits / 8;
  const std::size_t q_rows = rows_of(q_rows_shape(problem, varlen));
  const std::size_t k_rows = rows_of(k_rows_shape(problem, varlen));
  WorkspaceLayout layout;
  std::size_t offset = 0;
  // `count` elements of `element_bytes` at the next aligned offset.
  auto take = [&](std::size_t& part, std::size_t count, std::size_t element_bytes,
                  const Length& length) {
    std::size_t bytes = 0, end = 0;
    if (__builtin_mul_overflow(count, element_bytes, &bytes) ||
        __builtin_add_overflow(bytes, kWorkspaceAlignment - 1, &bytes) ||
        __builtin_add_overflow(offset, bytes / kWorkspaceAlignment * kWorkspaceAlignment, &end)) {
      throw InvalidArgument(length.field, std::to_string(length.value),
                            "the workspace would take 2^64 bytes or more "
                            "(attention_workspace_bytes)");
    }
    part = offset;
    offset = end;
  };
  const Length q = q_length(problem, varlen), k = k_length(problem, varlen);
  take(layout.q, q_rows, row_bytes, q);
  take(layout.q_scale, q_rows, sizeof(float), q);
  take(layout.q_dot_k_mean, q_rows, sizeof(float), q);
  take(layout.k, k_rows, row_bytes, k);
  take(layout.k_scale, k_rows, sizeof(float), k);
  const TensorShape k_shape = k_rows_shape(problem, varlen);
  const std::size_t k_heads = static_cast<std::size_t>(k_shape.batch) * k_shape.heads;
  take(layout.k_mean, k_heads * problem.head_dim, sizeof(float), k);
  take(layout.rotated_heads, k_heads, sizeof(int), k);
  if (problem.variant == Variant::kFullInt8) {
    const Length v{"problem.seq_kv", problem.seq_kv};
    take(layout.v, v_int8_bytes(problem.batch, problem.heads_kv, problem.seq_kv, problem.head_dim),
         1, v);
    // The largest granularity: the layout does not depend on the options.
    take(layout.v_scale,
         v_scale_count(VScaleGranularity::kPerBlock, problem.batch, problem.heads_kv,
                       problem.seq_kv, problem.head_dim),
         sizeof(float), v);
  }
  layout.total = offset;
  return layout;
}

void validate_inputs(const AttentionProblem& problem, const AttentionInputs& inputs) {
  if (inputs.varlen.enabled()) attention::validate_varlen(inputs.varlen, "inputs.varlen");
  const TensorShape q_shape = q_rows_shape(problem, inputs.varlen);
  const TensorShape k_shape = k_rows_shape(problem, inputs.varlen);
  if (inputs.q.dtype != DType::kF16 && inputs.q.dtype != DType::kBF16) {
    throw InvalidArgument("inputs.q.dtype", dtype_name(inputs.q.dtype), "expected f16 or bf16");
  }
  for (const auto& [field, view] : {std::pair<const char*, const TensorView&>{"inputs.k", inputs.k},
                                    {"inputs.v", inputs.v}}) {
    if (view.dtype != inputs.q.dtype) {
      throw InvalidArgument(std::string(field) + ".dtype", dtype_name(view.dtype),
                            "expected " + dtype_name(inputs.q.dtype) + ", the dtype of inputs.q");
    }
  }
  const std::array<std::int64_t, 4> q_extents{q_shape.batch, q_shape.heads, q_shape.seq,
                                              q_shape.head_dim};
  const std::array<std::int64_t, 4> kv_extents{k_shape.batch, k_shape.heads, k_shape.seq,
                                               k_shape.head_dim};
  attention::validate_view(inputs.q, {"inputs.q", q_extents, 2, 16});
  attention::validate_view(inputs.k, {"inputs.k", kv_extents, 2, 16});
  attention::validate_view(inputs.v, {"inputs.v", kv_extents, 2, 16});
  if (inputs.out.dtype != DType::kF16 && inputs.out.dtype != DType::kBF16) {
    throw InvalidArgument("inputs.out.dtype", dtype_name(inputs.out.dtype), "expected f16 or bf16");
  }
  attention::validate_view(inputs.out, {"inputs.out", q_extents, 2, 4});
  if (reinterpret_cast<std::uintptr_t>(inputs.lse) % 4 != 0) {
    throw InvalidArgument("inputs.lse", std::to_string(reinterpret_cast<std::uintptr_t>(inputs.lse)),
                          "expected 4-byte alignment");
  }
}

// The kernels' problem of a call: a head dim between the kernels' is served by the next one
// (attention::kernel_head_dim).
AttentionProblem kernel_problem(const AttentionProblem& problem) {
  AttentionProblem kernel = problem;
  kernel.head_dim = attention::kernel_head_dim(problem.head_dim, "problem.head_dim");
  return kernel;
}

// The call's kernels, all planned: K's passes (with V's: quantize::KAndVPlan, or K's alone:
// quantize::RowsPass), Q's (null where the attention kernel quantizes Q) and the attention
// kernel. Loads them before the first launch, so that on a cold cache they compile at once
// (KernelRuntime::load_all), not one after another as the launches reach them; then launches.
template <typename KPlan>
void load_and_launch(KPlan& k_plan, quantize::RowsPass* q_rows, attention::PlannedLaunch& planned,
                     CUstream stream) {
  launch::CallKernels kernels;
  quantize::add_kernels(k_plan, kernels);
  if (q_rows != nullptr) quantize::add_kernels(*q_rows, kernels);
  kernels.add(planned.spec, planned.shape.dynamic_shared_bytes, &planned.kernel);
  kernels.load(planned.context);
  quantize::launch_planned(k_plan, stream);
  if (q_rows != nullptr) quantize::launch_planned(*q_rows, stream);
  launch::launch(*planned.kernel, planned.shape, stream, planned.arguments());
}

}  // namespace

std::size_t attention_workspace_bytes(const AttentionProblem& caller_problem,
                                      const VarlenLayout& varlen) {
  const AttentionProblem problem = kernel_problem(caller_problem);
  attention::validate_problem(problem);
  if (packed(varlen)) {
    // Only the totals size the workspace; the offsets may come later.
    if (varlen.total_q < 1) {
      throw InvalidArgument("varlen.total_q", std::to_string(varlen.total_q), "expected >= 1");
    }
    if (varlen.total_kv < 1) {
      throw InvalidArgument("varlen.total_kv", std::to_string(varlen.total_kv), "expected >= 1");
    }
  }
  return workspace_layout(problem, varlen).total;
}

void attention_forward_16bit(const AttentionProblem& caller_problem, const AttentionInputs& inputs,
                             void* workspace, std::size_t workspace_bytes, CUstream stream,
                             const AttentionOptions& caller_options) {
  // The kernels' problem; the inputs and the output keep the caller's head dim (`channels`),
  // and the softmax scale defaults to that head dim's.
  const AttentionProblem problem = kernel_problem(caller_problem);
  const int channels = caller_problem.head_dim;
  attention::validate_problem(problem);
  AttentionOptions options = caller_options;
  attention::validate_options(problem, options);
  if (options.softmax_scale == 0.0) {
    options.softmax_scale = 1.0 / std::sqrt(static_cast<double>(channels));
  }
  validate_inputs(caller_problem, inputs);
  if (inputs.varlen.enabled() && options.numerics.k_granularity == KScaleGranularity::kPerBlock) {
    throw InvalidArgument("options.k_granularity", "block",
                          "per-block K scales are for dense batches, not packed sequences");
  }
  const WorkspaceLayout layout = workspace_layout(problem, inputs.varlen);
  if (workspace == nullptr) throw InvalidArgument("workspace", "null", "expected device memory");
  if (reinterpret_cast<std::uintptr_t>(workspace) % kWorkspaceAlignment != 0) {
    throw InvalidArgument("workspace", std::to_string(reinterpret_cast<std::uintptr_t>(workspace)),
                          "expected 256-byte alignment");
  }
  if (workspace_bytes < layout.total) {
    throw InvalidArgument("workspace_bytes", std::to_string(workspace_bytes),
                          "expected at least " + std::to_string(layout.total) +
                              " (attention_workspace_bytes)");
  }
  std::uint8_t* const base = static_cast<std::uint8_t*>(workspace);
  auto floats = [&](std::size_t offset) { return reinterpret_cast<float*>(base + offset); };
  const DType qk_dtype = problem.qk_bits == 8 ? DType::kI8 : DType::kI4x2;
  const TensorShape q_shape = q_rows_shape(problem, inputs.varlen);
  const TensorShape k_shape = k_rows_shape(problem, inputs.varlen);
  const TensorShape v_shape{problem.batch, problem.heads_kv, problem.seq_kv, problem.head_dim};
  // Dense BHND rows of head_dim * bits / 8 bytes (TensorView::dense halves a kI4x2 row itself;
  // halving it here too gave INT4 rows of head_dim / 4 bytes, which the checks refused).
  auto quantized_view = [&](std::size_t offset, const TensorShape& shape) {
    return TensorView::dense(base + offset, qk_dtype, Layout::kBHND, shape);
  };

  AttentionTensors tensors;
  tensors.q = quantized_view(layout.q, q_shape);
  tensors.k = quantized_view(layout.k, k_shape);
  tensors.q_scale = floats(layout.q_scale);
  tensors.k_scale = floats(layout.k_scale);
  tensors.out = inputs.out;
  tensors.lse = inputs.lse;
  tensors.varlen = inputs.varlen;
  if (options.smooth_k) tensors.q_dot_k_mean = floats(layout.q_dot_k_mean);
  const bool full_int8 = problem.variant == Variant::kFullInt8;
  if (full_int8) {
    tensors.v = v_int8_view(base + layout.v, problem.batch, problem.heads_kv, problem.seq_kv,
                            problem.head_dim);
    tensors.v_scale = floats(layout.v_scale);
  } else {
    tensors.v = inputs.v;
  }
  // The attention kernel's plan (its checks, its config, its kernel's spec) before any launch.
  // The Hopper kernel quantizes Q itself where it serves the call (one pass over Q fewer); the
  // plan says whether Q still needs its own pass.
  attention::SixteenBitCall sixteen_bit;
  sixteen_bit.q = inputs.q;
  sixteen_bit.head_dim = channels;
  if (options.smooth_k) {
    sixteen_bit.k_channel_mean = floats(layout.k_mean);
    sixteen_bit.q_dot_k_mean = floats(layout.q_dot_k_mean);
  }
  // Automatic rotation: K's pass decides per KV head, Q's (or the attention kernel's) follows.
  const bool auto_rotation = options.rotate_qk == QKRotation::kAuto;
  int* const rotated_heads = reinterpret_cast<int*>(base + layout.rotated_heads);
  if (auto_rotation) sixteen_bit.rotated_heads = rotated_heads;
  attention::PlannedLaunch planned =
      attention::plan_kernel(problem, tensors, stream, options, &sixteen_bit);

  // K first: with smoothing, Q's pass (or the attention kernel's) reads K's channel means. K and
  // V share launches (quantize_k_and_v_channels' plan).
  QuantizeOptions k_options;
  k_options.bits = problem.qk_bits;
  k_options.rotate = options.rotate_qk;
  if (auto_rotation) k_options.rotated_heads = rotated_heads;
  k_options.k_granularity = options.numerics.k_granularity;
  if (options.smooth_k) k_options.smooth_k_channel_mean = floats(layout.k_mean);
  // The stream's context and arch, which the attention kernel's plan found.
  const quantize::LaunchContext where{planned.context, planned.spec.arch};
  // Q's own pass, where the attention kernel does not quantize Q, then the launches.
  const auto with_q = [&](auto& k_plan) {
    if (planned.quantizes_q) return load_and_launch(k_plan, nullptr, planned, stream);
    QuantizeOptions q_options;
    q_options.bits = problem.qk_bits;
    q_options.rotate = options.rotate_qk;
    q_options.k_channel_mean_heads = problem.heads_kv;
    if (auto_rotation) q_options.k_rotated_heads = rotated_heads;
    if (options.smooth_k) {
      q_options.k_channel_mean = floats(layout.k_mean);
      q_options.q_dot_k_mean = floats(layout.q_dot_k_mean);
    }
    quantize::RowsPass q_rows = quantize::plan_qk_channels(
        q_shape, channels, inputs.q, tensors.q, floats(layout.q_scale), stream, q_options, &where);
    load_and_launch(k_plan, &q_rows, planned, stream);
  };
  if (full_int8) {
    quantize::KAndVPasses kv;
    kv.k_shape = k_shape;
    kv.k_input = inputs.k;
    kv.k_output = tensors.k;
    kv.k_scales = floats(layout.k_scale);
    kv.k_options = k_options;
    kv.v_shape = v_shape;
    kv.v_input = inputs.v;
    if (inputs.varlen.enabled()) {
      kv.total_kv = inputs.varlen.total_kv;
      kv.cu_seqlens_kv = inputs.varlen.cu_seqlens_kv;
    }
    kv.v_output = base + layout.v;
    kv.v_scales = floats(layout.v_scale);
    kv.v_granularity = options.numerics.v_granularity;
    quantize::KAndVPlan k_and_v = quantize::plan_k_and_v_channels(kv, channels, stream, &where);
    with_q(k_and_v);
  } else {
    quantize::RowsPass k_rows = quantize::plan_qk_channels(
        k_shape, channels, inputs.k, tensors.k, floats(layout.k_scale), stream, k_options, &where);
    with_q(k_rows);
  }
}

}  // namespace intfa
