// Compile-time shape of one attention kernel: AttentionConfig<Spec, Numerics>, the two types of
// named constants the renderer writes into an instantiation unit (src/families/
// attention_family.cpp), and everything derived from them.
#pragma once

#include "attention/attention_params.h"
#include "common/kernel_enums.h"

namespace intfa {
namespace kernels {

// The parameters by position: named once, by AttentionConfig below.
template <int HeadDim, int BlockM, int BlockN, int Warps, int Stages, AttentionVariant Variant,
          int QkBits, ElementType VType, ElementType OutputType, bool Causal, PEncoding PEnc,
          PScaleReference PScale, VScaleGranularity VGranularity, bool Varlen,
          KScaleGranularity KGranularity>
struct AttentionConfigOf {
  static constexpr int kHeadDim = HeadDim;
  static constexpr int kBlockM = BlockM;
  static constexpr int kBlockN = BlockN;
  static constexpr int kWarps = Warps;
  static constexpr int kStages = Stages;
  static constexpr int kQkBits = QkBits;
  static constexpr bool kCausal = Causal;
  static constexpr bool kVarlen = Varlen;  // packed sequences (AttentionParams::cu_seqlens_*)
  static constexpr bool kFullInt8 = Variant == AttentionVariant::kFullInt8;
  static constexpr bool kUnsignedP = PEnc == PEncoding::kUnsigned255;
  static constexpr bool kTileMaxReference = PScale == PScaleReference::kTileMax;
  static constexpr ElementType kVType = VType;
  static constexpr ElementType kOutputType = OutputType;
  static constexpr VScaleGranularity kVGranularity = VGranularity;
  static constexpr bool kPerBlockV = kFullInt8 && VGranularity == VScaleGranularity::kPerBlock;
  static constexpr bool kPerBlockK = KGranularity == KScaleGranularity::kPerBlock;

  static constexpr int kThreads = Warps * 32;
  static constexpr int kMTiles = BlockM / (16 * Warps);  // 16-row MMA tiles per warp
  static constexpr int kQkRowBytes = HeadDim * QkBits / 8;
  static constexpr int kQkSteps = kQkRowBytes / 32;  // one MMA consumes 32 bytes of a row
  static constexpr int kScoreTiles = BlockN / 8;      // n8 tiles of a score block
  static constexpr int kOutputTiles = HeadDim / 8;    // n8 tiles of an output block
  static constexpr int kPvSteps = kFullInt8 ? BlockN / 32 : BlockN / 16;
  static constexpr int kVRows = kFullInt8 ? HeadDim : BlockN;
  static constexpr int kVRowBytes = kFullInt8 ? BlockN : HeadDim * 2;
  static constexpr float kPRange = kUnsignedP ? 255.0f : 127.0f;
  static constexpr int kVBlocksPerTile = BlockN < kVTokenBlock ? 1 : BlockN / kVTokenBlock;

  // With the running-max reference, P.V can accumulate in INT32 registers across tiles and only
  // be folded into FP32 when the reference moves; this needs room for both copies of the output
  // tile, so it is used up to 128 output columns per warp.
  static constexpr bool kPersistentPv =
      kFullInt8 && !kTileMaxReference && !kPerBlockV && HeadDim * kMTiles <= 128;
  // INT32 accumulators must fold before they can overflow: each tile adds at most
  // R * 127 * BlockN to an element.
  static constexpr int kMaxTilesPerFold =
      static_cast<int>(2147483647.0 / (static_cast<double>(kPRange) * 127.0 * BlockN));

  static constexpr int kQTileBytes = BlockM * kQkRowBytes;
  static constexpr int kKTileBytes = BlockN * kQkRowBytes;
  static constexpr int kVTileBytes = kVRows * kVRowBytes;
  static constexpr int kKScaleBytes = BlockN * 4;
  static constexpr int kVScaleBytes = kPerBlockV ? kVBlocksPerTile * HeadDim * 4 : 0;
  static constexpr int kStageBytes = kKTileBytes + kVTileBytes + kKScaleBytes + kVScaleBytes;
  static constexpr int kSharedBytes =
      attention_shared_bytes(HeadDim, BlockM, BlockN, Stages, QkBits, kFullInt8, kPerBlockV);
  static constexpr int kMinBlocksPerSm = Warps <= 4 ? 2 : 1;

  static_assert(HeadDim == 64 || HeadDim == 128 || HeadDim == 256, "head_dim 64, 128 or 256");
  static_assert(QkBits == 8 || QkBits == 4, "Q.K in 8 or 4 bits");
  static_assert(kMTiles >= 1 && kMTiles * 16 * Warps == BlockM, "block_m = 16 or 32 rows/warp");
  static_assert(BlockN % 32 == 0 && BlockN >= 32 && BlockN <= 128, "block_n in {32, 64, 96, 128}");
  static_assert(Stages >= 2 && Stages <= 4, "2 to 4 pipeline stages");
  static_assert(kQkRowBytes % 32 == 0, "rows of whole MMA k-steps");
  static_assert(kSharedBytes == kQTileBytes + Stages * kStageBytes, "layout and size agree");
  static_assert(!kPerBlockK || (!Varlen && QkBits == 8 &&
                                (BlockN % kKTokenBlock == 0 || kKTokenBlock % BlockN == 0)),
                "per-block K: dense, 8-bit, key tiles that split or fill 64-key blocks");
};

// Spec: the kernel spec's fields as `static constexpr` members (head_dim, block_m, block_n, warps,
// stages, variant, qk_bits, input_type: half INT8's V, output_type, causal, varlen); Numerics: one
// member per numerics option (include/intfa/numerics.hpp: p_encoding, p_scale, v_granularity,
// k_granularity), those the variant does not read at their first value. An option added to the
// list reaches the kernel as Config::Numerics::<its name>, with no parameter to add here.
template <class Spec, class NumericsConstants>
struct AttentionConfig
    : AttentionConfigOf<Spec::head_dim, Spec::block_m, Spec::block_n, Spec::warps, Spec::stages,
                        Spec::variant, Spec::qk_bits, Spec::input_type, Spec::output_type,
                        Spec::causal, NumericsConstants::p_encoding, NumericsConstants::p_scale,
                        NumericsConstants::v_granularity, Spec::varlen,
                        NumericsConstants::k_granularity> {
  using Numerics = NumericsConstants;
};

}  // namespace kernels
}  // namespace intfa
