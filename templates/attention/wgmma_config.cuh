// The Hopper attention kernel's configuration (attention_forward_wgmma.cuh): its template
// parameters by position (WgmmaAttentionConfigOf), everything derived from them (tiles, shared
// memory, registers, which main loop runs), and the same by name from a rendered spec
// (WgmmaAttentionConfig).
#pragma once

#include "attention/wgmma_params.h"
#include "common/kernel_enums.h"
#include "common/types.h"

namespace intfa {
namespace kernels {

// Variant: full INT8 (P in 8 bits, INT8 V in the V layout) or half INT8 (P in VType, V the
// caller's 16-bit tensor, P.V accumulated in FP32 by the wgmma into the output itself). PEnc,
// PScale and VGranularity are full INT8's (the renderer passes their first values for half
// INT8). QuantizesQ: Q arrives in QType (16 bits) and the consumers quantize it per token
// themselves (WgmmaQTile::quantize_q_tile), which saves intfa.attention the pass of
// quantize_rows over Q; DotKMean: they also write q . (K's channel mean), K smoothing's LSE term;
// RotateQ: they rotate Q's rows before quantizing them (incoherent processing, as quantize_rows
// with the same QKRotation: quantize/rotate_row.cuh; kAuto reads the KV head's flag).
// The parameters by position: named once, by WgmmaAttentionConfig below.
template <int HeadDim, int BlockN, int ConsumerGroups, int Stages, AttentionVariant Variant,
          ElementType VType, ElementType OutputType, bool Causal, PEncoding PEnc,
          PScaleReference PScale, VScaleGranularity VGranularity, KScaleGranularity KGranularity,
          bool QuantizesQ, ElementType QType, bool DotKMean, QKRotation RotateQ, bool Varlen>
struct WgmmaAttentionConfigOf {
  static constexpr int kHeadDim = HeadDim;
  static constexpr int kBlockN = BlockN;
  static constexpr int kConsumerGroups = ConsumerGroups;
  static constexpr int kBlockM = kWgmmaGroupRows * ConsumerGroups;
  static constexpr int kStages = Stages;
  static constexpr int kThreads = 128 * (ConsumerGroups + 1);
  static constexpr bool kCausal = Causal;
  // Packed sequences (AttentionParams::cu_seqlens_*): Q, K and 16-bit V are one batch of
  // total rows, each block's sequence found from the offsets (sequence_extent).
  static constexpr bool kVarlen = Varlen;
  static constexpr bool kUnsignedP = PEnc == PEncoding::kUnsigned255;
  static constexpr bool kTileMaxReference = PScale == PScaleReference::kTileMax;
  static constexpr ElementType kOutputType = OutputType;
  static constexpr bool kFullInt8 = Variant == AttentionVariant::kFullInt8;
  static constexpr VScaleGranularity kVGranularity = VGranularity;
  static constexpr bool kPerBlockV = kFullInt8 && VGranularity == VScaleGranularity::kPerBlock;
  static constexpr bool kPerBlockK = KGranularity == KScaleGranularity::kPerBlock;
  static constexpr bool kQuantizesQ = QuantizesQ;
  static constexpr ElementType kQType = QType;
  static constexpr bool kDotKMean = DotKMean;
  static constexpr QKRotation kRotateQ = RotateQ;
  static constexpr float kPRange = kUnsignedP ? 255.0f : 127.0f;

  // What the shared softmax and output code (OnlineSoftmax, store_output) reads: each warp
  // owns one 16-row m tile, Q.K in 8 bits, V in 8 bits (full INT8) or VType.
  static constexpr int kQkBits = 8;
  static constexpr ElementType kVType = VType;
  static constexpr int kMTiles = 1;
  static constexpr int kQkRowBytes = HeadDim;
  static constexpr int kQkSteps = HeadDim / 32;
  static constexpr int kScoreTiles = BlockN / 8;
  static constexpr int kOutputTiles = HeadDim / 8;
  // P.V k-steps: 32 keys of 8-bit P, or 16 keys of 16-bit P.
  static constexpr int kPvSteps = kFullInt8 ? BlockN / 32 : BlockN / 16;
  static constexpr int kVRowBytes = BlockN;
  // Half INT8's V tile: slabs of 64 channels (128-byte rows) by BlockN keys.
  static constexpr int kVSlabBytes = BlockN * 128;

