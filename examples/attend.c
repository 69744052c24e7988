/* A C host application of intfa's C API (include/intfa/intfa.h), built against the installed
 * package by examples/CMakeLists.txt: FP16 Q, K and V on the GPU are quantized to INT8 and attended
 * with INT8 attention, and the output is checked against float attention on the CPU. Without a
 * GPU it says so and compiles, into the kernel cache, the kernels it would launch
 * (intfa_precompile). Device memory comes from the CUDA runtime; a cudaStream_t is a CUstream. */
#include <cuda_runtime.h>
#include <intfa/intfa.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

enum { kBatch = 2, kHeadsQ = 4, kHeadsKv = 2, kSeqQ = 100, kSeqKv = 200, kHeadDim = 64 };

static void check_cuda(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  fprintf(stderr, "%s failed: %s\n", what, cudaGetErrorString(status));
  exit(1);
}

static void check_intfa(intfa_status_t status, const char* what) {
  if (status == INTFA_OK) return;
  fprintf(stderr, "%s failed (%s): %s\n", what, intfa_status_string(status), intfa_last_error());
  exit(1);
}

static void* device_alloc(size_t bytes) {
  void* data = NULL;
  check_cuda(cudaMalloc(&data, bytes), "cudaMalloc");
  return data;
}

/* IEEE half, round to nearest even (the values here are far from overflow). */
static uint16_t to_half(float value) {
  const uint16_t sign = signbit(value) ? 0x8000 : 0;
  const float magnitude = fabsf(value);
  int exponent = 0;
  long significand;
  if (magnitude < 0x1p-14f) return (uint16_t)(sign | lrintf(magnitude * 0x1p24f)); /* subnormal */
  significand = lrintf(frexpf(magnitude, &exponent) * 2048.0f);                    /* 1024..2048 */
  if (significand == 2048) significand = 1024, ++exponent;
  return (uint16_t)(sign | (exponent + 14) << 10 | (significand - 1024));
}

static float from_half(uint16_t bits) {
  const int exponent = bits >> 10 & 0x1f;
  const int fraction = bits & 0x3ff;
  const float magnitude = exponent == 0 ? ldexpf((float)fraction, -24)
                                        : ldexpf((float)(1024 + fraction), exponent - 25);
  return (bits & 0x8000) ? -magnitude : magnitude;
}

