#include "intfa/attention_workload.hpp"

#include <unistd.h>

#include <algorithm>
#include <vector>

#include "common/strings.hpp"
#include "intfa/args.hpp"
#include "quantize/quantize_internal.hpp"
#include "reference/half.hpp"
#include "reference/parallel_heads.hpp"

namespace intfa::cli {
namespace {

// The 16-bit bits of `values` (already rounded to the type) on the device.
device::DeviceBuffer device_16bit_buffer(const std::vector<float>& values, bool bf16) {
  const std::size_t count = values.size();
  std::vector<std::uint16_t> bits(count);
  reference::for_each_chunk_in_parallel(
      count, std::size_t{1} << 20, [&](std::size_t, std::size_t begin, std::size_t end) {
        for (std::size_t i = begin; i < end; ++i) {
          bits[i] = bf16 ? reference::float_to_bf16_bits(values[i])
                         : reference::float_to_f16_bits(values[i]);
        }
      });
  device::DeviceBuffer buffer(count * 2);
  buffer.upload(bits);
  return buffer;
}

}  // namespace

AttentionWorkload::AttentionWorkload(const AttentionProblem& problem,
                                     const AttentionOptions& options, DType io_type,
                                     reference::InputFamily inputs, std::uint64_t seed)
    : problem_(problem),
      options_(options),
      io_type_(io_type),
      q_shape_{problem.batch, problem.heads_q, problem.seq_q, problem.head_dim},
      kv_shape_{problem.batch, problem.heads_kv, problem.seq_kv, problem.head_dim} {
  const bool bf16 = io_type == DType::kBF16;
  const std::size_t q_count =
      static_cast<std::size_t>(problem.batch) * problem.heads_q * problem.seq_q * problem.head_dim;
  const std::size_t kv_count = static_cast<std::size_t>(problem.batch) * problem.heads_kv *
                               problem.seq_kv * problem.head_dim;
  {
    const reference::AttentionInputValues values = reference::make_inputs(
        inputs,
        reference::make_shape(problem.batch, problem.heads_q, problem.heads_kv, problem.seq_q,
                              problem.seq_kv, problem.head_dim, problem.causal),
        seed, bf16);
    q_ = device_16bit_buffer(values.q, bf16);
    k_ = device_16bit_buffer(values.k, bf16);
    v_ = device_16bit_buffer(values.v, bf16);
  }
  const int bits = problem.qk_bits;
  q8_ = device::DeviceBuffer(q_count * bits / 8);
  k8_ = device::DeviceBuffer(kv_count * bits / 8);
  q_scale_ = device::DeviceBuffer(q_count / problem.head_dim * sizeof(float));
  k_scale_ = device::DeviceBuffer(k_scale_count(options.numerics.k_granularity, problem.batch,
                                                problem.heads_kv, problem.seq_kv) *
                                  sizeof(float));
  v8_ = device::DeviceBuffer(
      v_int8_bytes(problem.batch, problem.heads_kv, problem.seq_kv, problem.head_dim));
  v_scale_ =
      device::DeviceBuffer(v_scale_count(options.numerics.v_granularity, problem.batch,
                                         problem.heads_kv, problem.seq_kv, problem.head_dim) *
                           sizeof(float));
  out_ = device::DeviceBuffer(q_count * 2);
  out_.fill_bytes(0xFF);
  const DType qk_type = bits == 8 ? DType::kI8 : DType::kI4x2;
  tensors_.q = TensorView::dense(q8_.get(), qk_type, Layout::kBHND, q_shape_);
  tensors_.k = TensorView::dense(k8_.get(), qk_type, Layout::kBHND, kv_shape_);
  tensors_.q_scale = q_scale_.as<float>();
  tensors_.k_scale = k_scale_.as<float>();
  if (problem.variant == Variant::kFullInt8) {
    tensors_.v = v_int8_view(v8_.get(), problem.batch, problem.heads_kv, problem.seq_kv,
                             problem.head_dim);
    tensors_.v_scale = v_scale_.as<float>();
  } else {
    tensors_.v = TensorView::dense(v_.get(), io_type, Layout::kBHND, kv_shape_);
  }
  tensors_.out = TensorView::dense(out_.get(), io_type, Layout::kBHND, q_shape_);
  // K smoothing (options.smooth_k): K's channel means and Q's LSE terms, which attention reads.
  k_mean_ = device::DeviceBuffer(static_cast<std::size_t>(problem.batch) * problem.heads_kv *
                                 problem.head_dim * sizeof(float));
  q_dot_k_mean_ = device::DeviceBuffer(q_count / problem.head_dim * sizeof(float));
  if (options.smooth_k) tensors_.q_dot_k_mean = q_dot_k_mean_.as<float>();
  rotated_heads_ = device::DeviceBuffer(static_cast<std::size_t>(problem.batch) * problem.heads_kv *
                                        sizeof(int));
}

void AttentionWorkload::quantize(CUstream stream) {
  // As attention_forward_16bit: K (smoothed: its channel means first) and V in the launches they
  // share there, then Q (the LSE term). quantize::call_specs lists these kernels.
  QuantizeOptions k_options;
  k_options.bits = problem_.qk_bits;
  k_options.rotate = options_.rotate_qk;
  const bool auto_rotation = options_.rotate_qk == QKRotation::kAuto;
  if (auto_rotation) k_options.rotated_heads = rotated_heads_.as<int>();
  k_options.k_granularity = options_.numerics.k_granularity;
  k_options.smooth_k_channel_mean = options_.smooth_k ? k_mean_.as<float>() : nullptr;
  const TensorView k_input = TensorView::dense(k_.get(), io_type_, Layout::kBHND, kv_shape_);
  if (problem_.variant == Variant::kFullInt8) {
    quantize::KAndVPasses kv;
    kv.k_shape = kv_shape_;
    kv.k_input = k_input;
    kv.k_output = tensors_.k;
    kv.k_scales = k_scale_.as<float>();
    kv.k_options = k_options;
    kv.v_shape = kv_shape_;
    kv.v_input = TensorView::dense(v_.get(), io_type_, Layout::kBHND, kv_shape_);
    kv.v_output = v8_.get();
    kv.v_scales = v_scale_.as<float>();
    kv.v_granularity = options_.numerics.v_granularity;
    quantize::quantize_k_and_v_channels(kv, kv_shape_.head_dim, stream);
  } else {
    quantize_qk(kv_shape_, k_input, tensors_.k, k_scale_.as<float>(), stream, k_options);
  }
  QuantizeOptions q_options;
  q_options.bits = problem_.qk_bits;
  q_options.rotate = options_.rotate_qk;
  q_options.k_channel_mean_heads = problem_.heads_kv;
  if (auto_rotation) q_options.k_rotated_heads = rotated_heads_.as<int>();
  if (options_.smooth_k) {
    q_options.k_channel_mean = k_mean_.as<float>();
    q_options.q_dot_k_mean = q_dot_k_mean_.as<float>();
  }
  quantize_qk(q_shape_, TensorView::dense(q_.get(), io_type_, Layout::kBHND, q_shape_), tensors_.q,
              q_scale_.as<float>(), stream, q_options);
}

AttentionInputs AttentionWorkload::inputs_16bit() const {
  AttentionInputs inputs;
  inputs.q = TensorView::dense(q_.get(), io_type_, Layout::kBHND, q_shape_);
  inputs.k = TensorView::dense(k_.get(), io_type_, Layout::kBHND, kv_shape_);
  inputs.v = TensorView::dense(v_.get(), io_type_, Layout::kBHND, kv_shape_);
  inputs.out = tensors_.out;
  return inputs;
}

void AttentionWorkload::attend(CUstream stream) {
  attention_forward(problem_, tensors_, stream, options_);
}

std::uint64_t AttentionWorkload::host_bytes(const AttentionProblem& problem) {
  const std::uint64_t q = static_cast<std::uint64_t>(problem.batch) * problem.heads_q *
                          problem.seq_q * problem.head_dim;
  const std::uint64_t kv = static_cast<std::uint64_t>(problem.batch) * problem.heads_kv *
                           problem.seq_kv * problem.head_dim;
  return (q + 2 * kv) * sizeof(float) + std::max(q, kv) * sizeof(std::uint16_t);
}

void require_host_memory(std::uint64_t bytes, const std::string& shape) {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page_bytes = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_bytes <= 0) return;  // unknown: the allocation itself will tell
  const std::uint64_t memory = static_cast<std::uint64_t>(pages) * page_bytes;
  if (bytes > memory) {
    throw UsageError(shape + ": the inputs take " + strings::human_bytes(bytes) +
                     " of host memory; this machine has " + strings::human_bytes(memory));
  }
}