  // Shared memory (wgmma_params.h): Q as slabs, then per stage K as slabs, V^T, K's scales.
  static constexpr int kSlabBytes = wgmma_slab_bytes(HeadDim);
  static constexpr int kSlabs = HeadDim / kSlabBytes;
  static constexpr int kQTileBytes = kBlockM * HeadDim;
  static constexpr int kKTileBytes = BlockN * HeadDim;
  static constexpr int kVTileBytes = HeadDim * BlockN * (kFullInt8 ? 1 : 2);
  static constexpr int kKScaleBytes = BlockN * 4;
  static constexpr int kStageBytes = wgmma_stage_bytes(HeadDim, BlockN, kFullInt8 ? 1 : 2);
  // The staged epilogue (wgmma_params.h): each consumer warp's 16 output rows, then V's scales
  // (one per channel, one per tensor, or none: per-block V folds its scales per tile).
  static constexpr bool kStagesOutput = wgmma_stages_output(HeadDim);
  static constexpr int kOutputRowBytes = HeadDim * 2;
  static constexpr int kWarpOutputBytes = 16 * kOutputRowBytes;
  static constexpr int kOutputStagingBytes = wgmma_output_staging_bytes(HeadDim, kBlockM);
  static constexpr int kEpilogueVScales = !kFullInt8                                       ? 0
                                          : VGranularity == VScaleGranularity::kPerChannel ? HeadDim
                                          : VGranularity == VScaleGranularity::kPerTensor  ? 1
                                                                                           : 0;
  // P.V runs in chunks of at most 128 output columns (one accumulator of 64 registers); full
  // INT8 with three consumer warpgroups in chunks of 64, so that one chunk folds while the other
  // runs (kPvChunksTogether: 4-10% faster at d=128 than one chunk of 128, same registers).
  // Half INT8 accumulates into the output itself: nothing to fold.
  static constexpr int kPvColumns = HeadDim < 128                        ? HeadDim
                                    : (ConsumerGroups == 3 && kFullInt8) ? 64
                                                                         : 128;
  // Per-block V: the P.V steps that share one 64-token scale block fold together.
  static constexpr int kStepsPerFold =
      kPerBlockV ? (kVTokenBlock / 32 < kPvSteps ? kVTokenBlock / 32 : kPvSteps) : kPvSteps;

  // One consumer warpgroup: two blocks share an SM, so that one's pipeline fill and drain (the
  // first tile's softmax, the last P.V, the epilogue) overlap the other's main loop.
  static constexpr int kBlocksPerSm = ConsumerGroups == 1 ? 2 : 1;
  // The register split of setmaxnreg: the producer keeps what issuing TMA needs.
  static constexpr int kProducerRegisters = ConsumerGroups == 3 ? 32 : 24;
  static constexpr int kConsumerRegisters = ConsumerGroups == 1   ? 232
                                            : ConsumerGroups == 2 ? 240
                                                                  : 160;

