#include "reference/attention_check.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

#include "device/device_memory.hpp"
#include "device/driver_api.hpp"
#include "intfa/quantize.hpp"
#include "reference/half.hpp"
#include "reference/quantized_model.hpp"

namespace intfa::reference {
namespace {

using device::DeviceBuffer;

bool is_bf16(DType type) { return type == DType::kBF16; }

// Index of element (b, h, n, d) of a dense tensor in `layout`.
std::size_t layout_index(Layout layout, const TensorShape& s, int b, int h, int n, int d,
                         int row_elements) {
  if (layout == Layout::kBHND) {
    return ((static_cast<std::size_t>(b) * s.heads + h) * s.seq + n) * row_elements + d;
  }
  return ((static_cast<std::size_t>(b) * s.seq + n) * s.heads + h) * row_elements + d;
}

template <typename Visit>
void for_each_row(const TensorShape& s, Visit&& visit) {
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.heads; ++h)
      for (int n = 0; n < s.seq; ++n) visit(b, h, n, ((static_cast<std::size_t>(b) * s.heads + h) * s.seq + n));
}

// Dense [b][h][n][d] floats -> 16-bit bits in `layout`.
std::vector<std::uint16_t> to_device_layout(const std::vector<float>& dense, const TensorShape& s,
                                            Layout layout, bool bf16) {
  std::vector<std::uint16_t> bits(dense.size());
  for_each_row(s, [&](int b, int h, int n, std::size_t row) {
    for (int d = 0; d < s.head_dim; ++d) {
      const float value = dense[row * s.head_dim + d];
      bits[layout_index(layout, s, b, h, n, d, s.head_dim)] =
          bf16 ? float_to_bf16_bits(value) : float_to_f16_bits(value);
    }
  });
  return bits;
}

struct QuantizedOnDevice {
  DeviceBuffer values;
  DeviceBuffer scales;
  TensorView view;
};

QuantizedOnDevice quantize_on_device(const DeviceBuffer& input, const TensorShape& s, Layout layout,
                                     DType io_type, int bits, CUstream stream,
                                     QuantizeOptions options) {
  QuantizedOnDevice q;
  const std::size_t row_bytes = static_cast<std::size_t>(s.head_dim) * bits / 8;
  q.values = DeviceBuffer(static_cast<std::size_t>(s.batch) * s.heads * s.seq * row_bytes);
  q.scales = DeviceBuffer(static_cast<std::size_t>(s.batch) * s.heads * s.seq * sizeof(float));
  q.values.fill_bytes(0xA5);
  q.scales.fill_bytes(0xFF);
  q.view = TensorView::dense(q.values.get(), bits == 8 ? DType::kI8 : DType::kI4x2, layout, s);
  options.bits = bits;
  quantize_qk(s, TensorView::dense(input.get(), io_type, layout, s), q.view,
              q.scales.as<float>(), stream, options);
  return q;
}

// How many of `device` differ from `exact` by more than FP32 summation error.
std::size_t sum_mismatches(const std::vector<float>& device, const std::vector<double>& exact,
                           double magnitude) {
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < exact.size(); ++i) {
    if (std::fabs(device[i] - exact[i]) > 1e-5 * (magnitude + std::fabs(exact[i]))) ++mismatches;
  }
  return mismatches;
}

// Counts elements of the device quantization that differ from the CPU quantizer.
std::size_t count_row_mismatches(const QuantizedOnDevice& q, const QuantizedRows& model,
                                 const TensorShape& s, Layout layout, int bits,
                                 std::size_t& scale_mismatches) {
  const int row_bytes = s.head_dim * bits / 8;
  const auto bytes = q.values.download_as<std::int8_t>(q.values.bytes());
  const bool per_block = !model.block_scales.empty();
  const auto scales = q.scales.download_as<float>(per_block ? model.block_scales.size()
                                                            : static_cast<std::size_t>(model.rows));
  for (std::size_t i = 0; per_block && i < model.block_scales.size(); ++i) {
    if (std::memcmp(&scales[i], &model.block_scales[i], sizeof(float)) != 0) ++scale_mismatches;
  }
  std::size_t mismatches = 0;
  for_each_row(s, [&](int b, int h, int n, std::size_t row) {
    if (!per_block && std::memcmp(&scales[row], &model.scales[row], sizeof(float)) != 0) {
      ++scale_mismatches;
    }
    for (int d = 0; d < s.head_dim; ++d) {
      const std::int8_t byte = bytes[layout_index(layout, s, b, h, n, d * bits / 8, row_bytes)];
      int value = byte;
      if (bits == 4) {
        const int nibble = (d % 2 == 0) ? (byte & 0xF) : ((byte >> 4) & 0xF);
        value = nibble >= 8 ? nibble - 16 : nibble;
      }
      if (value != model.values[row * s.head_dim + d]) ++mismatches;
    }
  });
  return mismatches;
}

