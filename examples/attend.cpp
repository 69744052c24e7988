// A host application that takes intfa in as a dependency (examples/CMakeLists.txt builds it
// against the installed package, examples/subproject/ through add_subdirectory): FP16 Q, K and V
// on the GPU are quantized to INT8 and attended with INT8 attention, and the output is checked
// against float attention on the CPU. Without a GPU it says so and compiles, into the kernel
// cache, the kernels it would launch (intfa::precompile), so that its first run on a GPU, or a
// machine given that cache, starts without waiting for NVRTC.
//
// Device memory comes from the CUDA runtime, as in most host applications; intfa launches on the
// context the runtime makes current, and a cudaStream_t is a CUstream.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <intfa/intfa.hpp>
#include <random>
#include <vector>

namespace {

void check(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  std::fprintf(stderr, "%s failed: %s\n", what, cudaGetErrorString(status));
  std::exit(1);
}

// Device memory owned by one scope.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) { check(cudaMalloc(&data_, bytes), "cudaMalloc"); }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return data_; }
  float* floats() const { return static_cast<float*>(data_); }

 private:
  void* data_ = nullptr;
};

std::size_t rows(const intfa::TensorShape& shape) {
  return static_cast<std::size_t>(shape.batch) * shape.heads * shape.seq;
}
std::size_t elements(const intfa::TensorShape& shape) {
  return rows(shape) * shape.head_dim;
}

}  // namespace

// [README: Using it]
// Q [batch, heads_q, seq_q, head_dim], K and V [batch, heads_kv, seq_kv, head_dim]: dense FP16
// device tensors (BHND), out FP16 like Q. Quantizes Q, K and V, then INT8 attention on `stream`.
void int8_attention(const intfa::AttentionProblem& problem, void* q_f16, void* k_f16, void* v_f16,
                    void* out_f16, cudaStream_t stream) {
  using intfa::DType;
  const int b = problem.batch, h_kv = problem.heads_kv, n_kv = problem.seq_kv;
  const int d = problem.head_dim;
  const intfa::TensorShape q_shape{b, problem.heads_q, problem.seq_q, d};
  const intfa::TensorShape kv_shape{b, h_kv, n_kv, d};
  const auto bhnd = [](void* data, DType dtype, const intfa::TensorShape& shape) {
    return intfa::TensorView::dense(data, dtype, intfa::Layout::kBHND, shape);
  };
  const intfa::AttentionOptions options;  // default numerics: bench/RESULTS.md

  // Q and K -> INT8 in the same layout, one float scale per token.
  DeviceBuffer q_i8(elements(q_shape)), q_scale(rows(q_shape) * sizeof(float));
  DeviceBuffer k_i8(elements(kv_shape)), k_scale(rows(kv_shape) * sizeof(float));
  intfa::quantize_qk(q_shape, bhnd(q_f16, DType::kF16, q_shape),
                     bhnd(q_i8.get(), DType::kI8, q_shape), q_scale.floats(), stream);
  intfa::quantize_qk(kv_shape, bhnd(k_f16, DType::kF16, kv_shape),
                     bhnd(k_i8.get(), DType::kI8, kv_shape), k_scale.floats(), stream);
  // V -> INT8 in the kernel's V layout, scaled at the granularity the options name.
  DeviceBuffer v_i8(intfa::v_int8_bytes(b, h_kv, n_kv, d));
  DeviceBuffer v_scale(intfa::v_scale_count(options.numerics.v_granularity, b, h_kv, n_kv, d) *
                       sizeof(float));
  intfa::quantize_v(kv_shape, bhnd(v_f16, DType::kF16, kv_shape), v_i8.get(), v_scale.floats(),
                    options.numerics.v_granularity, stream);

  intfa::AttentionTensors tensors;
  tensors.q = bhnd(q_i8.get(), DType::kI8, q_shape);
  tensors.k = bhnd(k_i8.get(), DType::kI8, kv_shape);
  tensors.v = intfa::v_int8_view(v_i8.get(), b, h_kv, n_kv, d);
  tensors.q_scale = q_scale.floats();
  tensors.k_scale = k_scale.floats();
  tensors.v_scale = v_scale.floats();
  tensors.out = bhnd(out_f16, DType::kF16, q_shape);
  intfa::attention_forward(problem, tensors, stream, options);    // JIT-compiled once, then cached
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");  // before the buffers are freed
}
// [README: end]

