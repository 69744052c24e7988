// Scalar conversions and math in PTX, so the templates need no CUDA headers under NVRTC and each
// rounding is explicit (the CPU model in tests/reference mirrors every one of them).
#pragma once

#include "common/kernel_enums.h"
#include "common/types.h"

namespace intfa {
namespace kernels {

__device__ __forceinline__ float f16_to_float(u16 bits) {
  float value;
  asm("cvt.f32.f16 %0, %1;" : "=f"(value) : "h"(bits));
  return value;
}

__device__ __forceinline__ float bf16_to_float(u16 bits) {
  return __int_as_float(static_cast<int>(static_cast<u32>(bits) << 16));
}

// Two floats -> two 16-bit floats in one register, round to nearest even; `low` in bits 0..15.
__device__ __forceinline__ u32 pack_f16x2(float low, float high) {
  u32 packed;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(high), "f"(low));
  return packed;
}

__device__ __forceinline__ u32 pack_bf16x2(float low, float high) {
  u32 packed;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(high), "f"(low));
  return packed;
}

template <ElementType Type>
__device__ __forceinline__ float element_to_float(u16 bits) {
  return Type == ElementType::kF16 ? f16_to_float(bits) : bf16_to_float(bits);
}

template <ElementType Type>
__device__ __forceinline__ u32 pack_float2(float low, float high) {
  return Type == ElementType::kF16 ? pack_f16x2(low, high) : pack_bf16x2(low, high);
}

// IEEE division, round to nearest (independent of --prec-div).
__device__ __forceinline__ float divide_rn(float numerator, float denominator) {
  float quotient;
  asm("div.rn.f32 %0, %1, %2;" : "=f"(quotient) : "f"(numerator), "f"(denominator));
  return quotient;
}

// Round to nearest, ties to even, as an integer.
__device__ __forceinline__ int round_to_int(float value) {
  int rounded;
  asm("cvt.rni.s32.f32 %0, %1;" : "=r"(rounded) : "f"(value));
  return rounded;
}

// 2^x on the SFU (max relative error 2^-22.5; PTX ISA, ex2).
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float log2_approx(float x) {
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Integer <-> float through the 1.5 * 2^23 trick: for |n| < 2^22 the float 12582912 + n has n in
// its low mantissa bits, so one integer add and one float add replace I2F/F2I, which issue at a
// quarter of the FP32 rate on sm_80..sm_90.
constexpr int kRoundingMagicBits = 0x4B400000;
constexpr float kRoundingMagic = 12582912.0f;

__device__ __forceinline__ float small_int_to_float(int n) {
  return __int_as_float(n + kRoundingMagicBits) - kRoundingMagic;
}

// round(x) for 0 <= x < 2^22, left in the low bits of the returned word (the byte of a u8/s8 in
// [0, 255] or [0, 127] is its low byte).
__device__ __forceinline__ u32 round_small_nonnegative_to_bits(float x) {
  return static_cast<u32>(__float_as_int(x + kRoundingMagic));
}

// Eight values times `inverse`, each rounded half to even and clamped to [-range, range]: the
// quantization step of every per-row and per-block quantizer (quantize_rows, paged_append).
__device__ __forceinline__ void quantize_8(int (&quantized)[8], const float (&values)[8],
                                           float inverse, int range) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    quantized[i] = max(-range, min(range, round_to_int(values[i] * inverse)));
  }
}

// Eight 16-bit values from one 16-byte word (element 2i in the low half of word i).
template <ElementType Type>
__device__ __forceinline__ void unpack_8_values(float (&values)[8], uint4 raw) {
  const u32 words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    values[2 * i] = element_to_float<Type>(static_cast<u16>(words[i] & 0xFFFF));
    values[2 * i + 1] = element_to_float<Type>(static_cast<u16>(words[i] >> 16));
  }
}

// The sum of `part` over a row held by LanesPerRow consecutive lanes (xor shuffles, halving
// offsets: every lane of the row gets the same sum, in the same order in every kernel).
template <int LanesPerRow>
__device__ __forceinline__ float row_sum(float part) {
#pragma unroll
  for (int offset = LanesPerRow / 2; offset > 0; offset /= 2) {
    part += __shfl_xor_sync(0xFFFFFFFFu, part, offset);
  }
  return part;
}

// max|x| over a row held by LanesPerRow consecutive lanes, 8 values each.
template <int LanesPerRow>
__device__ __forceinline__ float row_max_abs(const float (&values)[8]) {
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) amax = fmaxf(amax, fabsf(values[i]));
#pragma unroll
  for (int offset = LanesPerRow / 2; offset > 0; offset /= 2) {
    amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, offset));
  }
  return amax;
}

// The symmetric scale of a row whose largest magnitude is `amax` (amax / range, IEEE division)
// and the factor the values are multiplied by before rounding (0 for a row of zeros): Algorithm
// 1's per-token S_Q, S_K, shared by quantize_rows and the Hopper kernel's own Q pass.
struct RowScale {
  float scale, inverse;
};
__device__ __forceinline__ RowScale row_scale(float amax, float range) {
  const float scale = divide_rn(amax, range);
  return RowScale{scale, amax > 0.0f ? divide_rn(1.0f, scale) : 0.0f};
}

// Eight INT8 values (in [-128, 127]) as one 8-byte store: value i in byte i.
__device__ __forceinline__ void store_int8x8(u8* output, const int (&values)[8]) {
  u32 packed[2];
#pragma unroll
  for (int word = 0; word < 2; ++word) {
    packed[word] = (static_cast<u32>(values[4 * word] & 0xFF)) |
                   (static_cast<u32>(values[4 * word + 1] & 0xFF) << 8) |
                   (static_cast<u32>(values[4 * word + 2] & 0xFF) << 16) |
                   (static_cast<u32>(values[4 * word + 3] & 0xFF) << 24);
  }
  *reinterpret_cast<uint2*>(output) = make_uint2(packed[0], packed[1]);
}

}  // namespace kernels
}  // namespace intfa