/* A standard normal sample (Box-Muller). */
static float normal(void) {
  const double u1 = (rand() + 1.0) / (RAND_MAX + 2.0), u2 = (rand() + 1.0) / (RAND_MAX + 2.0);
  return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* A dense BHND view of [batch, heads, seq, head_dim]. */
static intfa_tensor_t bhnd(void* data, intfa_dtype_t dtype, int heads, int seq) {
  intfa_tensor_t view;
  view.data = data;
  view.dtype = dtype;
  view.strides[3] = 1;
  view.strides[2] = kHeadDim;
  view.strides[1] = (int64_t)seq * kHeadDim;
  view.strides[0] = (int64_t)heads * seq * kHeadDim;
  return view;
}

/* Float attention of the same FP16 inputs, causal masks bottom-right aligned. */
static double relative_l2_error(const uint16_t* q, const uint16_t* k, const uint16_t* v,
                                const uint16_t* out) {
  static float weights[kSeqKv];
  const float scale = 1.0f / sqrtf((float)kHeadDim);
  double error = 0.0, norm = 0.0;
  int b, h, i, j, c;
  for (b = 0; b < kBatch; ++b) {
    for (h = 0; h < kHeadsQ; ++h) {
      const size_t q_base = ((size_t)b * kHeadsQ + h) * kSeqQ * kHeadDim;
      const size_t kv_base = ((size_t)b * kHeadsKv + h / (kHeadsQ / kHeadsKv)) * kSeqKv * kHeadDim;
      for (i = 0; i < kSeqQ; ++i) {
        const int last_key = i + kSeqKv - kSeqQ;
        float maximum = -INFINITY, sum = 0.0f;
        for (j = 0; j <= last_key; ++j) {
          float dot = 0.0f;
          for (c = 0; c < kHeadDim; ++c) {
            dot +=
                from_half(q[q_base + i * kHeadDim + c]) * from_half(k[kv_base + j * kHeadDim + c]);
          }
          weights[j] = dot * scale;
          maximum = fmaxf(maximum, weights[j]);
        }
        for (j = 0; j <= last_key; ++j) sum += weights[j] = expf(weights[j] - maximum);
        for (c = 0; c < kHeadDim; ++c) {
          float expected = 0.0f;
          for (j = 0; j <= last_key; ++j)
            expected += weights[j] * from_half(v[kv_base + j * kHeadDim + c]);
          expected /= sum;
          error += pow(from_half(out[q_base + i * kHeadDim + c]) - expected, 2.0);
          norm += pow(expected, 2.0);
        }
      }
    }
  }
  return sqrt(error / norm);
}

/* No GPU: the kernels this run would launch, compiled now into the kernel cache, for the arch
   INTFA_ARCH names, else that of the H100/H200 (sm_90a). */
static int precompile_instead(const intfa_problem_t* problem, const intfa_options_t* options) {
  size_t kernels = 0, compiled_now = 0;
  const char* arch = getenv("INTFA_ARCH") != NULL ? NULL : "sm_90a";
  check_intfa(intfa_precompile(problem, INTFA_F16, options, arch, &kernels, &compiled_now),
              "intfa_precompile");
  printf(
      "compiled the %zu kernels this run would launch on %s into the kernel cache "
      "(%zu by NVRTC now, the others were there)\n",
      kernels, arch != NULL ? arch : getenv("INTFA_ARCH"), compiled_now);
  return 0;
}

int main(void) {
  const size_t q_count = (size_t)kBatch * kHeadsQ * kSeqQ * kHeadDim;
  const size_t kv_count = (size_t)kBatch * kHeadsKv * kSeqKv * kHeadDim;
  intfa_problem_t problem = {kBatch,   kHeadsQ, kHeadsKv,        kSeqQ, kSeqKv,
                             kHeadDim, 1,       INTFA_FULL_INT8, 8};
  intfa_options_t options;
  intfa_attention_tensors_t tensors;
  intfa_shape_t q_shape = {kBatch, kHeadsQ, kSeqQ, kHeadDim};
  intfa_shape_t kv_shape = {kBatch, kHeadsKv, kSeqKv, kHeadDim};
  uint16_t *q, *k, *v, *out;
  void *q_f16, *k_f16, *v_f16, *out_f16, *q_i8, *k_i8, *v_i8;
  float *q_scale, *k_scale, *v_scale;
  intfa_tensor_t q_input, k_input, v_input;
  cudaStream_t stream;
  int device_count = 0;
  cudaError_t probe;
  double error;
  size_t i;

  intfa_default_options(&options);
  printf("intfa %s\n", intfa_version());
  probe = cudaGetDeviceCount(&device_count);
  if (probe != cudaSuccess || device_count == 0) {
    printf("no GPU (cudaGetDeviceCount: %s)\n",
           probe != cudaSuccess ? cudaGetErrorString(probe) : "0 devices");
    return precompile_instead(&problem, &options);
  }

  srand(2026);
  q = malloc(q_count * 2), k = malloc(kv_count * 2), v = malloc(kv_count * 2);
  out = malloc(q_count * 2);
  if (!q || !k || !v || !out) return 1;
  for (i = 0; i < q_count; ++i) q[i] = to_half(normal());
  for (i = 0; i < kv_count; ++i) k[i] = to_half(normal());
  for (i = 0; i < kv_count; ++i) v[i] = to_half(normal());

  check_cuda(cudaSetDevice(0), "cudaSetDevice");
  check_cuda(cudaStreamCreate(&stream), "cudaStreamCreate");
  q_f16 = device_alloc(q_count * 2), k_f16 = device_alloc(kv_count * 2);
  v_f16 = device_alloc(kv_count * 2), out_f16 = device_alloc(q_count * 2);
  check_cuda(cudaMemcpy(q_f16, q, q_count * 2, cudaMemcpyHostToDevice), "cudaMemcpy");
  check_cuda(cudaMemcpy(k_f16, k, kv_count * 2, cudaMemcpyHostToDevice), "cudaMemcpy");
  check_cuda(cudaMemcpy(v_f16, v, kv_count * 2, cudaMemcpyHostToDevice), "cudaMemcpy");

  /* Q and K -> INT8 in the same layout, one float scale per token; V -> INT8 in the kernel's V
     layout, scaled at the granularity the options name. */
  q_i8 = device_alloc(q_count), k_i8 = device_alloc(kv_count);
  q_scale = device_alloc((size_t)kBatch * kHeadsQ * kSeqQ * sizeof(float));
  k_scale = device_alloc((size_t)kBatch * kHeadsKv * kSeqKv * sizeof(float));
  v_i8 = device_alloc(intfa_v_int8_bytes(kBatch, kHeadsKv, kSeqKv, kHeadDim));
  v_scale =
      device_alloc(intfa_v_scale_count(options.v_granularity, kBatch, kHeadsKv, kSeqKv, kHeadDim) *
                   sizeof(float));
  q_input = bhnd(q_f16, INTFA_F16, kHeadsQ, kSeqQ);
  k_input = bhnd(k_f16, INTFA_F16, kHeadsKv, kSeqKv);
  v_input = bhnd(v_f16, INTFA_F16, kHeadsKv, kSeqKv);
  tensors.q = bhnd(q_i8, INTFA_I8, kHeadsQ, kSeqQ);
  tensors.k = bhnd(k_i8, INTFA_I8, kHeadsKv, kSeqKv);
  intfa_v_int8_view(v_i8, kBatch, kHeadsKv, kSeqKv, kHeadDim, &tensors.v);
  tensors.out = bhnd(out_f16, INTFA_F16, kHeadsQ, kSeqQ);
  tensors.q_scale = q_scale, tensors.k_scale = k_scale, tensors.v_scale = v_scale;
  tensors.lse = NULL;
  check_intfa(intfa_quantize_qk(&q_shape, &q_input, &tensors.q, q_scale, 8, stream), "quantize Q");
  check_intfa(intfa_quantize_qk(&kv_shape, &k_input, &tensors.k, k_scale, 8, stream), "quantize K");
  check_intfa(intfa_quantize_v(&kv_shape, &v_input, v_i8, v_scale, options.v_granularity, stream),
              "quantize V");
  check_intfa(intfa_attention_forward(&problem, &tensors, stream, &options), "attention");
  check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  check_cuda(cudaMemcpy(out, out_f16, q_count * 2, cudaMemcpyDeviceToHost), "cudaMemcpy");

  error = relative_l2_error(q, k, v, out);
  /* INT8 Q, K, V and P cost about 1-2% relative L2 (bench/RESULTS.md). */
  printf("INT8 attention vs float on the CPU: relative L2 %.3f%% (%s 3%%)\n", 100.0 * error,
         error < 0.03 ? "within" : "NOT within");
  cudaFree(q_f16), cudaFree(k_f16), cudaFree(v_f16), cudaFree(out_f16);
  cudaFree(q_i8), cudaFree(k_i8), cudaFree(v_i8);
  cudaFree(q_scale), cudaFree(k_scale), cudaFree(v_scale);
  cudaStreamDestroy(stream);
  free(q), free(k), free(v), free(out);
  return error < 0.03 ? 0 : 1;
}
