// Packed INT8 / INT4 cache words -> pairs of FP16 tensor-core operands, and the in-register
// transpose that turns row-major V into the B operand of P.V. Every conversion is exact (integers
// of at most 8 bits are FP16 values) except the one multiply by an INT4 group scale, which rounds
// once to FP16 (the CPU model in tests/reference/paged_model.* rounds the same way).
#pragma once

#include "common/types.h"

namespace intfa {
namespace kernels {

// FP16 pair {low, high} as one register.
__device__ __forceinline__ u32 f16x2_sub(u32 a, u32 b) {
  u32 d;
  asm("sub.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

__device__ __forceinline__ u32 f16x2_mul(u32 a, u32 b) {
  u32 d;
  asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

// An FP16 value in both halves.
__device__ __forceinline__ u32 f16_broadcast(u16 bits) {
  return static_cast<u32>(bits) * 0x00010001u;
}

// Which two channels of a lane's 16-channel chunk pair j (0..7) holds. INT8 words hold channels
// 4w..4w+3 in bytes 0..3, so the pairs are consecutive channels. INT4 words hold channels
// 8w..8w+7 in nibbles 0..7 (element 2i in the low nibble of byte i), and one mask takes nibbles s
// and s + 4 into the two halves: pair j holds channels 8(j/4) + j%4 and that + 4. Q's fragments
// and the output columns follow the same map, so the dot products and stores see true channels.
template <int Bits>
__device__ __forceinline__ constexpr int pair_first_channel(int j) {
  return Bits == 8 ? 2 * j : 8 * (j / 4) + j % 4;
}
template <int Bits>
__device__ __forceinline__ constexpr int pair_second_channel(int j) {
  return pair_first_channel<Bits>(j) + (Bits == 8 ? 1 : 4);
}

// Four signed bytes -> pairs {byte 0, byte 1}, {byte 2, byte 3} as exact FP16 integers: the byte
// plus 128 becomes the low mantissa byte of 1024 + (x + 128) (0x64 above it), and one f16x2
// subtraction of 1152 leaves x.
__device__ __forceinline__ void int8x4_to_f16x2(u32 word, u32 (&pairs)[2]) {
  constexpr u32 kExponentBytes = 0x64646464u;
  constexpr u32 kBias = 0x64806480u;  // f16x2 {1152, 1152}
  const u32 biased = word ^ 0x80808080u;
  pairs[0] = f16x2_sub(__byte_perm(biased, kExponentBytes, 0x4140), kBias);
  pairs[1] = f16x2_sub(__byte_perm(biased, kExponentBytes, 0x4342), kBias);
}

__device__ __forceinline__ u32 f16x2_fma(u32 a, u32 b, u32 c) {
  u32 d;
  asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// (a & mask) ^ key in one LOP3. Written as C++, the compiler emits an AND and an XOR: a SASS
// LOP3 takes one immediate, and it did not keep the other constant in a register.
template <u32 Mask, u32 Key>
__device__ __forceinline__ u32 and_xor(u32 a) {
  u32 d;
  asm("lop3.b32 %0, %1, %2, %3, 0x6a;" : "=r"(d) : "r"(a), "n"(Mask), "n"(Key));
  return d;
}

// Eight signed nibbles -> four pairs {nibble s, nibble s + 4} (s = 0..3) as FP16 integers with a
// bias, one AND-XOR (a LOP3) per pair: the XOR flips the nibble's sign bit, giving x + 8, and sets
// 1024's exponent (the masked bits and 0x6400 do not overlap). Pairs 0 and 2 hold 1032 + x; pairs
// 1 and 3 keep their nibbles 4 bits up, 1152 + 16 x. Pairs 2 and 3 come from the word shifted by 8
// (nibbles 2, 3 and 6, 7 land where 0, 1 and 4, 5 were). Narrow INT4 blocks multiply these
// straight into Q.K and take the bias out of the scores (README.md, "INT4 keys in narrow blocks").
constexpr u32 kInt4LowNibbles = 0x000F000Fu, kInt4HighNibbles = 0x00F000F0u;
__device__ __forceinline__ void int4x8_to_biased_f16x2(u32 word, u32 (&pairs)[4]) {
  constexpr u32 kLowKey = 0x64086408u;   // 0x6400 | 0x0008 in each half
  constexpr u32 kHighKey = 0x64806480u;  // 0x6400 | 0x0080
  const u32 shifted = word >> 8;
  pairs[0] = and_xor<kInt4LowNibbles, kLowKey>(word);
  pairs[1] = and_xor<kInt4HighNibbles, kHighKey>(word);
  pairs[2] = and_xor<kInt4LowNibbles, kLowKey>(shifted);
  pairs[3] = and_xor<kInt4HighNibbles, kHighKey>(shifted);
}

// The same pairs as exact FP16 integers x, in 9 instructions: 1032 + x less 1032, and one FMA by
// 1/16 minus 72 for 1152 + 16 x.
__device__ __forceinline__ void int4x8_to_f16x2(u32 word, u32 (&pairs)[4]) {
  constexpr u32 kBias = 0x64086408u;       // f16x2 {1032, 1032}
  constexpr u32 kSixteenth = 0x2C002C00u;  // f16x2 {1/16, 1/16}
  constexpr u32 kMinus72 = 0xD480D480u;    // f16x2 {-72, -72}
  u32 biased[4];
  int4x8_to_biased_f16x2(word, biased);
  pairs[0] = f16x2_sub(biased[0], kBias);
  pairs[1] = f16x2_fma(biased[1], kSixteenth, kMinus72);
  pairs[2] = f16x2_sub(biased[2], kBias);
  pairs[3] = f16x2_fma(biased[3], kSixteenth, kMinus72);
}

// The eight pairs of one lane's 16-channel chunk (INT8: 16 bytes, INT4: 8 bytes), pair j as
// pair_first_channel<Bits> and pair_second_channel<Bits> say. INT4 pairs are multiplied by the
// chunk's FP16 group scale (in both halves of `scale2`).
template <int Bits>
__device__ __forceinline__ void chunk_to_f16x2(const u32 (&words)[Bits == 8 ? 4 : 2], u32 scale2,
                                               u32 (&pairs)[8]) {
  if constexpr (Bits == 8) {
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      u32 two[2];
      int8x4_to_f16x2(words[w], two);
      pairs[2 * w] = two[0];
      pairs[2 * w + 1] = two[1];
    }
  } else {
#pragma unroll
    for (int w = 0; w < 2; ++w) {
      u32 four[4];
      int4x8_to_f16x2(words[w], four);
#pragma unroll
      for (int s = 0; s < 4; ++s) pairs[4 * w + s] = f16x2_mul(four[s], scale2);
    }
  }
}

// Transposes the 8x8 matrix of 16-bit values that the warp holds in the m8n8 fragment layout
// (lane 4r + c: row r, columns 2c and 2c + 1); each lane gets the same positions of the
// transpose (PTX ISA, movmatrix; sm_75 and later).
__device__ __forceinline__ u32 transpose_8x8_b16(u32 value) {
  u32 transposed;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(transposed) : "r"(value));
  return transposed;
}

}  // namespace kernels
}  // namespace intfa
