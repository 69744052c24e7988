#include "spec/quantize_specs.hpp"

namespace intfa::quantize {

std::vector<render::KernelSpec> call_specs(const attention::SpecRequest& request, DType dtype,
                                           const AttentionOptions& options, bool q_rows_pass) {
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
  // One kernel when K is not smoothed.
  if (q_rows_pass && q_spec != specs.back()) specs.push_back(q_spec);
  if (request.variant == Variant::kFullInt8) {
    specs.push_back(v_spec(request.arch, request.head_dim, input, request.v_granularity));
    if (request.v_granularity != VScaleGranularity::kPerBlock) {
      specs.push_back(v_scale_spec(request.arch, request.head_dim, input, request.v_granularity));
    }
  }
  return specs;
}

}  // namespace intfa::quantize
