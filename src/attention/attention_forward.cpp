#include <cmath>

#include "attention/attention_launch.hpp"
#include "attention/config_choice.hpp"
#include "attention/validation.hpp"
#include "common/log.hpp"
#include "device/device_info.hpp"
#include "device/driver_api.hpp"
#include "families/attention_family.hpp"
#include "families/attention_wgmma_family.hpp"
#include "intfa/attention.hpp"
#include "intfa/errors.hpp"
#include "launch/kernel_runtime.hpp"
#include "spec/attention_spec.hpp"

namespace intfa {

std::string KernelConfig::to_string() const {
  return "block_m=" + std::to_string(block_m) + " block_n=" + std::to_string(block_n) +
         " warps=" + std::to_string(warps) + " stages=" + std::to_string(stages) +
         (path == KernelPath::kWgmma ? " path=wgmma" : "");
}

KernelPath path_for_config(int block_m, int warps) {
  const bool hopper = warps == 12 || warps == 16 || (warps == 8 && block_m == 64);
  return hopper ? KernelPath::kWgmma : KernelPath::kMmaSync;
}

int v_padded_seq(int seq_kv) {
  attention::validate_v_seq(seq_kv);
  return (seq_kv + kernels::kVTokenBlock - 1) / kernels::kVTokenBlock * kernels::kVTokenBlock;
}

std::size_t v_int8_bytes(int batch, int heads_kv, int seq_kv, int head_dim) {
  attention::validate_v_layout(batch, heads_kv, seq_kv, head_dim);
  // Under the layout's limits the channels (batch * heads_kv * head_dim) stay below 2^40, but
  // their bytes may pass 2^64 (65535 batches of 65535 heads of 2^28 tokens), which wrapped.
  const std::size_t channels = static_cast<std::size_t>(batch) * heads_kv * head_dim;
  std::size_t bytes = 0;
  if (__builtin_mul_overflow(channels, static_cast<std::size_t>(v_padded_seq(seq_kv)), &bytes)) {
    throw InvalidArgument("seq_kv", std::to_string(seq_kv),
                          "expected batch * heads_kv * head_dim * v_padded_seq(seq_kv) < 2^64 "
                          "bytes");
  }
  return bytes;
}

TensorView v_int8_view(void* data, int batch, int heads_kv, int seq_kv, int head_dim) {
  attention::validate_v_layout(batch, heads_kv, seq_kv, head_dim);
  const std::int64_t padded = v_padded_seq(seq_kv);
  TensorView view;
  view.data = data;
  view.dtype = DType::kI8;
  view.strides = {std::int64_t{heads_kv} * head_dim * padded, std::int64_t{head_dim} * padded, 1,
                  padded};
  return view;
}

std::size_t v_scale_count(VScaleGranularity granularity, int batch, int heads_kv, int seq_kv,
                          int head_dim) {
  attention::validate_v_layout(batch, heads_kv, seq_kv, head_dim);
  const std::size_t heads = static_cast<std::size_t>(batch) * heads_kv;
  switch (granularity) {
    case VScaleGranularity::kPerTensor: return heads;
    case VScaleGranularity::kPerChannel: return heads * head_dim;
    case VScaleGranularity::kPerBlock:
      return heads * (v_padded_seq(seq_kv) / kernels::kVTokenBlock) * head_dim;
  }
  return 0;
}

int k_scale_blocks(int seq_kv) {
  attention::validate_v_seq(seq_kv);
  return kernels::k_scale_blocks(seq_kv);
}

std::size_t k_scale_count(KScaleGranularity granularity, int batch, int heads_kv, int seq_kv) {
  attention::validate_v_layout(batch, heads_kv, seq_kv, 64);  // the head dim plays no part
  const int per_head =
      granularity == KScaleGranularity::kPerBlock ? k_scale_blocks(seq_kv) : seq_kv;
  return static_cast<std::size_t>(batch) * heads_kv * static_cast<std::size_t>(per_head);
}

namespace attention {

PlannedLaunch plan_launch(const AttentionProblem& problem, const AttentionTensors& tensors,
                          CUstream stream, const AttentionOptions& options,
                          const SixteenBitCall* sixteen_bit) {
  PlannedLaunch planned = plan_kernel(problem, tensors, stream, options, sixteen_bit);
  planned.kernel = &launch::KernelRuntime::instance().load(planned.spec, planned.context,
                                                           planned.shape.dynamic_shared_bytes);
  return planned;
}

PlannedLaunch plan_kernel(const AttentionProblem& problem, const AttentionTensors& tensors,
                          CUstream stream, const AttentionOptions& options,
                          const SixteenBitCall* sixteen_bit) {
  validate_tensors(problem, tensors, options,
                   sixteen_bit != nullptr ? sixteen_bit->head_dim : 0);

  const CUcontext context = launch::launch_context(stream);
  CUdevice device = 0;
  INTFA_DRIVER(cuCtxGetDevice, &device);
  const device::DeviceInfo& info = device::cached_device_info(device);

  // The problem and every numerics option through the one mapping (request_for); what only the
  // tensors say (packing, V's type) on top.
  SpecRequest request = request_for(info.arch, problem, options, tensors.out.dtype);
  request.varlen = tensors.varlen.enabled();
  request.v_type = problem.variant == Variant::kHalfInt8 ? tensors.v.dtype : DType::kF16;
  if (sixteen_bit != nullptr) request = with_q_in_kernel(request, options, sixteen_bit->q.dtype);
  KernelConfig config = options.config ? *options.config : choose_config(request, problem, info);
  if (config.path == KernelPath::kWgmma) {
    if (const auto reason = tma_incompatibility(problem, tensors)) {
      if (options.config) throw Unsupported("options.config.path = wgmma: " + *reason);
      log::warn_once("wgmma-fallback:" + *reason,
                     *reason + ": the portable attention kernel runs instead of the Hopper one");
      config = portable_heuristic_config(request);
    }
  }
  PlannedLaunch planned;
  planned.spec = make_spec(request, config);
  const AttentionSpec& spec = planned.spec;
  validate_config(spec, info.max_shared_bytes_per_block_optin);
  planned.context = context;
  planned.shape = launch_shape(problem, spec);
  const double softmax_scale = options.softmax_scale > 0.0
                                   ? options.softmax_scale
                                   : 1.0 / std::sqrt(static_cast<double>(problem.head_dim));
  planned.params.attention = make_params(problem, tensors, softmax_scale);
  if (sixteen_bit != nullptr && sixteen_bit->head_dim > 0) {
    planned.params.attention.out_head_dim = sixteen_bit->head_dim;
  }
  planned.wgmma = spec.path == KernelPath::kWgmma;
  if (planned.wgmma) encode_tensor_maps(planned.params, problem, tensors, spec);
  planned.quantizes_q = spec.quantizes_q;
  if (spec.quantizes_q) {
    set_q_input(planned.params, sixteen_bit->q, sixteen_bit->k_channel_mean,
                sixteen_bit->q_dot_k_mean, sixteen_bit->rotated_heads);
    // Packed tensors are one batch, as make_params sets for the INT8 Q.
    if (tensors.varlen.enabled()) planned.params.q_input.strides.batch = 0;
  }
  return planned;
}

}  // namespace attention

void attention_forward(const AttentionProblem& problem, const AttentionTensors& tensors,
                       CUstream stream, const AttentionOptions& options) {
  attention::validate_problem(problem);
  attention::validate_options(problem, options);
  const attention::PlannedLaunch planned =
      attention::plan_launch(problem, tensors, stream, options);
  launch::launch(*planned.kernel, planned.shape, stream, planned.arguments());
}

}  // namespace intfa