namespace {

// IEEE half, round to nearest even (the values here are far from overflow).
std::uint16_t to_half(float value) {
  const std::uint16_t sign = std::signbit(value) ? 0x8000 : 0;
  const float magnitude = std::fabs(value);
  if (magnitude < 0x1p-14f) {  // subnormal: a multiple of 2^-24
    return static_cast<std::uint16_t>(sign | std::lrint(magnitude * 0x1p24f));
  }
  int exponent = 0;
  long significand = std::lrint(std::frexp(magnitude, &exponent) * 2048.0f);  // 1024..2048
  if (significand == 2048) significand = 1024, ++exponent;
  return static_cast<std::uint16_t>(sign | (exponent + 14) << 10 | (significand - 1024));
}

float from_half(std::uint16_t bits) {
  const int exponent = bits >> 10 & 0x1f;
  const int fraction = bits & 0x3ff;
  const float magnitude = exponent == 0
                              ? std::ldexp(static_cast<float>(fraction), -24)
                              : std::ldexp(static_cast<float>(1024 + fraction), exponent - 25);
  return (bits & 0x8000) != 0 ? -magnitude : magnitude;
}

// Float attention of the same FP16 inputs (BHND), causal masks bottom-right aligned.
std::vector<float> reference_attention(const intfa::AttentionProblem& p,
                                       const std::vector<std::uint16_t>& q,
                                       const std::vector<std::uint16_t>& k,
                                       const std::vector<std::uint16_t>& v) {
  const int d = p.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  std::vector<float> out(q.size());
  std::vector<float> weights(p.seq_kv);
  for (int b = 0; b < p.batch; ++b) {
    for (int h = 0; h < p.heads_q; ++h) {
      const int h_kv = h / (p.heads_q / p.heads_kv);
      const std::size_t q_base = (static_cast<std::size_t>(b) * p.heads_q + h) * p.seq_q * d;
      const std::size_t kv_base = (static_cast<std::size_t>(b) * p.heads_kv + h_kv) * p.seq_kv * d;
      for (int i = 0; i < p.seq_q; ++i) {
        const int last_key = p.causal ? i + p.seq_kv - p.seq_q : p.seq_kv - 1;
        float maximum = -INFINITY;
        for (int j = 0; j <= last_key; ++j) {
          float dot = 0.0f;
          for (int c = 0; c < d; ++c) {
            dot += from_half(q[q_base + i * d + c]) * from_half(k[kv_base + j * d + c]);
          }
          weights[j] = dot * scale;
          maximum = std::fmax(maximum, weights[j]);
        }
        float sum = 0.0f;
        for (int j = 0; j <= last_key; ++j) sum += weights[j] = std::exp(weights[j] - maximum);
        for (int c = 0; c < d; ++c) {
          float acc = 0.0f;
          for (int j = 0; j <= last_key; ++j) acc += weights[j] * from_half(v[kv_base + j * d + c]);
          out[q_base + i * d + c] = last_key < 0 ? 0.0f : acc / sum;
        }
      }
    }
  }
  return out;
}

// No GPU: the kernels int8_attention would launch, compiled now into the kernel cache.
int precompile_instead(const intfa::AttentionProblem& problem, const intfa::RuntimeInfo& info) {
  std::printf("%s\n", info.gpu.c_str());
  intfa::PrecompileRequest request;
  // The arch INTFA_ARCH names, else that of the H100/H200 (sm_90a).
  request.arch = info.target_arch.empty() ? "sm_90a" : info.target_arch;
  request.head_dims = {problem.head_dim};
  request.variants = {problem.variant};
  request.dtypes = {intfa::DType::kF16};
  request.causal = {problem.causal};
  const intfa::PrecompileReport report = intfa::precompile(request);
  std::printf(
      "compiled the %zu kernels this run would launch on %s into the kernel cache %s "
      "(%zu by NVRTC now, %zu were there):\n",
      report.kernels, report.arch.c_str(), info.cache_directory.c_str(), report.compiled_now,
      report.already_present);
  for (const std::string& spec : report.specs) std::printf("  %s\n", spec.c_str());
  return 0;
}

}  // namespace

