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

// FP32 -> FP16 bits, round to nearest even.
__device__ __forceinline__ u16 float_to_f16_bits(float value) {
  u16 bits;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(bits) : "f"(value));
  return bits;
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

// FP32's smallest normal value, 2^-126.
constexpr float kSmallestNormal = 1.17549435e-38f;

// IEEE division, round to nearest (independent of --prec-div).
__device__ __forceinline__ float divide_rn(float numerator, float denominator) {
  float quotient;
  asm("div.rn.f32 %0, %1, %2;" : "=f"(quotient) : "f"(numerator), "f"(denominator));
  return quotient;
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

// Integer -> float through the 1.5 * 2^23 trick: for |n| < 2^22 the float 12582912 + n has n in
// its low mantissa bits, so one integer add and one float add replace I2F, which issues at a
// quarter of the FP32 rate on sm_80..sm_90.
constexpr int kRoundingMagicBits = 0x4B400000;
constexpr float kRoundingMagic = 12582912.0f;

__device__ __forceinline__ float small_int_to_float(int n) {
  return __int_as_float(n + kRoundingMagicBits) - kRoundingMagic;
}

// value * inverse rounded half to even and clamped to [-range, range], as a two's-complement
// integer in the low bits of the returned word (gather_low_bytes, store_int8x8 and pack_int4x8
// collect them): the quantization step of every quantizer (quantize_rows, quantize_v, the Hopper
// kernel's Q pass, paged_append). One F2I with saturation to [-128, 127] (a NaN product, from a
// NaN or infinite input, gives 0); the clamp to the range is two more integer instructions,
// which `clamps` false leaves out where |value * inverse| < range + 1/2 is known: inverse = 1 /
// scale for a normal FP32 scale >= max|x| / range (RowScale::clamps; a subnormal scale rounds
// by too much, and 1 / scale may overflow).
template <bool Clamps>
__device__ __forceinline__ u32 quantize_to_low_bits(float value, float inverse, int range) {
  int quantized;
  asm("cvt.rni.sat.s8.f32 %0, %1;" : "=r"(quantized) : "f"(value * inverse));
  if constexpr (Clamps) quantized = max(-range, min(range, quantized));
  return static_cast<u32>(quantized);
}

// Eight values as quantize_to_low_bits, the clamp chosen once for the eight.
__device__ __forceinline__ void quantize_8(u32 (&quantized)[8], const float (&values)[8],
                                           float inverse, int range, bool clamps) {
  if (clamps) {
#pragma unroll
    for (int i = 0; i < 8; ++i)
      quantized[i] = quantize_to_low_bits<true>(values[i], inverse, range);
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      quantized[i] = quantize_to_low_bits<false>(values[i], inverse, range);
    }
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

// max|x| over a row held by LanesPerRow consecutive lanes, Count values each.
template <int LanesPerRow, int Count>
__device__ __forceinline__ float row_max_abs(const float (&values)[Count]) {
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < Count; ++i) amax = fmaxf(amax, fabsf(values[i]));
#pragma unroll
  for (int offset = LanesPerRow / 2; offset > 0; offset /= 2) {
    amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, offset));
  }
  return amax;
}

// The symmetric scale of a row whose largest magnitude is `amax` (amax / range, IEEE division)
// and the factor the values are multiplied by before rounding (0 for a row of zeros): Algorithm
// 1's per-token S_Q, S_K, shared by quantize_rows and the Hopper kernel's own Q pass.
// `clamps`: the scale is below FP32's normal range (max|x| < range * 2^-126), where the rounded
// scale, or 1 / scale overflowing to infinity, no longer bounds |x * inverse| by range + 1/2.
struct RowScale {
  float scale, inverse;
  bool clamps;
};
__device__ __forceinline__ RowScale row_scale(float amax, float range) {
  const float scale = divide_rn(amax, range);
  return RowScale{scale, amax > 0.0f ? divide_rn(1.0f, scale) : 0.0f, !(scale >= kSmallestNormal)};
}

// The low bytes of four words as one word, word i's in byte i (three PRMT).
__device__ __forceinline__ u32 gather_low_bytes(u32 b0, u32 b1, u32 b2, u32 b3) {
  return __byte_perm(__byte_perm(b0, b1, 0x0040), __byte_perm(b2, b3, 0x0040), 0x5410);
}

// Eight quantize_8 results as INT8, value i in byte i: one 8-byte store.
__device__ __forceinline__ void store_int8x8(u8* output, const u32 (&quantized)[8]) {
  *reinterpret_cast<uint2*>(output) =
      make_uint2(gather_low_bytes(quantized[0], quantized[1], quantized[2], quantized[3]),
                 gather_low_bytes(quantized[4], quantized[5], quantized[6], quantized[7]));
}

// Sixteen quantize_8 results (two sets of eight) as INT8, value i of set s in byte 8 s + i: one
// 16-byte store.
__device__ __forceinline__ void store_int8x16(u8* output, const u32 (&first)[8],
                                              const u32 (&second)[8]) {
  *reinterpret_cast<uint4*>(output) =
      make_uint4(gather_low_bytes(first[0], first[1], first[2], first[3]),
                 gather_low_bytes(first[4], first[5], first[6], first[7]),
                 gather_low_bytes(second[0], second[1], second[2], second[3]),
                 gather_low_bytes(second[4], second[5], second[6], second[7]));
}

// Eight quantize_8 results in [-8, 7] as two's-complement nibbles, element 2i in the low nibble
// of byte i (the s4 MMA operand order, and the paged cache's).
__device__ __forceinline__ u32 pack_int4x8(const u32 (&quantized)[8]) {
  const u32 even = gather_low_bytes(quantized[0], quantized[2], quantized[4], quantized[6]);
  const u32 odd = gather_low_bytes(quantized[1], quantized[3], quantized[5], quantized[7]);
  return (even & 0x0F0F0F0Fu) | ((odd << 4) & 0xF0F0F0F0u);
}

}  // namespace kernels
}  // namespace intfa
