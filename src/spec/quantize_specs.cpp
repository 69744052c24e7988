#include "spec/quantize_specs.hpp"

namespace intfa::quantize {

std::vector<QuantizeSpec> call_specs(const attention::SpecRequest& request, DType dtype,
                                     const AttentionOptions& options, bool q_rows_pass) {
  const kernels::ElementType input = element_type(dtype);
  std::vector<QuantizeSpec> specs;
  // K smoothing's mean pass, which also makes automatic rotation's decisions.
  if (options.smooth_k || options.rotate_qk == QKRotation::kAuto) {
    specs.push_back(channel_mean_spec(request.arch, request.head_dim, input));
  }
  RowTransforms k_rows;
  k_rows.smooth_k = options.smooth_k;
  k_rows.rotate = options.rotate_qk;
  // The request's, like the attention kernel's and V's (a tuned bundle's request is the database
  // entry's, not the command line's numerics).
  k_rows.k_granularity = request.numerics.k_granularity;
  RowTransforms q_rows;
  q_rows.q_dot_k_mean = options.smooth_k;
  q_rows.rotate = options.rotate_qk;
  const QuantizeSpec k_spec =
      rows_spec(request.arch, request.head_dim, input, request.qk_bits, k_rows);
  const QuantizeSpec q_spec =
      rows_spec(request.arch, request.head_dim, input, request.qk_bits, q_rows);
  const bool full_int8 = request.variant == Variant::kFullInt8;
  // K's rows share V's max pass's launch where they can (quantize_k_and_v_channels; a grid of
  // over 2^31 blocks would fall back to the two kernels, compiled on demand: no such problem fits
  // a GPU's memory).
  const bool k_with_v = full_int8 && k_and_v_share_a_launch(request.numerics.k_granularity,
                                                            request.numerics.v_granularity);
  if (k_with_v) {
    // sm_90a: K and all of V in one launch where V fits its clusters; the two launches below for
    // longer V.
    if (k_and_v_take_one_launch(request.arch, request.numerics.k_granularity,
                                request.numerics.v_granularity)) {
      specs.push_back(k_v_spec(request.arch, request.head_dim, input, request.qk_bits, k_rows,
                               request.numerics.v_granularity));
    }
    specs.push_back(k_v_scale_spec(request.arch, request.head_dim, input, request.qk_bits, k_rows,
                                   request.numerics.v_granularity));
  } else {
    specs.push_back(k_spec);
    if (full_int8 && request.numerics.v_granularity != VScaleGranularity::kPerBlock) {
      specs.push_back(
          v_scale_spec(request.arch, request.head_dim, input, request.numerics.v_granularity));
    }
  }
  // Q's rows kernel is K's when K is not smoothed, unless K's went into the shared launch.
  if (q_rows_pass && (k_with_v || q_spec != k_spec)) specs.push_back(q_spec);
  if (full_int8) {
    specs.push_back(v_spec(request.arch, request.head_dim, input, request.numerics.v_granularity));
  }
  return specs;
}

}  // namespace intfa::quantize
