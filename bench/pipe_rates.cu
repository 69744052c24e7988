// Issue rates of the instructions the attention softmax is made of, on one SM, in results per
// clock: int32 -> float conversion (I2FP), ex2 (MUFU), and both together (do they share a pipe?),
// against the integer/float ops that replace a conversion with the 1.5 * 2^23 trick.
// One block of 1024 threads (8 warps per scheduler) on one SM, cycles from clock64.
//   nvcc -O3 -arch=sm_90a -o pipe_rates bench/pipe_rates.cu && ./pipe_rates
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

namespace {

constexpr int kIndependent = 8;  // independent chains per thread: no latency stalls
constexpr int kIterations = 4096;
constexpr int kThreads = 1024;

enum class Work { kConvert, kExp, kConvertAndExp, kMagicConvert };

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
      } else {
        // IADD, FADD (the conversion), FADD
        value[j] += __int_as_float(integer[j] + it + 0x4B400000) - 12582912.0f;
      }
    }
  }
  __syncthreads();
  const long long stop = clock64();
  float total = 0.0f;
  for (int j = 0; j < kIndependent; ++j) total += value[j];
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
  check(cudaFree(sink), "free");
  check(cudaFree(cycles), "free");
  return 0;
}
