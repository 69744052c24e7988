// Enumerations shared by the host runtime and the kernel templates, and the public API's numerics
// enums (include/intfa/numerics.hpp names them intfa::Variant, intfa::PEncoding, ...; the build
// installs this file as intfa/kernel_enums.h). The renderer writes these names into instantiation
// units (e.g. intfa::kernels::PEncoding::kUnsigned255), so they are part of every kernel's
// identity: renumbering one changes the cache keys of the kernels using it, and the C API's enums
// (include/intfa/intfa.h) take the same values.
//
// An include guard, not #pragma once: the library's units may reach both this file and its
// installed copy.
#ifndef INTFA_KERNEL_ENUMS_H
#define INTFA_KERNEL_ENUMS_H

#include "common/types.h"

namespace intfa {
namespace kernels {

// Floating-point element types of unquantized tensors: 16-bit inputs, outputs and half-INT8 V;
// kF32 only for the partial states that split-KV decode merges (merge_states).
enum class ElementType : int { kF16 = 0, kBF16 = 1, kF32 = 2 };

// kFullInt8: INT8 Q, K, V, both GEMMs in INT8 (the paper's Algorithm 1).
// kHalfInt8: INT8 Q, K; V and P in 16-bit floats, P.V with FP32 accumulation.
enum class AttentionVariant : int { kFullInt8 = 0, kHalfInt8 = 1 };

// How P = round(R * exp(S - reference)) is stored for the INT8 P.V product.
// kSigned127: s8 with R = 127 (the paper). kUnsigned255: u8 with R = 255 (mma u8 x s8), half the
// quantization step for the same bits, since P is never negative.
enum class PEncoding : int { kSigned127 = 0, kUnsigned255 = 1 };

// The reference the exponent is taken against when P is quantized.
// kRunningMax: the running row maximum m (Algorithm 1 line 11), so a tile whose scores sit far
// below an earlier tile's maximum is quantized onto few integer levels.
// kTileMax: the row maximum of the current tile, so every tile uses the full integer range; the
// factor exp(tile max - m) is applied in FP32 when the tile's P.V partial sum is accumulated.
enum class PScaleReference : int { kRunningMax = 0, kTileMax = 1 };

// Granularity of V's quantization scale.
enum class VScaleGranularity : int { kPerTensor = 0, kPerChannel = 1, kPerBlock = 2 };

// Granularity of K's quantization scale. kPerToken: one scale per key (Algorithm 1's S_K), which
// every score multiplies by. kPerBlock: one scale per 64 keys of a (batch, head)
// (attention_params.h, kKTokenBlock), which the softmax folds into each row's exponent
// multiplier once per block: one multiply and the scale loads fewer per score, and a coarser K
// (a block's largest key sets the step of all 64).
enum class KScaleGranularity : int { kPerToken = 0, kPerBlock = 1 };

// Whether Q's and K's rows are rotated (incoherent processing, quantize/rotation.h) before they
// are quantized. kOff: no head. kOn: every head. kAuto: the KV heads whose sampled keys have
// outlier channels (channel_mean measures their spread: quantize/quantize_params.h,
// rotates_channel_spread) and the query heads that read them; a head's Q and K always agree, so
// attention is unchanged in exact arithmetic either way.
enum class QKRotation : int { kOff = 0, kOn = 1, kAuto = 2 };

// K's per-block scales cover kKTokenBlock consecutive keys of one (batch, head): keys
// 64 b .. 64 b + 63 share scale b, and a head has k_scale_blocks(seq_kv) of them.
constexpr int kKTokenBlock = 64;
INTFA_HOST_DEVICE constexpr int k_scale_blocks(int seq_kv) {
  return (seq_kv + kKTokenBlock - 1) / kKTokenBlock;
}

}  // namespace kernels
}  // namespace intfa

#endif  // INTFA_KERNEL_ENUMS_H