std::size_t count_v_mismatches(const DeviceBuffer& v8, const DeviceBuffer& scales,
                               const QuantizedV& model, std::size_t& scale_mismatches) {
  const int padded = v_padded_seq(model.seq);
  const auto bytes = v8.download_as<std::int8_t>(v8.bytes());
  const auto device_scales = scales.download_as<float>(model.scales.size());
  for (std::size_t i = 0; i < model.scales.size(); ++i) {
    if (std::memcmp(&device_scales[i], &model.scales[i], sizeof(float)) != 0) ++scale_mismatches;
  }
  std::size_t mismatches = 0;
  for (int b = 0; b < model.batch; ++b)
    for (int h = 0; h < model.heads; ++h)
      for (int c = 0; c < model.head_dim; ++c)
        for (int position = 0; position < padded; ++position) {
          // Invert v_position_of_token inside the group of 16.
          const int p = position & 15;
          const int token = (position & ~15) | (((p >> 1) & 1) << 3) | ((p >> 2) << 1) | (p & 1);
          const std::size_t head = static_cast<std::size_t>(b) * model.heads + h;
          const int stored = bytes[(head * model.head_dim + c) * padded + position];
          const int expected =
              token < model.seq
                  ? model.values[((head * model.seq) + token) * model.head_dim + c]
                  : 0;
          if (stored != expected) ++mismatches;
        }
  return mismatches;
}

}  // namespace

std::string CheckCase::to_string() const {
  char text[512];
  std::snprintf(
      text, sizeof text,
      "%s b%d hq%d hkv%d nq%d nkv%d d%d%s qk%d%s%s%s %s%s %s %s p=%s/%s v=%d seed=%llu",
      problem.variant == intfa::Variant::kFullInt8 ? "full_int8" : "half_int8", problem.batch,
      problem.heads_q, problem.heads_kv, problem.seq_q, problem.seq_kv, problem.head_dim,
      problem.causal ? " causal" : "", problem.qk_bits, options.smooth_k ? " smooth_k" : "",
      options.rotate_qk == QKRotation::kOn     ? " rotate"
      : options.rotate_qk == QKRotation::kAuto ? " rotate=auto"
                                               : "",
      options.numerics.k_granularity == KScaleGranularity::kPerBlock ? " k=block" : "",
      layout == Layout::kBHND ? "BHND" : "BNHD",
      out_row_padding != 0 ? (" out+" + std::to_string(out_row_padding)).c_str() : "",
      dtype_name(io_type).c_str(), family_name(inputs).c_str(),
      options.numerics.p_encoding == intfa::PEncoding::kSigned127 ? "s8" : "u8",
      options.numerics.p_scale == intfa::PScaleReference::kRunningMax ? "running" : "tile",
      static_cast<int>(options.numerics.v_granularity), static_cast<unsigned long long>(seed));
  return text;
}

std::string CheckResult::to_string() const {
  char text[512];
  std::snprintf(
      text, sizeof text,
      "vs model: rel_l2=%.3g cos=%.8f | vs f64: rel_l2=%.4f%% cos=%.6f mre=%.4f%% | "
      "lse err=%.3g (past ties %.3g, inf mismatches %zu, vs f64 %.3g) | unwritten=%zu padding "
      "overwritten=%zu | "
      "mismatches q=%zu k=%zu v=%zu scales=%zu means=%zu lse terms=%zu rotations=%zu "
      "(rotated %zu)",
      vs_model.relative_l2, vs_model.cosine, vs_f64.relative_l2 * 100, vs_f64.cosine,
      vs_f64.mean_relative_error * 100, lse_max_abs_error, lse_max_error_past_ties,
      lse_infinity_mismatches, lse_vs_f64_max_abs_error, unwritten_outputs, overwritten_padding,
      q_mismatches, k_mismatches, v_mismatches, scale_mismatches, mean_mismatches,
      lse_term_mismatches, rotation_mismatches, rotated_heads);
  return text;
}

