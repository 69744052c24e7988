// Incoherent processing of Q and K (FlashAttention-3's trick for FP8, QuaRot's for INT4): both are
// multiplied along the head dim by one orthogonal matrix R = D H / sqrt(d) before per-token
// quantization, with H the Walsh-Hadamard matrix (entries +-1) and D a fixed diagonal of
// pseudo-random signs. (q R)(k R)^T = q R R^T k^T = q k^T, so the scores are unchanged in exact
// arithmetic, while a channel that is an order of magnitude larger than the others is spread over
// all d channels of the rotated row: per-token INT8 then spends its range on the row's norm, not
// on its largest channel. D makes the spreading hold for every input: H alone maps the all-ones
// vector (a channel offset shared by all channels) onto one channel.
//
// Shared by the quantize kernel (quantize_rows.cuh) and the CPU model
// (tests/reference/quantized_model.cpp), which must agree on every sign and every rounding.
#pragma once

#include "common/types.h"

namespace intfa {
namespace kernels {

// Signs of channels [32 word, 32 word + 32): bit i set negates channel 32 word + i. A fixed
// integer hash of the word index (MurmurHash3's 32-bit finaliser, of word * golden ratio) gives
// well-mixed signs with no table in memory; kernels evaluate it once per thread.
INTFA_HOST_DEVICE constexpr u32 rotation_sign_bits(int word) {
  u32 x = static_cast<u32>(word) * 0x9E3779B9u + 0x7F4A7C15u;
  x ^= x >> 16;
  x *= 0x85EBCA6Bu;
  x ^= x >> 13;
  x *= 0xC2B2AE35u;
  x ^= x >> 16;
  return x;
}

INTFA_HOST_DEVICE constexpr bool rotation_negates(int channel) {
  return ((rotation_sign_bits(channel / 32) >> (channel % 32)) & 1u) != 0;
}

// 1 / sqrt(head_dim) rounded to FP32, applied after the butterflies: exact for 64 and 256; for 128
// the one rounding (relative 2^-25) shifts every score by at most 2^-24 relative, far below INT8.
INTFA_HOST_DEVICE constexpr float rotation_normaliser(int head_dim) {
  return head_dim == 64 ? 0.125f : head_dim == 128 ? 0.0883883476483184405f : 0.0625f;
}

}  // namespace kernels
}  // namespace intfa
