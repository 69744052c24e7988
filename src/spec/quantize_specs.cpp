#include "spec/quantize_specs.hpp"

namespace intfa::quantize {
namespace {

render::KernelSpec quantize_spec(render::KernelFamily family, device::Arch arch, int head_dim,
                                 kernels::ElementType input) {
  render::KernelSpec spec;
  spec.family = family;
  spec.arch = arch;
  spec.head_dim = head_dim;
  spec.input_type = input;
  return spec;
}

}  // namespace

kernels::ElementType element_type(DType dtype) {
  return dtype == DType::kBF16 ? kernels::ElementType::kBF16 : kernels::ElementType::kF16;
}

render::KernelSpec rows_spec(device::Arch arch, int head_dim, kernels::ElementType input, int bits,
                             const RowTransforms& transforms) {
  render::KernelSpec spec =
      quantize_spec(render::KernelFamily::kQuantizeRows, arch, head_dim, input);
  spec.qk_bits = bits;
  spec.smooth_k = transforms.smooth_k;
  spec.q_dot_k_mean = transforms.q_dot_k_mean;
  spec.rotate = transforms.rotate;
  spec.k_granularity = static_cast<kernels::KScaleGranularity>(transforms.k_granularity);
  return spec;
}

render::KernelSpec channel_mean_spec(device::Arch arch, int head_dim, kernels::ElementType input) {
  return quantize_spec(render::KernelFamily::kChannelMean, arch, head_dim, input);
}

render::KernelSpec v_spec(device::Arch arch, int head_dim, kernels::ElementType input,
                          VScaleGranularity granularity) {
  render::KernelSpec spec = quantize_spec(render::KernelFamily::kQuantizeV, arch, head_dim, input);
  spec.v_granularity = static_cast<kernels::VScaleGranularity>(granularity);
  return spec;
}

render::KernelSpec v_scale_spec(device::Arch arch, int head_dim, kernels::ElementType input,
                                VScaleGranularity granularity) {
  render::KernelSpec spec = v_spec(arch, head_dim, input, granularity);
  spec.family = render::KernelFamily::kQuantizeVScale;
  return spec;
}

std::vector<render::KernelSpec> call_specs(const attention::SpecRequest& request, DType dtype,
                                           const AttentionOptions& options) {
  const kernels::ElementType input = element_type(dtype);
  std::vector<render::KernelSpec> specs;
  if (options.smooth_k) specs.push_back(channel_mean_spec(request.arch, request.head_dim, input));
  RowTransforms k_rows;
  k_rows.smooth_k = options.smooth_k;
  k_rows.rotate = options.rotate_qk;
  // The request's, like the attention kernel's and V's (a tuned bundle's request is the database
  // entry's, not the command line's numerics).
  k_rows.k_granularity = request.k_granularity;
  RowTransforms q_rows;
  q_rows.q_dot_k_mean = options.smooth_k;
  q_rows.rotate = options.rotate_qk;
  specs.push_back(rows_spec(request.arch, request.head_dim, input, request.qk_bits, k_rows));
  const render::KernelSpec q_spec =
      rows_spec(request.arch, request.head_dim, input, request.qk_bits, q_rows);
  if (q_spec != specs.back()) specs.push_back(q_spec);  // one kernel when K is not smoothed
  if (request.variant == Variant::kFullInt8) {
    specs.push_back(v_spec(request.arch, request.head_dim, input, request.v_granularity));
    if (request.v_granularity != VScaleGranularity::kPerBlock) {
      specs.push_back(v_scale_spec(request.arch, request.head_dim, input, request.v_granularity));
    }
  }
  return specs;
}

}  // namespace intfa::quantize
