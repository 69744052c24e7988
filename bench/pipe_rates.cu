// Issue rates of the instructions the attention softmax is made of, on one SM, in results per
// clock: int32 -> float conversion (I2FP), ex2 (MUFU), and both together (do they share a pipe?),
// against the integer/float ops that replace a conversion with the 1.5 * 2^23 trick; and the
// instructions of P's f16 encoding (online_softmax.cuh, quantize_p_pair): the packed
// f32 -> f16x2 convert (F2FP), alone and beside ex2 (does it share MUFU's pipe?), the f16x2 FMA
// (HFMA2) and the byte dot product of the row sums (IDP4A).
// One block of 1024 threads (8 warps per scheduler) on one SM, cycles from clock64.
//   nvcc -O3 -arch=sm_90a -o pipe_rates bench/pipe_rates.cu && ./pipe_rates
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

namespace {

constexpr int kIndependent = 8;  // independent chains per thread: no latency stalls
constexpr int kIterations = 4096;
constexpr int kThreads = 1024;

enum class Work {
  kConvert, kExp, kConvertAndExp, kMagicConvert, kPackF16, kExpAndPackF16, kHalfFma, kDp4a
};

template <Work kWork>
__global__ void rate_kernel(float* sink, long long* cycles, int seed) {
  float value[kIndependent];
  int integer[kIndependent];
  for (int j = 0; j < kIndependent; ++j) {
    value[j] = 0.001f * (threadIdx.x + j);
    integer[j] = seed + j * 7 + threadIdx.x;
  }
  __syncthreads();
  const long long start = clock64();
#pragma unroll 4
  for (int it = 0; it < kIterations; ++it) {
#pragma unroll
    for (int j = 0; j < kIndependent; ++j) {
      if constexpr (kWork == Work::kConvert) {
        value[j] += static_cast<float>(integer[j] + it);  // IADD, I2FP, FADD
      } else if constexpr (kWork == Work::kExp) {
        float e;
        asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(value[j]));
        value[j] = e * -0.5f;  // MUFU, FMUL
      } else if constexpr (kWork == Work::kConvertAndExp) {
        float e;
        asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(value[j]));
        value[j] = e * -0.5f + static_cast<float>(integer[j] + it);  // + IADD, I2FP, FFMA
      } else if constexpr (kWork == Work::kMagicConvert) {
        // IADD, FADD (the conversion), FADD
        value[j] += __int_as_float(integer[j] + it + 0x4B400000) - 12582912.0f;
      } else if constexpr (kWork == Work::kPackF16) {
        unsigned packed;  // F2FP
        asm volatile("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(value[j]), "f"(value[j]));
        value[j] = __int_as_float(static_cast<int>(packed));
      } else if constexpr (kWork == Work::kExpAndPackF16) {
        float e;  // MUFU, F2FP
        unsigned packed;
        asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(value[j]));
        asm volatile("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(e), "f"(e));
        value[j] = __int_as_float(static_cast<int>(packed));
      } else if constexpr (kWork == Work::kHalfFma) {
        unsigned word = static_cast<unsigned>(integer[j]);  // HFMA2
        asm volatile("fma.rn.f16x2 %0, %0, %1, %2;" : "+r"(word) : "r"(0x3C003C00u), "r"(0x3C003C00u));
        integer[j] = static_cast<int>(word);
      } else {
        unsigned word = static_cast<unsigned>(integer[j]);  // IDP4A
        asm volatile("dp4a.u32.u32 %0, %0, %1, %0;" : "+r"(word) : "r"(0x01010101u));
        integer[j] = static_cast<int>(word);
      }
    }
  }
  __syncthreads();
  const long long stop = clock64();
  float total = 0.0f;
  for (int j = 0; j < kIndependent; ++j) total += value[j] + static_cast<float>(integer[j]);
  sink[blockIdx.x * blockDim.x + threadIdx.x] = total;
  if (threadIdx.x == 0) cycles[blockIdx.x] = stop - start;
}

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(status));
    std::exit(1);
  }
}

template <Work kWork>
double results_per_clock(float* sink, long long* cycles) {
  long long best = 0;
  for (int repeat = 0; repeat < 5; ++repeat) {
    rate_kernel<kWork><<<1, kThreads>>>(sink, cycles, repeat);
    check(cudaGetLastError(), "launch");
    long long measured = 0;
    check(cudaMemcpy(&measured, cycles, sizeof(measured), cudaMemcpyDeviceToHost), "copy");
    if (best == 0 || measured < best) best = measured;
  }
  return static_cast<double>(kThreads) * kIterations * kIndependent / static_cast<double>(best);
}

}  // namespace

int main() {
  float* sink = nullptr;
  long long* cycles = nullptr;
  check(cudaMalloc(&sink, kThreads * sizeof(float)), "malloc");
  check(cudaMalloc(&cycles, sizeof(long long)), "malloc");
  std::printf("elements per clock per SM (1 SM, 1024 threads, %d independent chains each)\n",
              kIndependent);
  std::printf("  IADD + I2FP + FADD       : %6.1f\n",
              results_per_clock<Work::kConvert>(sink, cycles));
  std::printf("  IADD + FADD + FADD (magic): %6.1f\n",
              results_per_clock<Work::kMagicConvert>(sink, cycles));
  std::printf("  MUFU.EX2 + FMUL          : %6.1f\n", results_per_clock<Work::kExp>(sink, cycles));
  std::printf("  MUFU.EX2 + IADD + I2FP + FFMA: %6.1f\n",
              results_per_clock<Work::kConvertAndExp>(sink, cycles));
  std::printf("  F2FP (cvt.rn.f16x2.f32)  : %6.1f\n",
              results_per_clock<Work::kPackF16>(sink, cycles));
  std::printf("  MUFU.EX2 + F2FP          : %6.1f\n",
              results_per_clock<Work::kExpAndPackF16>(sink, cycles));
  std::printf("  HFMA2 (fma.rn.f16x2)     : %6.1f\n",
              results_per_clock<Work::kHalfFma>(sink, cycles));
  std::printf("  IDP4A (dp4a.u32.u32)     : %6.1f\n", results_per_clock<Work::kDp4a>(sink, cycles));
  check(cudaFree(sink), "free");
  check(cudaFree(cycles), "free");
  return 0;
}