double AttentionWorkload::operations() const {
  const double full = 4.0 * problem_.batch * problem_.heads_q * problem_.seq_q *
                      static_cast<double>(problem_.seq_kv) * problem_.head_dim;
  return problem_.causal ? full / 2 : full;
}

std::uint64_t AttentionWorkload::quantize_bytes_moved() const {
  const std::uint64_t q = static_cast<std::uint64_t>(problem_.batch) * problem_.heads_q *
                          problem_.seq_q * problem_.head_dim;
  const std::uint64_t kv = static_cast<std::uint64_t>(problem_.batch) * problem_.heads_kv *
                           problem_.seq_kv * problem_.head_dim;
  const std::uint64_t bits = static_cast<std::uint64_t>(problem_.qk_bits);
  std::uint64_t bytes = (q + kv) * 2 + (q + kv) * bits / 8;  // read 16-bit, write quantized
  // K smoothing's mean pass reads at most 256 keys per head (not counted) and Q's pass writes a
  // float per row.
  if (options_.smooth_k) bytes += q / problem_.head_dim * 4;
  if (problem_.variant == Variant::kFullInt8) {
    bytes += kv * 2 + kv;  // V: read, write
    if (options_.numerics.v_granularity != VScaleGranularity::kPerBlock)
      bytes += kv * 2;  // max pass
  }
  return bytes;
}

std::vector<double> run_times(const std::function<void(CUstream)>& body, CUstream stream,
                              int warmup, int repeats) {
  for (int i = 0; i < warmup; ++i) body(stream);
  std::vector<double> times;
  device::Event start, stop;
  for (int i = 0; i < repeats; ++i) {
    start.record(stream);
    body(stream);
    stop.record(stream);
    times.push_back(stop.elapsed_ms_since(start));
  }
  return times;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0.0 : values[values.size() / 2];
}

Timing time_on_stream(const std::function<void(CUstream)>& body, CUstream stream, int warmup,
                      int repeats) {
  const std::vector<double> times = run_times(body, stream, warmup, repeats);
  Timing timing;
  timing.repeats = repeats;
  timing.median_ms = median(times);
  timing.min_ms = times.empty() ? 0 : *std::min_element(times.begin(), times.end());
  return timing;
}

}  // namespace intfa::cli