CheckResult run_check(const CheckCase& check) {
  const AttentionProblem& p = check.problem;
  const bool bf16 = is_bf16(check.io_type);
  const TensorShape q_shape{p.batch, p.heads_q, p.seq_q, p.head_dim};
  const TensorShape kv_shape{p.batch, p.heads_kv, p.seq_kv, p.head_dim};
  const std::size_t q_count = static_cast<std::size_t>(p.batch) * p.heads_q * p.seq_q * p.head_dim;
  const std::size_t kv_count =
      static_cast<std::size_t>(p.batch) * p.heads_kv * p.seq_kv * p.head_dim;
  Shape shape;
  shape.batch = p.batch;
  shape.heads_q = p.heads_q;
  shape.heads_kv = p.heads_kv;
  shape.seq_q = p.seq_q;
  shape.seq_kv = p.seq_kv;
  shape.head_dim = p.head_dim;
  shape.causal = p.causal;
  shape.softmax_scale = check.options.softmax_scale;
  const AttentionInputValues inputs = make_inputs(check.inputs, shape, check.seed, bf16);
  const std::vector<float>& q = inputs.q;
  const std::vector<float>& k = inputs.k;
  const std::vector<float>& v = inputs.v;

  device::Stream stream;
  DeviceBuffer q_input(q_count * 2), k_input(kv_count * 2), v_input(kv_count * 2);
  q_input.upload(to_device_layout(q, q_shape, check.layout, bf16));
  k_input.upload(to_device_layout(k, kv_shape, check.layout, bf16));
  v_input.upload(to_device_layout(v, kv_shape, check.layout, bf16));

  // As attention_forward_16bit: K first (its channel means), then Q (the LSE term).
  const bool smooth_k = check.options.smooth_k;
  const QKRotation rotation = check.options.rotate_qk;
  const bool auto_rotation = rotation == QKRotation::kAuto;
  DeviceBuffer rotated_heads(static_cast<std::size_t>(p.batch) * p.heads_kv * sizeof(int));
  rotated_heads.fill_bytes(0xFF);  // -1: neither decision
  DeviceBuffer k_means(static_cast<std::size_t>(p.batch) * p.heads_kv * p.head_dim * sizeof(float));
  DeviceBuffer q_dot_k_mean(static_cast<std::size_t>(p.batch) * p.heads_q * p.seq_q *
                            sizeof(float));
  k_means.fill_bytes(0xFF);
  q_dot_k_mean.fill_bytes(0xFF);
  const bool k_per_block = check.options.numerics.k_granularity == KScaleGranularity::kPerBlock;
  QuantizeOptions k_options;
  k_options.rotate = rotation;
  if (auto_rotation) k_options.rotated_heads = rotated_heads.as<int>();
  k_options.k_granularity = check.options.numerics.k_granularity;
  if (smooth_k) k_options.smooth_k_channel_mean = k_means.as<float>();
  const QuantizedOnDevice k_quantized = quantize_on_device(
      k_input, kv_shape, check.layout, check.io_type, p.qk_bits, stream.get(), k_options);
  QuantizeOptions q_options;
  q_options.rotate = rotation;
  q_options.k_channel_mean_heads = p.heads_kv;
  if (auto_rotation) q_options.k_rotated_heads = rotated_heads.as<int>();
  if (smooth_k) {
    q_options.k_channel_mean = k_means.as<float>();
    q_options.q_dot_k_mean = q_dot_k_mean.as<float>();
  }
  const QuantizedOnDevice q_quantized = quantize_on_device(
      q_input, q_shape, check.layout, check.io_type, p.qk_bits, stream.get(), q_options);

  AttentionTensors tensors;
  tensors.q = q_quantized.view;
  tensors.k = k_quantized.view;
  tensors.q_scale = q_quantized.scales.as<float>();
  tensors.k_scale = k_quantized.scales.as<float>();
  DeviceBuffer v8, v_scales;
  if (p.variant == intfa::Variant::kFullInt8) {
    v8 = DeviceBuffer(v_int8_bytes(p.batch, p.heads_kv, p.seq_kv, p.head_dim));
    v_scales = DeviceBuffer(v_scale_count(check.options.numerics.v_granularity, p.batch, p.heads_kv,
                                          p.seq_kv, p.head_dim) *
                            sizeof(float));
    v8.fill_bytes(0xA5);
    v_scales.fill_bytes(0xFF);
    quantize_v(kv_shape, TensorView::dense(v_input.get(), check.io_type, check.layout, kv_shape),
               v8.get(), v_scales.as<float>(), check.options.numerics.v_granularity, stream.get());
    tensors.v = v_int8_view(v8.get(), p.batch, p.heads_kv, p.seq_kv, p.head_dim);
    tensors.v_scale = v_scales.as<float>();
  } else {
    tensors.v = TensorView::dense(v_input.get(), check.io_type, check.layout, kv_shape);
  }
  // The output's rows are out_row_elements apart: the row, then the padding.
  const int out_row_elements = p.head_dim + check.out_row_padding;
  const std::size_t out_count = q_count / p.head_dim * out_row_elements;
  DeviceBuffer out(out_count * 2);
  DeviceBuffer lse(static_cast<std::size_t>(p.batch) * p.heads_q * p.seq_q * sizeof(float));
  out.fill_bytes(0xFF);  // NaN in f16 and bf16
  lse.fill_bytes(0xFF);
  tensors.out = TensorView::dense(out.get(), check.io_type, check.layout,
                                  TensorShape{p.batch, p.heads_q, p.seq_q, out_row_elements});
  tensors.lse = check.with_lse ? lse.as<float>() : nullptr;
  if (smooth_k) tensors.q_dot_k_mean = q_dot_k_mean.as<float>();
  attention_forward(p, tensors, stream.get(), check.options);
  stream.synchronize();

  CheckResult result;
  // The quantized tensors, exactly, from the kernels' own means (checked first).
  const int kv_heads = p.batch * p.heads_kv;
  std::vector<float> device_means, device_lse_terms;
  if (smooth_k) {
    device_means = k_means.download_as<float>(static_cast<std::size_t>(kv_heads) * p.head_dim);
  }
  // Which rows the models rotate: with kAuto, the kernel's own decisions (checked here against
  // the model's, away from the threshold).
  RowRotation k_rotation(rotation == QKRotation::kOn), q_rotation = k_rotation;
  if (auto_rotation) {
    const std::vector<int> decisions =
        rotated_heads.download_as<int>(static_cast<std::size_t>(kv_heads));
    std::vector<double> spreads;
    const std::vector<int> expected =
        rotation_decisions(k.data(), kv_heads, p.seq_kv, p.head_dim, p.head_dim,
                           smooth_k ? device_means.data() : nullptr, &spreads);
    for (std::size_t i = 0; i < decisions.size(); ++i) {
      const bool written = decisions[i] == 0 || decisions[i] == 1;
      if (!written || (decisions[i] != expected[i] && std::fabs(spreads[i] - 1.0) > 1e-4)) {
        ++result.rotation_mismatches;
      }
      if (decisions[i] == 1) ++result.rotated_heads;
    }
    k_rotation = RowRotation(decisions, p.seq_kv);
    q_rotation = RowRotation(decisions, p.seq_q, p.heads_q / p.heads_kv);
  }
  QuantizedRows k_model;
  if (smooth_k) {
    result.mean_mismatches = sum_mismatches(
        device_means, sampled_channel_means(k.data(), kv_heads, p.seq_kv, p.head_dim), 1.0);
    k_model = k_per_block ? quantize_row_blocks(k.data(), kv_heads, p.seq_kv, p.head_dim,
                                                device_means.data(), k_rotation)
                          : quantize_rows_smoothed(k.data(), kv_heads, p.seq_kv, p.head_dim,
                                                   p.qk_bits, device_means.data(), k_rotation);
    device_lse_terms = q_dot_k_mean.download_as<float>(q_count / p.head_dim);
    // FP32 sums of head_dim products: their error scales with the sum of their magnitudes.
    std::vector<float> absolute_q(q.size()), absolute_means(device_means.size());
    for (std::size_t i = 0; i < q.size(); ++i) absolute_q[i] = std::fabs(q[i]);
    for (std::size_t i = 0; i < device_means.size(); ++i) {
      absolute_means[i] = std::fabs(device_means[i]);
    }
    const std::vector<double> magnitudes =
        q_dot_k_means(absolute_q.data(), p.batch, p.heads_q, p.heads_kv, p.seq_q, p.head_dim,
                      absolute_means.data());
    const std::vector<double> exact_terms = q_dot_k_means(q.data(), p.batch, p.heads_q, p.heads_kv,
                                                          p.seq_q, p.head_dim, device_means.data());
    for (std::size_t i = 0; i < exact_terms.size(); ++i) {
      if (std::fabs(device_lse_terms[i] - exact_terms[i]) > 1e-5 * (1.0 + magnitudes[i])) {
        ++result.lse_term_mismatches;
      }
    }
  } else if (k_per_block) {
    k_model = quantize_row_blocks(k.data(), kv_heads, p.seq_kv, p.head_dim, nullptr, k_rotation);
  } else {
    k_model = quantize_rows(k.data(), static_cast<int>(kv_count / p.head_dim), p.head_dim,
                            p.qk_bits, nullptr, k_rotation);
  }
  const QuantizedRows q_model = quantize_rows(q.data(), static_cast<int>(q_count / p.head_dim),
                                              p.head_dim, p.qk_bits, nullptr, q_rotation);
  result.q_mismatches = count_row_mismatches(q_quantized, q_model, q_shape, check.layout,
                                             p.qk_bits, result.scale_mismatches);
  result.k_mismatches = count_row_mismatches(k_quantized, k_model, kv_shape, check.layout,
                                             p.qk_bits, result.scale_mismatches);
  QuantizedV v_model;
  if (p.variant == intfa::Variant::kFullInt8) {
    v_model = quantize_v(v.data(), p.batch, p.heads_kv, p.seq_kv, p.head_dim,
                         check.options.numerics.v_granularity);
    result.v_mismatches = count_v_mismatches(v8, v_scales, v_model, result.scale_mismatches);
  }

  // The output, back in dense [b][h][n][d] order.
  const auto out_bits = out.download_as<std::uint16_t>(out_count);
  std::vector<float> output(q_count);
  for_each_row(q_shape, [&](int b, int h, int n, std::size_t row) {
    for (int d = 0; d < out_row_elements; ++d) {
      const std::uint16_t bits =
          out_bits[layout_index(check.layout, q_shape, b, h, n, d, out_row_elements)];
      if (d >= p.head_dim) {
        if (bits != 0xFFFF) ++result.overwritten_padding;
        continue;
      }
      output[row * p.head_dim + d] = bf16 ? bf16_bits_to_float(bits) : f16_bits_to_float(bits);
      if (bits == 0xFFFF) ++result.unwritten_outputs;
    }
  });

  ModelOptions model_options;
  model_options.variant = p.variant;
  model_options.numerics = check.options.numerics;
  model_options.block_n = check.options.config ? check.options.config->block_n : 0;
  model_options.v_is_bf16 = bf16;
  if (smooth_k) model_options.q_dot_k_mean = device_lse_terms.data();
  if (model_options.block_n == 0) {
    throw std::runtime_error("run_check needs options.config: the model steps tile by tile");
  }
  std::vector<double> model_out(q_count), model_lse(q_count / p.head_dim),
      p_unit_share(q_count / p.head_dim);
  model_options.p_unit_share = p_unit_share.data();
  attention_quantized_model(shape, q_model, k_model,
                            p.variant == intfa::Variant::kFullInt8 ? &v_model : nullptr, v.data(),
                            model_options, model_out.data(), model_lse.data());
  // The kernel rounds its output once to the 16-bit type (README.md); so does the model here.
  std::vector<double> model_rounded(q_count);
  for (std::size_t i = 0; i < q_count; ++i) {
    model_rounded[i] = round_to_16bit(static_cast<float>(model_out[i]), bf16);
  }
  result.vs_model = compare(model_rounded.data(), output.data(), q_count);
  std::vector<double> exact_lse;
  if (check.compare_to_f64) {
    std::vector<double> exact(q_count);
    exact_lse.resize(q_count / p.head_dim);
    attention_f64(shape, q.data(), k.data(), v.data(), exact.data(), exact_lse.data());
    result.vs_f64 = compare(exact.data(), output.data(), q_count);
    result.model_vs_f64 = compare(exact.data(), model_out.data(), q_count);
  }
  if (check.with_lse) {
    const auto lse_values = lse.download_as<float>(model_lse.size());
    for (std::size_t i = 0; i < exact_lse.size(); ++i) {
      if (std::isfinite(exact_lse[i]) && std::isfinite(lse_values[i])) {
        result.lse_vs_f64_max_abs_error =
            std::max(result.lse_vs_f64_max_abs_error, std::fabs(lse_values[i] - exact_lse[i]));
      }
    }
    for (std::size_t i = 0; i < model_lse.size(); ++i) {
      const bool model_infinite = std::isinf(model_lse[i]);
      const bool kernel_infinite = std::isinf(lse_values[i]) && lse_values[i] < 0;
      if (model_infinite != kernel_infinite || std::isnan(lse_values[i])) {
        ++result.lse_infinity_mismatches;
        continue;
      }
      if (!model_infinite) {
        const double error = std::fabs(lse_values[i] - model_lse[i]);
        result.lse_max_abs_error = std::max(result.lse_max_abs_error, error);
        constexpr double kTiesAllowed = 2.0;
        result.lse_max_error_past_ties = std::max(result.lse_max_error_past_ties,
                                                  error - kTiesAllowed * p_unit_share[i]);
      }
    }
  }
  return result;
}

}  // namespace intfa::reference
