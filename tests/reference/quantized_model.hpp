// A CPU model of intfa's quantized attention: the quantize kernels' exact rounding, and the
// kernels' tile-by-tile algorithm as specified in templates/attention/README.md. A kernel checked
// against this model is checked for bugs (tight tolerance); the gap between this model and
// attention_f64 is the quantization error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "intfa/numerics.hpp"
#include "reference/reference.hpp"

namespace intfa::reference {

// The library's numerics enums (include/intfa/numerics.hpp): the model takes the options the
// kernels take.
using Variant = ::intfa::Variant;
using PEncoding = ::intfa::PEncoding;
using PScaleReference = ::intfa::PScaleReference;
using VGranularity = ::intfa::VScaleGranularity;

// Which rows a model rotates (QKRotation): none, all, or with kAuto the rows of the heads whose
// KV head's decision (`heads`, [batch][heads_kv], nonzero: rotated) is set. Rows are counted from
// the first row the quantize function is given: row r belongs to head r / rows_per_head, whose
// decision is heads[head / heads_per_decision] (GQA: query heads per KV head; 1 for K).
struct RowRotation {
  QKRotation mode = QKRotation::kOff;
  std::vector<int> heads;
  int rows_per_head = 1;
  int heads_per_decision = 1;

  RowRotation() = default;
  RowRotation(bool rotate) : mode(rotate ? QKRotation::kOn : QKRotation::kOff) {}  // NOLINT
  RowRotation(std::vector<int> decisions, int rows, int group = 1)
      : mode(QKRotation::kAuto),
        heads(std::move(decisions)),
        rows_per_head(rows),
        heads_per_decision(group) {}
  bool rotates(std::size_t row) const;
};

// Automatic rotation's decisions for `heads` blocks of `seq` rows (K: batch x heads_kv), as the
// channel-mean pass makes them (templates/quantize/quantize_params.h, rotates_channel_spread),
// in float64: over the sampled rows, less `means` (per block, [heads][head_dim]; null: as given),
// the largest channel's sum of squares against kRotationSpread^2 times their mean over
// `channels`; fewer than kRotationMinSamples sampled rows decide nothing. `spreads`, when given,
// receives each block's ratio (largest over mean square) over kRotationSpread^2: a block within
// FP32 rounding of 1 may be decided either way by the kernel.
std::vector<int> rotation_decisions(const float* x, int heads, int seq, int head_dim, int channels,
                                    const float* means, std::vector<double>* spreads = nullptr);

// Per-token quantization of rows of `head_dim` values: exactly the quantize_rows kernel.
// `channel_mean` (K smoothing), when given, is one vector of head_dim floats subtracted (in FP32)
// from every one of the `rows` rows: the kernel keeps one mean per (batch, head), so a caller
// quantizes each (batch, head) with its own call. `rotate` then applies rotate_row (incoherent
// processing) before the row is quantized.
struct QuantizedRows {
  int rows = 0;
  int head_dim = 0;
  int bits = 8;
  std::vector<std::int8_t> values;  // [rows][head_dim], one value per element (not packed)
  std::vector<float> scales;        // [rows]
  // K per 64-row block (quantize_row_blocks): [heads][k_scale_blocks(seq)], what the kernels
  // read; `scales` then holds each row's block scale. Empty: one scale per row.
  std::vector<float> block_scales;
  // A second INT8 term, for the model of a more precise Q.K that no kernel has yet: each value's
  // rounding residual in units of scale / 254, x ~= scale * (value + low / 254), [rows][head_dim].
  // Empty: one term. The scores then take 254 q.k + q_low.k + q.k_low in int32 (exact while
  // 256 * 127 * 127 * head_dim < 2^31: head_dim <= 520) divided by 254 in FP32: the integer
  // products of three INT8 MMAs, one of them rescaled in int32.
  std::vector<std::int8_t> low_terms;
};
inline constexpr int kLowTermUnits = 254;

// Per-token quantization of `rows` rows (Q, or K without smoothing): scale = max|x| / 127 (or 7),
// values round(x / scale); `low_terms` adds QuantizedRows::low_terms (8 bits only).
QuantizedRows quantize_rows(const float* x, int rows, int head_dim, int bits,
                            const float* channel_mean = nullptr, const RowRotation& rotate = {},
                            bool low_terms = false);

// K smoothing over `heads` (batch x heads) blocks of `seq` rows: block i subtracts
// channel_means[i * head_dim ...] (the means the kernel computed, checked separately).
QuantizedRows quantize_rows_smoothed(const float* x, int heads, int seq, int head_dim, int bits,
                                     const float* channel_means, const RowRotation& rotate = {},
                                     bool low_terms = false);

// K with one scale per block of 64 rows of each of `heads` (batch x heads) runs of `seq` rows, as
// quantize_row_blocks: scale = max|x| / 127 over the block's rows (after smoothing with
// channel_means[i * head_dim ...] when given, and the rotation), every row quantized with it.
QuantizedRows quantize_row_blocks(const float* x, int heads, int seq, int head_dim,
                                  const float* channel_means = nullptr,
                                  const RowRotation& rotate = {});

// The rotation of incoherent processing (templates/quantize/rotation.h), in place on one row of
// `head_dim` (a power of two) FP32 values, step for step as the kernel: the signs of D, the
// Walsh-Hadamard butterflies (a, b) -> (a + b, a - b) at strides 1, 2, 4, ..., then the FP32
// normaliser 1 / sqrt(head_dim).
void rotate_row(float* values, int head_dim);

// Per-block channel means of `heads` blocks of `seq` rows, in float64: [heads][head_dim].
std::vector<double> channel_means(const float* x, int heads, int seq, int head_dim);
// The same over the rows the channel-mean kernel samples (channel_mean_sample_row of
// templates/quantize/quantize_params.h): K smoothing's means, to FP32 summation error.
std::vector<double> sampled_channel_means(const float* x, int heads, int seq, int head_dim);

// The LSE term of K smoothing: q . mean per row of Q ([batch][heads_q][seq_q][head_dim]) with the
// mean of its KV head (`means` [batch][heads_kv][head_dim]; GQA maps query head h to KV head
// h / (heads_q / heads_kv)), in float64 of the original (unrotated) values: what quantize_rows of
// Q writes, to FP32 summation error. [batch][heads_q][seq_q].
std::vector<double> q_dot_k_means(const float* q, int batch, int heads_q, int heads_kv, int seq_q,
                                  int head_dim, const float* means);

// V of one attention problem [batch][heads_kv][seq_kv][head_dim] quantized per (batch, head)
// tensor, channel or 64-token block; values stay in logical (unpermuted) order here.
struct QuantizedV {
  VGranularity granularity = VGranularity::kPerTensor;
  int batch = 0, heads = 0, seq = 0, head_dim = 0;
  std::vector<std::int8_t> values;  // [batch][heads][seq][head_dim]
  // per tensor [b][h]; per channel [b][h][head_dim]; per block [b][h][ceil(seq/64)][head_dim]
  std::vector<float> scales;
};
QuantizedV quantize_v(const float* v, int batch, int heads, int seq, int head_dim,
                      VGranularity granularity);

struct ModelOptions {
  Variant variant = Variant::kFullInt8;
  // The model reads p_encoding and p_scale (V's and K's granularity are in the quantized inputs).
  AttentionNumerics numerics = paper_numerics();
  int block_n = 64;        // the kernel's key tile: the online softmax steps tile by tile
  bool v_is_bf16 = false;  // half INT8: P is rounded to V's type
  // K smoothed: q . mean per query row ([batch][heads_q][seq_q], q_dot_k_means or the kernel's),
  // added back to the LSE as the kernels do: lse = (m + log2(l / R) + scale_log2 * value) * ln 2,
  // the LSE of the original scores. null: the LSE of the scores of the given quantized K.
  const float* q_dot_k_mean = nullptr;
  // Optional output [batch][heads_q][seq_q]: full INT8, the share of the row's l that one unit of
  // one P carries at most (0 for half INT8). The kernel's exp2 and this model's differ in the last
  // bits, so where R * e is a rounding tie one P may round the other way: the LSE then moves by up
  // to this share (nats), the output by as much relatively. Sharp rows (few keys hold the mass)
  // have the largest shares.
  double* p_unit_share = nullptr;
};

// q: quantize_rows of Q as [batch*heads_q*seq_q] rows; k likewise with heads_kv. Full INT8 reads
// v_quantized; half INT8 reads v_half (the caller's 16-bit V values as floats, dense
// [batch][heads_kv][seq_kv][head_dim]). out [batch][heads_q][seq_q][head_dim], lse optional.
void attention_quantized_model(const Shape& shape, const QuantizedRows& q, const QuantizedRows& k,
                               const QuantizedV* v_quantized, const float* v_half,
                               const ModelOptions& options, double* out, double* lse = nullptr);

}  // namespace intfa::reference