  // Taking turns (WgmmaFullInt8Loops::main_loop_in_turns) keeps S, P, the P.V accumulator and the
  // output in registers together; beside them the rest of the loop needs about 32 (ptxas).
  // Per-block V folds per 64-token block, one block after the other, in main_loop.
  // Half INT8's turns (main_loop_16bit_pv_in_turns) keep S, P and the FP32 output; two
  // warpgroups take them at d <= 128, where they measured faster. Three run without, as three of
  // full INT8 do, which measured faster than in turns at d=64 and d=128 from 4k tokens
  // (bench/history/2026-11-27.md, "Half INT8: three warpgroups without turns, and a lagging
  // reference"). At d=256 turns lose (bench/history/2026-11-24.md, "Half INT8 on the Hopper
  // kernel").
  static constexpr int kTurnRegisters =
      kFullInt8 ? BlockN / 2 + BlockN / 8 + HeadDim : BlockN / 2 + BlockN / 4 + HeadDim / 2;
  static constexpr bool kTakesTurns = ConsumerGroups > 1 && !kPerBlockV &&
                                      kTurnRegisters + 32 <= kConsumerRegisters &&
                                      (kFullInt8 || (ConsumerGroups == 2 && HeadDim <= 128));
  // Half INT8 with three stages or more: P.V one tile behind Q.K^T, each tile exponentiated while
  // the previous tile's P.V runs (WgmmaHalfInt8Loops::tiles_16bit_pv_behind). It holds a slot
  // longer, so with two stages the producer falls behind (slower than waiting for P.V first:
  // bench/history/2026-11-27.md, "Half INT8: P.V one tile behind Q.K^T"), which the two-stage
  // configs keep doing.
  // Full INT8 the same way (WgmmaFullInt8Loops::tiles_pv_behind), also with three stages or more
  // (with two it measured 22% slower at d=64 than waiting for P.V first, as half INT8 did),
  // without turns, where S, P, the INT32 P.V accumulators and the output fit the registers
  // together with about 16 more: d=64 with three warpgroups (144 of 160: no spills) and one
  // warpgroup at d <= 128 (208 of 232 at d=128, where ptxas parks one 64-bit value of the Q
  // pass and the epilogue in 8 bytes of local memory across the loop; nothing spills inside
  // it), not three at d=128 (208 of 160). Not per-block V, whose blocks fold apart (main_loop).
  static constexpr int kPvBehindRegisters = BlockN / 2 + BlockN / 8 + HeadDim;
  static constexpr bool kPvBehindScores =
      Stages >= 3 && (!kFullInt8 || (!kTakesTurns && !kPerBlockV &&
                                     kPvBehindRegisters + 16 <= kConsumerRegisters));
  // Full INT8 in turns at d <= 64: a tile's softmax beside this warpgroup's own P.V of the
  // previous tile, into a second P set (main_loop_in_turns): faster than without it, still
  // behind three warpgroups without turns (bench/history/2026-11-24.md, "2026-11-24: fewer
  // instructions per score", lever 4). At d=128 the second set spills (ptxas, 240 registers).
  static constexpr bool kSoftmaxBesidePv = kFullInt8 && kTakesTurns && HeadDim <= 64;
  // Without turns, a tile's two P.V chunks are in flight together where their accumulators fit
  // beside P and the output (three warpgroups at d=128: 144 registers of 160, no spills), so
  // the first chunk folds while the second runs.
  static constexpr int kPvChunks = HeadDim / kPvColumns;
  static constexpr bool kPvChunksTogether =
      kFullInt8 && kPvChunks == 2 && !kPerBlockV && HeadDim + BlockN / 8 + 16 <= kConsumerRegisters;

  static_assert(HeadDim == 64 || HeadDim == 128 || HeadDim == 256, "head_dim 64, 128 or 256");
  static_assert(BlockN == 64 || BlockN == 128, "block_n 64 or 128 (a 64- or 128-byte V row)");
  static_assert(!DotKMean || QuantizesQ, "the LSE term comes from the kernel's own Q pass");
  static_assert(!Varlen || !kPerBlockK, "packed sequences: K per token");
  static_assert(RotateQ == QKRotation::kOff || QuantizesQ, "Q is rotated in the kernel's own Q pass");
  static_assert(QType == ElementType::kF16 || QType == ElementType::kBF16, "16-bit Q");
  static_assert(ConsumerGroups >= 1 && ConsumerGroups <= 3, "1 to 3 consumer warpgroups");
  static_assert(Stages >= 2 && Stages <= 4, "2 to 4 pipeline stages");
  static_assert(kBlockM * HeadDim % 1024 == 0 && kKTileBytes % 1024 == 0, "aligned tiles");
  static_assert(128 * (kProducerRegisters + ConsumerGroups * kConsumerRegisters) * kBlocksPerSm <=
                    65536,
                "the register split fits the register file");
};

// Spec: the kernel spec's fields as `static constexpr` members (head_dim, block_n, warps: 4 per
// warpgroup, one of them the producer, stages, variant, input_type: half INT8's V and the 16-bit
// Q of a kernel that quantizes Q, output_type, causal, quantizes_q, q_dot_k_mean, rotate_q,
// varlen);
// Numerics: one member per numerics option (include/intfa/numerics.hpp); an option added to the
// list reaches the kernel as Config::Numerics::<its name>.
template <class Spec, class NumericsConstants>
struct WgmmaAttentionConfig
    : WgmmaAttentionConfigOf<Spec::head_dim, Spec::block_n, Spec::warps / 4 - 1, Spec::stages,
                             Spec::variant, Spec::input_type, Spec::output_type, Spec::causal,
                             NumericsConstants::p_encoding, NumericsConstants::p_scale,
                             NumericsConstants::v_granularity, NumericsConstants::k_granularity,
                             Spec::quantizes_q, Spec::input_type, Spec::q_dot_k_mean,
                             Spec::rotate_q, Spec::varlen> {
  using Numerics = NumericsConstants;
};

}  // namespace kernels
}  // namespace intfa