int main() {
  intfa::AttentionProblem problem;
  problem.batch = 2;
  problem.heads_q = 4;
  problem.heads_kv = 2;  // grouped-query attention
  problem.seq_q = 100;
  problem.seq_kv = 200;
  problem.head_dim = 64;
  problem.causal = true;
  try {
    const intfa::RuntimeInfo info = intfa::runtime_info();
    std::printf("intfa %s (NVRTC %s)\n", info.version.c_str(), info.nvrtc_version.c_str());
    if (!info.gpu_available) return precompile_instead(problem, info);

    const std::size_t q_count = static_cast<std::size_t>(problem.batch) * problem.heads_q *
                                problem.seq_q * problem.head_dim;
    const std::size_t kv_count = static_cast<std::size_t>(problem.batch) * problem.heads_kv *
                                 problem.seq_kv * problem.head_dim;
    std::mt19937 generator(2026);
    std::normal_distribution<float> normal;
    auto random_halves = [&](std::size_t count) {
      std::vector<std::uint16_t> values(count);
      for (std::uint16_t& value : values) value = to_half(normal(generator));
      return values;
    };
    const std::vector<std::uint16_t> q = random_halves(q_count), k = random_halves(kv_count),
                                     v = random_halves(kv_count);

    check(cudaSetDevice(0), "cudaSetDevice");
    cudaStream_t stream = nullptr;
    check(cudaStreamCreate(&stream), "cudaStreamCreate");
    DeviceBuffer q_f16(q_count * 2), k_f16(kv_count * 2), v_f16(kv_count * 2), out_f16(q_count * 2);
    check(cudaMemcpy(q_f16.get(), q.data(), q_count * 2, cudaMemcpyHostToDevice), "cudaMemcpy");
    check(cudaMemcpy(k_f16.get(), k.data(), kv_count * 2, cudaMemcpyHostToDevice), "cudaMemcpy");
    check(cudaMemcpy(v_f16.get(), v.data(), kv_count * 2, cudaMemcpyHostToDevice), "cudaMemcpy");
    int8_attention(problem, q_f16.get(), k_f16.get(), v_f16.get(), out_f16.get(), stream);
    std::vector<std::uint16_t> out(q_count);
    check(cudaMemcpy(out.data(), out_f16.get(), q_count * 2, cudaMemcpyDeviceToHost), "cudaMemcpy");
    check(cudaStreamDestroy(stream), "cudaStreamDestroy");

    const std::vector<float> expected = reference_attention(problem, q, k, v);
    double error = 0.0, norm = 0.0;
    for (std::size_t i = 0; i < q_count; ++i) {
      error += std::pow(from_half(out[i]) - expected[i], 2.0);
      norm += std::pow(expected[i], 2.0);
    }
    const double relative_l2 = std::sqrt(error / norm);
    // INT8 Q, K, V and P cost about 1-2% relative L2 on normal inputs (bench/RESULTS.md).
    const bool close = relative_l2 < 0.03;
    std::printf("%s: INT8 attention vs float on the CPU, relative L2 %.3f%% (%s 3%%)\n",
                info.gpu.c_str(), 100.0 * relative_l2, close ? "within" : "NOT within");
    return close ? 0 : 1;
  } catch (const intfa::Error& error) {
    std::fprintf(stderr, "intfa: %s\n", error.what());
    return 1;
  }
}
