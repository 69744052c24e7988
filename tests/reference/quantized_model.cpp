// The quantize kernels' rounding and the attention kernels' tile-by-tile algorithm, step by step as
// templates/attention/README.md specifies them. Floating-point steps the kernels round (the
// quantizers, y, c_i, x, e, P of half INT8) are done in FP32 here too; the rest is float64, so
// the model is the exact algorithm and the kernels differ from it only by their FP32 state and
// ex2.approx.
#include "reference/quantized_model.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <string>

#include "intfa/errors.hpp"
#include "quantize/quantize_params.h"
#include "quantize/rotation.h"
#include "reference/half.hpp"
#include "reference/parallel_heads.hpp"

namespace intfa::reference {
namespace {

// The FP32 steps must round to FP32 at every operation, not to an extended precision (x87).
static_assert(FLT_EVAL_METHOD == 0, "the model needs float arithmetic evaluated in float");

constexpr double kNegativeInfinity = -std::numeric_limits<double>::infinity();
constexpr double kLog2E = 1.4426950408889634074;
constexpr double kLn2 = 0.69314718055994530942;
constexpr int kVTokenBlock = 64;  // tokens per scale of per-block V (kVTokenBlock of the kernels)
// The Q.K^T dot products accumulate in int32 as the s32 MMA does: exact while
// 127 * 127 * head_dim < 2^31.
constexpr int kMaxHeadDim = 65536;
// With low terms (QuantizedRows::low_terms) a product sums up to 256 * 128 * 128 per channel
// (hand-made rows may hold -128): below 2^31 up to 511 channels.
constexpr int kMaxLowTermHeadDim = 511;

// One group's quantizer: scale = amax / range and its inverse, both IEEE FP32 divisions.
struct Quantizer {
  float scale;
  float inverse;
  float range;
};

// round_half_even(x * inverse) clamped to [-range, range], in FP32: std::nearbyint rounds in the
// current rounding mode, which is round-to-nearest-even unless a caller changed it.
std::int8_t quantize_value(float x, const Quantizer& quantizer) {
  const float rounded = std::nearbyint(x * quantizer.inverse);
  // A NaN product (a NaN or infinite input) gives 0, as the kernels' conversion does.
  if (std::isnan(rounded)) return 0;
  return static_cast<std::int8_t>(std::clamp(rounded, -quantizer.range, quantizer.range));
}

// Q and K rows (quantize_rows.cuh): the inverse is zero when amax is.
Quantizer row_quantizer(float amax, float range) {
  const float scale = amax / range;
  return {scale, amax > 0.0f ? 1.0f / scale : 0.0f, range};
}

// V groups (quantize_v.cuh): the inverse is zero when the scale is.
Quantizer v_quantizer(float amax) {
  const float scale = amax / 127.0f;
  return {scale, scale > 0.0f ? 1.0f / scale : 0.0f, 127.0f};
}

// ---- quantize_v -------------------------------------------------------------------------------

// Tokens [first_token, end_token) x channels [first_channel, end_channel) of one head's V.
struct VGroup {
  int first_token, end_token, first_channel, end_channel;
};

// Quantizes one group of `head_v` ([seq][head_dim]) into `head_out`; returns its scale.
float quantize_v_group(const float* head_v, int head_dim, const VGroup& group,
                       std::int8_t* head_out) {
  auto index = [head_dim](int token, int channel) {
    return static_cast<std::size_t>(token) * head_dim + channel;
  };
  float amax = 0.0f;
  for (int token = group.first_token; token < group.end_token; ++token) {
    for (int c = group.first_channel; c < group.end_channel; ++c) {
      amax = std::max(amax, std::fabs(head_v[index(token, c)]));
    }
  }
  const Quantizer quantizer = v_quantizer(amax);
  for (int token = group.first_token; token < group.end_token; ++token) {
    for (int c = group.first_channel; c < group.end_channel; ++c) {
      head_out[index(token, c)] = quantize_value(head_v[index(token, c)], quantizer);
    }
  }
  return quantizer.scale;
}

// The groups of one head in the order of QuantizedV::scales.
std::vector<VGroup> v_groups(VGranularity granularity, int seq, int head_dim) {
  std::vector<VGroup> groups;
  switch (granularity) {
    case VGranularity::kPerTensor:
      groups.push_back({0, seq, 0, head_dim});
      break;
    case VGranularity::kPerChannel:
      for (int c = 0; c < head_dim; ++c) groups.push_back({0, seq, c, c + 1});
      break;
    case VGranularity::kPerBlock:
      for (int first = 0; first < seq; first += kVTokenBlock) {
        const int end = std::min(seq, first + kVTokenBlock);  // the last block may be partial
        for (int c = 0; c < head_dim; ++c) groups.push_back({first, end, c, c + 1});
      }
      break;
  }
  return groups;
}

// ---- the attention model ----------------------------------------------------------------------

// What the row steps of one (batch, query head) read.
struct HeadInputs {
  const std::int8_t* q8;  // [seq_q][head_dim] of this query head
  const float* q_scales;  // [seq_q]
  const std::int8_t* k8;  // [seq_kv][head_dim] of its KV head
  const float* k_scales;  // [seq_kv]
  const std::int8_t* q_low;  // QuantizedRows::low_terms of q8 and k8, or null
  const std::int8_t* k_low;
  const std::int8_t* v8;  // full INT8: [seq_kv][head_dim] of its KV head
  const float* v_scales;  // full INT8: this KV head's scales (layout of QuantizedV::scales)
  const float* v_half;    // half INT8: [seq_kv][head_dim] of its KV head
  const float* q_dot_k_mean;  // K smoothed: [seq_q] of this query head (the LSE term), or null
};

// Constants of the whole problem.
struct ModelSetup {
  int head_dim;
  bool full_int8;
  double p_range;  // R: 127 (s8 P) or 255 (u8 P)
  bool tile_max_reference;
  VGranularity v_granularity;  // full INT8 only
  bool v_is_bf16;
  int block_n;
  float scale_log2;
  // K per 64-key block: x = float(dot) * max(c_i * s_block, 1e-30) (the kernels fold the block's
  // scale into the row's exponent multiplier), instead of float(float(dot) * s_k) * c_i.
  bool k_per_block;
};

// The online-softmax state of one query row (m, l and O of the README).
struct RowState {
  double running_max = kNegativeInfinity;
  double row_sum = 0;
  // Full INT8: the largest weight in row_sum's frame of one unit of one tile's P (beta of that
  // tile times the alphas since). A P the kernel rounds the other way, because its exp2 differs
  // from this model's in the last bits where R * e is a tie, moves l by that much.
  double p_unit_weight = 0;
  std::vector<double> output;
};

// Per-worker scratch buffers, reused across rows and tiles.
struct TileScratch {
  std::vector<float> log2_scores;  // x[j] of the tile
  std::vector<double> p;           // P[j] of the tile
  std::vector<double> tile_pv;     // sum_j P[j] v[j][c] of the tile (with per-block scales)
  std::vector<double> block_pv;    // the same over one 64-token V block
};

std::int32_t integer_dot(const std::int8_t* a, const std::int8_t* b, int count) {
  std::int32_t sum = 0;
  for (int c = 0; c < count; ++c) sum += static_cast<std::int32_t>(a[c]) * b[c];
  return sum;
}

// x[j] = float(float(dot) * sk[j]) * c_i for keys [first, end), FP32 as the kernel (README
// "Scores"; per-block K: ModelSetup::k_per_block); returns the tile maximum.
double compute_log2_scores(const ModelSetup& setup, const HeadInputs& head,
                           const std::int8_t* q_row, const std::int8_t* q_low, float c_i, int first,
                           int end, TileScratch& scratch) {
  double tile_max = kNegativeInfinity;
  for (int j = first; j < end; ++j) {
    const std::size_t k_offset = static_cast<std::size_t>(j) * setup.head_dim;
    const std::int8_t* k_row = head.k8 + k_offset;
    const std::int32_t high = integer_dot(q_row, k_row, setup.head_dim);
    float dot = static_cast<float>(high);
    if (q_low != nullptr || head.k_low != nullptr) {
      // Two terms: 254 q.k plus the low terms' products, exact in int32, then one rounding.
      std::int32_t sum = kLowTermUnits * high;
      if (q_low != nullptr) sum += integer_dot(q_low, k_row, setup.head_dim);
      if (head.k_low != nullptr) sum += integer_dot(q_row, head.k_low + k_offset, setup.head_dim);
      dot = static_cast<float>(sum) / static_cast<float>(kLowTermUnits);
    }
    const float x = setup.k_per_block ? dot * std::max(c_i * head.k_scales[j], 1e-30f)
                                      : (dot * head.k_scales[j]) * c_i;
    scratch.log2_scores[static_cast<std::size_t>(j - first)] = x;
    tile_max = std::max(tile_max, static_cast<double>(x));
  }
  return tile_max;
}

// tile_pv[c] = sum_j P[j] * v8[j][c] over keys [first, end). The integer sums are exact in
// double; with per-block V each 64-token block's sum is first multiplied by its sv[blk][c].
void accumulate_full_int8_pv(const ModelSetup& setup, const HeadInputs& head, int first, int end,
                             TileScratch& scratch) {
  const bool per_block = setup.v_granularity == VGranularity::kPerBlock;
  const std::size_t head_dim = static_cast<std::size_t>(setup.head_dim);
  std::fill(scratch.tile_pv.begin(), scratch.tile_pv.end(), 0.0);
  for (int segment = first; segment < end;) {
    const int block = segment / kVTokenBlock;
    const int segment_end = per_block ? std::min(end, (block + 1) * kVTokenBlock) : end;
    std::fill(scratch.block_pv.begin(), scratch.block_pv.end(), 0.0);
    for (int j = segment; j < segment_end; ++j) {
      const double p = scratch.p[static_cast<std::size_t>(j - first)];
      const std::int8_t* v_row = head.v8 + static_cast<std::size_t>(j) * head_dim;
      for (std::size_t c = 0; c < head_dim; ++c) scratch.block_pv[c] += p * v_row[c];
    }
    const float* block_scales = per_block ? head.v_scales + block * head_dim : nullptr;
    for (std::size_t c = 0; c < head_dim; ++c) {
      scratch.tile_pv[c] += per_block ? block_scales[c] * scratch.block_pv[c] : scratch.block_pv[c];
    }
    segment = segment_end;
  }
}

// Full INT8 update of one tile (README "Full INT8").
void full_int8_tile(const ModelSetup& setup, const HeadInputs& head, int first, int end,
                    double tile_max, double new_max, double alpha, TileScratch& scratch,
                    RowState& row) {
  // Running max: every tile is quantized against the row's maximum so far (Algorithm 1 line 11);
  // tile max: against its own maximum, then rescaled by beta.
  const double reference = setup.tile_max_reference ? tile_max : new_max;
  const double beta = std::exp2(reference - new_max);
  double integer_row_sum = 0;
  for (int j = first; j < end; ++j) {
    const std::size_t t = static_cast<std::size_t>(j - first);
    // e = 2^(x - ref) rounded to FP16 first, then R * e rounded half to even (the kernel's
    // cvt.rn.f16x2.f32 and f16x2 FMA of R * e + 1024; README "Full INT8").
    const float e = static_cast<float>(std::exp2(scratch.log2_scores[t] - reference));
    scratch.p[t] = std::nearbyint(setup.p_range * static_cast<double>(round_to_16bit(e, false)));
    integer_row_sum += scratch.p[t];
  }
  accumulate_full_int8_pv(setup, head, first, end, scratch);
  row.row_sum = row.row_sum * alpha + beta * integer_row_sum;
  row.p_unit_weight = std::max(row.p_unit_weight * alpha, beta);
  for (std::size_t c = 0; c < row.output.size(); ++c) {
    row.output[c] = row.output[c] * alpha + beta * scratch.tile_pv[c];
  }
}

// Half INT8 update of one tile (README "Half INT8"): e in FP32, P = e rounded to V's type, and
// l sums the unrounded e.
void half_int8_tile(const ModelSetup& setup, const HeadInputs& head, int first, int end,
                    double new_max, double alpha, TileScratch& scratch, RowState& row) {
  const std::size_t head_dim = static_cast<std::size_t>(setup.head_dim);
  double e_sum = 0;
  std::fill(scratch.tile_pv.begin(), scratch.tile_pv.end(), 0.0);
  for (int j = first; j < end; ++j) {
    const std::size_t t = static_cast<std::size_t>(j - first);
    const float e = static_cast<float>(std::exp2(scratch.log2_scores[t] - new_max));
    e_sum += e;
    const double p = round_to_16bit(e, setup.v_is_bf16);
    const float* v_row = head.v_half + static_cast<std::size_t>(j) * head_dim;
    for (std::size_t c = 0; c < head_dim; ++c) scratch.tile_pv[c] += p * v_row[c];
  }
  row.row_sum = row.row_sum * alpha + e_sum;
  for (std::size_t c = 0; c < head_dim; ++c) {
    row.output[c] = row.output[c] * alpha + scratch.tile_pv[c];
  }
}

// out = O / l, times V's per-tensor or per-channel scale; lse in natural log, plus K smoothing's
// term scale_log2 * q . mean in the log2 domain when `lse_term` is given (README "K smoothing").
void finish_row(const ModelSetup& setup, const HeadInputs& head, const RowState& row, int keys,
                const float* lse_term, double* out_row, double* lse, double* p_unit_share) {
  if (p_unit_share != nullptr) {
    *p_unit_share = setup.full_int8 && row.row_sum > 0 ? row.p_unit_weight / row.row_sum : 0.0;
  }
  if (keys == 0) {
    std::fill(out_row, out_row + setup.head_dim, 0.0);
    if (lse != nullptr) *lse = kNegativeInfinity;
    return;
  }
  for (int c = 0; c < setup.head_dim; ++c) {
    double v_scale = 1.0;
    if (setup.full_int8 && setup.v_granularity == VGranularity::kPerTensor) {
      v_scale = head.v_scales[0];
    } else if (setup.full_int8 && setup.v_granularity == VGranularity::kPerChannel) {
      v_scale = head.v_scales[c];
    }
    out_row[c] = row.output[static_cast<std::size_t>(c)] / row.row_sum * v_scale;
  }
  if (lse != nullptr) {
    // The full INT8 l counts P in units of R (P = R for the maximum).
    const double sum = setup.full_int8 ? row.row_sum / setup.p_range : row.row_sum;
    const double smoothing_term =
        lse_term != nullptr ? static_cast<double>(setup.scale_log2) * *lse_term : 0.0;
    *lse = (row.running_max + std::log2(sum) + smoothing_term) * kLn2;
  }
}

// Half INT8's exponent reference after a tile (README "Half INT8", the kernels'
// half_int8_reference): kept while the tile's maximum passes it by at most 8, compared in FP32
// as the kernels do (both are FP32 values).
double half_int8_reference(double reference, double tile_max) {
  constexpr float kSlack = 8.0f;  // the kernels' kHalfReferenceSlack (online_softmax.cuh)
  const auto kept = static_cast<float>(reference);
  const float maximum = std::max(kept, static_cast<float>(tile_max));
  return maximum - kept <= kSlack ? kept : maximum;
}

// One query row, tile by tile (README "Online softmax over tiles").
void model_row(const ModelSetup& setup, const HeadInputs& head, int query_row, int keys,
               TileScratch& scratch, RowState& row, double* out_row, double* lse,
               double* p_unit_share) {
  const std::size_t q_offset = static_cast<std::size_t>(query_row) * setup.head_dim;
  const std::int8_t* q_row = head.q8 + q_offset;
  const std::int8_t* q_low = head.q_low != nullptr ? head.q_low + q_offset : nullptr;
  // The kernel keeps c_i >= 1e-30 so that a masked score (-inf) times c_i never makes a NaN; it
  // only changes rows whose Q scale is below 1e-30 / scale_log2.
  const float c_i = std::max(head.q_scales[query_row] * setup.scale_log2, 1e-30f);
  row.running_max = kNegativeInfinity;
  row.row_sum = 0;
  row.p_unit_weight = 0;
  std::fill(row.output.begin(), row.output.end(), 0.0);
  // Tiles past the last allowed key have nothing for this row: they leave it untouched.
  for (int first = 0; first < keys; first += setup.block_n) {
    const int end = std::min(keys, first + setup.block_n);
    const double tile_max =
        compute_log2_scores(setup, head, q_row, q_low, c_i, first, end, scratch);
    // Half INT8's running_max is its reference, within 2^8 of the maximum.
    const double new_max = setup.full_int8 ? std::max(row.running_max, tile_max)
                                           : half_int8_reference(row.running_max, tile_max);
    const double alpha =
        row.running_max == kNegativeInfinity ? 0.0 : std::exp2(row.running_max - new_max);
    if (setup.full_int8) {
      full_int8_tile(setup, head, first, end, tile_max, new_max, alpha, scratch, row);
    } else {
      half_int8_tile(setup, head, first, end, new_max, alpha, scratch, row);
    }
    row.running_max = new_max;
  }
  finish_row(setup, head, row, keys,
             head.q_dot_k_mean != nullptr ? head.q_dot_k_mean + query_row : nullptr, out_row, lse,
             p_unit_share);
}

// ---- argument checks --------------------------------------------------------------------------

void check_rows(const char* name, const QuantizedRows& rows, std::size_t expected_rows,
                int head_dim) {
  const std::string field = std::string(name);
  if (rows.head_dim != head_dim) {
    throw InvalidArgument(field + ".head_dim", std::to_string(rows.head_dim),
                          "expected the shape's head_dim " + std::to_string(head_dim));
  }
  if (static_cast<std::size_t>(rows.rows) != expected_rows ||
      rows.values.size() != expected_rows * static_cast<std::size_t>(head_dim) ||
      rows.scales.size() != expected_rows) {
    throw InvalidArgument(field + ".rows", std::to_string(rows.rows),
                          "expected " + std::to_string(expected_rows) +
                              " rows (batch * heads * seq) with their values and scales");
  }
  if (!rows.low_terms.empty() && rows.low_terms.size() != rows.values.size()) {
    throw InvalidArgument(
        field + ".low_terms", std::to_string(rows.low_terms.size()),
        "expected none or one per value (" + std::to_string(rows.values.size()) + ")");
  }
}

std::size_t v_scale_count(VGranularity granularity, int seq, int head_dim) {
  switch (granularity) {
    case VGranularity::kPerTensor:
      return 1;
    case VGranularity::kPerChannel:
      return static_cast<std::size_t>(head_dim);
    case VGranularity::kPerBlock:
      return static_cast<std::size_t>((seq + kVTokenBlock - 1) / kVTokenBlock) * head_dim;
  }
  return 0;
}

void check_model_arguments(const Shape& shape, const QuantizedRows& q, const QuantizedRows& k,
                           const QuantizedV* v_quantized, const float* v_half,
                           const ModelOptions& options) {
  shape.validate();
  if (!k.block_scales.empty()) {
    // Per-block K: the model scores with each row's scale, which must be its block's.
    const int blocks = (shape.seq_kv + 63) / 64;
    const std::size_t heads = static_cast<std::size_t>(shape.batch) * shape.heads_kv;
    if (k.block_scales.size() != heads * blocks ||
        k.scales.size() != heads * static_cast<std::size_t>(shape.seq_kv)) {
      throw InvalidArgument("k.block_scales", std::to_string(k.block_scales.size()),
                            "expected " + std::to_string(heads * blocks) +
                                " (batch * heads_kv * ceil(seq_kv / 64)) beside one scale per row");
    }
    for (std::size_t row = 0; row < k.scales.size(); ++row) {
      const std::size_t head = row / shape.seq_kv, key = row % shape.seq_kv;
      if (k.scales[row] != k.block_scales[head * blocks + key / 64]) {
        throw InvalidArgument("k.scales", std::to_string(row),
                              "a row's scale differs from its 64-key block's (k.block_scales)");
      }
    }
  }
  if (shape.head_dim > kMaxHeadDim) {
    throw InvalidArgument("shape.head_dim", std::to_string(shape.head_dim),
                          "expected <= " + std::to_string(kMaxHeadDim) + " (int32 dot products)");
  }
  const bool low_terms = !q.low_terms.empty() || !k.low_terms.empty();
  if (low_terms && shape.head_dim > kMaxLowTermHeadDim) {
    throw InvalidArgument("shape.head_dim", std::to_string(shape.head_dim),
                          "expected <= " + std::to_string(kMaxLowTermHeadDim) +
                              " with low terms (int32 sums of 256 * 128 * 128 per channel)");
  }
  if (!k.low_terms.empty() && !k.block_scales.empty()) {
    throw InvalidArgument("k.low_terms", std::to_string(k.low_terms.size()),
                          "expected none with per-block K scales (the low terms are per token)");
  }
  if (options.block_n <= 0) {
    throw InvalidArgument("options.block_n", std::to_string(options.block_n), "expected > 0");
  }
  check_rows("q", q, static_cast<std::size_t>(shape.batch) * shape.heads_q * shape.seq_q,
             shape.head_dim);
  check_rows("k", k, static_cast<std::size_t>(shape.batch) * shape.heads_kv * shape.seq_kv,
             shape.head_dim);
  if (options.variant == Variant::kHalfInt8) {
    if (v_half == nullptr) throw InvalidArgument("v_half", "null", "half INT8 reads V from it");
    return;
  }
  if (v_quantized == nullptr) {
    throw InvalidArgument("v_quantized", "null", "full INT8 reads the INT8 V from it");
  }
  const QuantizedV& v = *v_quantized;
  const std::size_t heads = static_cast<std::size_t>(shape.batch) * shape.heads_kv;
  if (v.batch != shape.batch || v.heads != shape.heads_kv || v.seq != shape.seq_kv ||
      v.head_dim != shape.head_dim || v.values.size() != shape.kv_elements() ||
      v.scales.size() != heads * v_scale_count(v.granularity, v.seq, v.head_dim)) {
    throw InvalidArgument("v_quantized",
                          "[" + std::to_string(v.batch) + "][" + std::to_string(v.heads) + "][" +
                              std::to_string(v.seq) + "][" + std::to_string(v.head_dim) + "]",
                          "expected quantize_v of the shape's [batch][heads_kv][seq_kv][head_dim]");
  }
}

}  // namespace

void rotate_row(float* values, int head_dim) {
  if (head_dim <= 0 || (head_dim & (head_dim - 1)) != 0) {
    throw InvalidArgument("head_dim", std::to_string(head_dim),
                          "expected a power of two (the Walsh-Hadamard transform)");
  }
  for (int c = 0; c < head_dim; ++c) {
    if (kernels::rotation_negates(c)) values[c] = -values[c];
  }
  // Stride s pairs channel i (bit s clear) with i + s: the kernel's first three strides stay in
  // a thread's 8 values, the others cross lanes, each with the same two FP32 operations.
  for (int stride = 1; stride < head_dim; stride *= 2) {
    for (int i = 0; i < head_dim; ++i) {
      if ((i & stride) != 0) continue;
      const float low = values[i];
      const float high = values[i + stride];
      values[i] = low + high;
      values[i + stride] = low - high;
    }
  }
  const float normaliser = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
  for (int c = 0; c < head_dim; ++c) values[c] *= normaliser;
}

bool RowRotation::rotates(std::size_t row) const {
  if (mode != QKRotation::kAuto) return mode == QKRotation::kOn;
  const std::size_t head = row / static_cast<std::size_t>(rows_per_head);
  return heads.at(head / static_cast<std::size_t>(heads_per_decision)) != 0;
}

std::vector<int> rotation_decisions(const float* x, int heads, int seq, int head_dim, int channels,
                                    const float* means, std::vector<double>* spreads) {
  const int count = kernels::channel_mean_sample_count(seq);
  const double threshold = static_cast<double>(kernels::kRotationSpread) * kernels::kRotationSpread;
  std::vector<int> decisions(static_cast<std::size_t>(heads));
  if (spreads != nullptr) spreads->assign(static_cast<std::size_t>(heads), 0.0);
  std::vector<double> squares(static_cast<std::size_t>(head_dim));
  for (std::size_t i = 0; i < static_cast<std::size_t>(heads); ++i) {
    std::fill(squares.begin(), squares.end(), 0.0);
    for (int sample = 0; sample < count; ++sample) {
      const std::size_t n =
          static_cast<std::size_t>(kernels::channel_mean_sample_row(sample, count, seq));
      for (std::size_t d = 0; d < squares.size(); ++d) {
        const double centre = means != nullptr ? means[i * head_dim + d] : 0.0;
        const double value = x[(i * seq + n) * head_dim + d] - centre;
        squares[d] += value * value;
      }
    }
    const double largest = *std::max_element(squares.begin(), squares.end());
    double total = 0.0;
    for (const double square : squares) total += square;
    const double ratio = total > 0.0 ? largest * channels / total / threshold : 0.0;
    decisions[i] = count >= kernels::kRotationMinSamples && ratio > 1.0 ? 1 : 0;
    if (spreads != nullptr) (*spreads)[i] = ratio;
  }
  return decisions;
}

QuantizedRows quantize_rows(const float* x, int rows, int head_dim, int bits,
                            const float* channel_mean, const RowRotation& rotate, bool low_terms) {
  if (bits != 8 && bits != 4) {
    throw InvalidArgument("bits", std::to_string(bits), "expected 8 or 4");
  }
  if (low_terms && bits != 8) {
    throw InvalidArgument("bits", std::to_string(bits), "expected 8 with low terms");
  }
  if (rows < 0 || head_dim <= 0) {
    throw InvalidArgument("rows x head_dim",
                          std::to_string(rows) + " x " + std::to_string(head_dim),
                          "expected rows >= 0 and head_dim > 0");
  }
  QuantizedRows result;
  result.rows = rows;
  result.head_dim = head_dim;
  result.bits = bits;
  result.values.resize(static_cast<std::size_t>(rows) * head_dim);
  result.scales.resize(static_cast<std::size_t>(rows));
  if (low_terms) result.low_terms.resize(result.values.size());
  const float range = bits == 8 ? 127.0f : 7.0f;
  std::vector<float> transformed(static_cast<std::size_t>(head_dim));
  for (std::size_t row = 0; row < static_cast<std::size_t>(rows); ++row) {
    const float* input = x + row * head_dim;
    for (std::size_t c = 0; c < transformed.size(); ++c) {
      // Smoothing subtracts the channel mean in FP32 before anything else, as the kernel does.
      transformed[c] = channel_mean != nullptr ? input[c] - channel_mean[c] : input[c];
    }
    if (rotate.rotates(row)) rotate_row(transformed.data(), head_dim);
    float amax = 0.0f;
    for (const float value : transformed) amax = std::max(amax, std::fabs(value));
    const Quantizer quantizer = row_quantizer(amax, range);
    result.scales[row] = quantizer.scale;
    std::int8_t* output = result.values.data() + row * head_dim;
    for (std::size_t c = 0; c < transformed.size(); ++c)
      output[c] = quantize_value(transformed[c], quantizer);
    if (!low_terms) continue;
    // The residual x / scale - value lies in [-0.5, 0.5]: 254 units of it fit INT8's +-127.
    std::int8_t* low = result.low_terms.data() + row * head_dim;
    for (std::size_t c = 0; c < transformed.size(); ++c) {
      const float residual = transformed[c] * quantizer.inverse - static_cast<float>(output[c]);
      low[c] = static_cast<std::int8_t>(
          std::clamp(std::nearbyint(residual * kLowTermUnits), -127.0f, 127.0f));
    }
  }
  return result;
}

QuantizedRows quantize_row_blocks(const float* x, int heads, int seq, int head_dim,
                                  const float* channel_means, const RowRotation& rotate) {
  constexpr int kBlockRows = 64;  // kKTokenBlock (templates/attention/attention_params.h)
  QuantizedRows result;
  result.rows = heads * seq;
  result.head_dim = head_dim;
  result.bits = 8;
  result.values.resize(static_cast<std::size_t>(result.rows) * head_dim);
  result.scales.resize(static_cast<std::size_t>(result.rows));
  std::vector<float> block(static_cast<std::size_t>(kBlockRows) * head_dim);
  for (int head = 0; head < heads; ++head) {
    const float* mean = channel_means != nullptr ? channel_means + head * head_dim : nullptr;
    for (int first = 0; first < seq; first += kBlockRows) {
      const int rows = std::min(kBlockRows, seq - first);
      float amax = 0.0f;
      for (int r = 0; r < rows; ++r) {
        const float* input = x + (static_cast<std::size_t>(head) * seq + first + r) * head_dim;
        float* transformed = block.data() + static_cast<std::size_t>(r) * head_dim;
        for (int c = 0; c < head_dim; ++c) {
          transformed[c] = mean != nullptr ? input[c] - mean[c] : input[c];
        }
        if (rotate.rotates(static_cast<std::size_t>(head) * seq + first + r)) {
          rotate_row(transformed, head_dim);
        }
        for (int c = 0; c < head_dim; ++c) amax = std::max(amax, std::fabs(transformed[c]));
      }
      const Quantizer quantizer = row_quantizer(amax, 127.0f);
      result.block_scales.push_back(quantizer.scale);
      for (int r = 0; r < rows; ++r) {
        const std::size_t row = static_cast<std::size_t>(head) * seq + first + r;
        result.scales[row] = quantizer.scale;
        for (int c = 0; c < head_dim; ++c) {
          result.values[row * head_dim + c] =
              quantize_value(block[static_cast<std::size_t>(r) * head_dim + c], quantizer);
        }
      }
    }
  }
  return result;
}

QuantizedRows quantize_rows_smoothed(const float* x, int heads, int seq, int head_dim, int bits,
                                     const float* channel_means, const RowRotation& rotate,
                                     bool low_terms) {
  QuantizedRows result;
  result.rows = heads * seq;
  result.head_dim = head_dim;
  result.bits = bits;
  const std::size_t block = static_cast<std::size_t>(seq) * head_dim;
  for (std::size_t i = 0; i < static_cast<std::size_t>(heads); ++i) {
    const QuantizedRows part =
        quantize_rows(x + i * block, seq, head_dim, bits, channel_means + i * head_dim,
                      RowRotation(rotate.rotates(i * static_cast<std::size_t>(seq))), low_terms);
    result.values.insert(result.values.end(), part.values.begin(), part.values.end());
    result.scales.insert(result.scales.end(), part.scales.begin(), part.scales.end());
    result.low_terms.insert(result.low_terms.end(), part.low_terms.begin(), part.low_terms.end());
  }
  return result;
}

std::vector<double> channel_means(const float* x, int heads, int seq, int head_dim) {
  std::vector<double> means(static_cast<std::size_t>(heads) * head_dim, 0.0);
  for (std::size_t i = 0; i < static_cast<std::size_t>(heads); ++i)
    for (std::size_t n = 0; n < static_cast<std::size_t>(seq); ++n)
      for (std::size_t d = 0; d < static_cast<std::size_t>(head_dim); ++d)
        means[i * head_dim + d] += x[(i * seq + n) * head_dim + d];
  for (double& mean : means) mean /= seq;
  return means;
}

std::vector<double> sampled_channel_means(const float* x, int heads, int seq, int head_dim) {
  const int count = kernels::channel_mean_sample_count(seq);
  std::vector<double> means(static_cast<std::size_t>(heads) * head_dim, 0.0);
  for (std::size_t i = 0; i < static_cast<std::size_t>(heads); ++i) {
    for (int sample = 0; sample < count; ++sample) {
      const std::size_t n =
          static_cast<std::size_t>(kernels::channel_mean_sample_row(sample, count, seq));
      for (std::size_t d = 0; d < static_cast<std::size_t>(head_dim); ++d) {
        means[i * head_dim + d] += x[(i * seq + n) * head_dim + d];
      }
    }
  }
  for (double& mean : means) mean /= count;
  return means;
}

std::vector<double> q_dot_k_means(const float* q, int batch, int heads_q, int heads_kv, int seq_q,
                                  int head_dim, const float* means) {
  if (heads_kv <= 0 || heads_q % heads_kv != 0) {
    throw InvalidArgument("heads_kv", std::to_string(heads_kv),
                          "expected a divisor of heads_q " + std::to_string(heads_q));
  }
  std::vector<double> dots(static_cast<std::size_t>(batch) * heads_q * seq_q);
  const std::size_t dim = static_cast<std::size_t>(head_dim);
  for (std::size_t b = 0; b < static_cast<std::size_t>(batch); ++b) {
    for (std::size_t h = 0; h < static_cast<std::size_t>(heads_q); ++h) {
      const float* mean = means + (b * heads_kv + h / (heads_q / heads_kv)) * dim;
      for (std::size_t n = 0; n < static_cast<std::size_t>(seq_q); ++n) {
        const std::size_t row = (b * heads_q + h) * seq_q + n;
        double dot = 0;
        for (std::size_t d = 0; d < dim; ++d)
          dot += static_cast<double>(q[row * dim + d]) * mean[d];
        dots[row] = dot;
      }
    }
  }
  return dots;
}

QuantizedV quantize_v(const float* v, int batch, int heads, int seq, int head_dim,
                      VGranularity granularity) {
  QuantizedV result;
  result.granularity = granularity;
  result.batch = batch;
  result.heads = heads;
  result.seq = seq;
  result.head_dim = head_dim;
  const std::size_t head_elements = static_cast<std::size_t>(seq) * head_dim;
  result.values.resize(static_cast<std::size_t>(batch) * heads * head_elements);
  const std::vector<VGroup> groups = v_groups(granularity, seq, head_dim);
  result.scales.reserve(static_cast<std::size_t>(batch) * heads * groups.size());
  for (std::size_t head = 0; head < static_cast<std::size_t>(batch) * heads; ++head) {
    for (const VGroup& group : groups) {
      result.scales.push_back(quantize_v_group(v + head * head_elements, head_dim, group,
                                               result.values.data() + head * head_elements));
    }
  }
  return result;
}

void attention_quantized_model(const Shape& shape, const QuantizedRows& q, const QuantizedRows& k,
                               const QuantizedV* v_quantized, const float* v_half,
                               const ModelOptions& options, double* out, double* lse) {
  check_model_arguments(shape, q, k, v_quantized, v_half, options);
  const bool full_int8 = options.variant == Variant::kFullInt8;
  ModelSetup setup;
  setup.head_dim = shape.head_dim;
  setup.full_int8 = full_int8;
  setup.p_range = options.numerics.p_encoding == PEncoding::kUnsigned255 ? 255.0 : 127.0;
  setup.tile_max_reference = options.numerics.p_scale == PScaleReference::kTileMax;
  setup.v_granularity = full_int8 ? v_quantized->granularity : VGranularity::kPerTensor;
  setup.v_is_bf16 = options.v_is_bf16;
  setup.block_n = options.block_n;
  setup.k_per_block = !k.block_scales.empty();
  // The host computes softmax_scale * log2(e) in double and passes it as FP32 (README "Inputs").
  setup.scale_log2 = static_cast<float>(shape.effective_scale() * kLog2E);

  const std::size_t head_dim = static_cast<std::size_t>(shape.head_dim);
  const std::size_t v_scales_per_head =
      full_int8 ? v_scale_count(setup.v_granularity, shape.seq_kv, shape.head_dim) : 0;
  for_each_row_block_in_parallel(
      shape.batch, shape.heads_q, shape.seq_q, [&](int b, int h, int first_row, int end_row) {
        const std::size_t q_head = (static_cast<std::size_t>(b) * shape.heads_q + h) * shape.seq_q;
        const std::size_t kv_head_index =
            static_cast<std::size_t>(b) * shape.heads_kv + shape.kv_head(h);
        const std::size_t kv_head = kv_head_index * shape.seq_kv;
        HeadInputs head{};
        head.q8 = q.values.data() + q_head * head_dim;
        head.q_scales = q.scales.data() + q_head;
        head.k8 = k.values.data() + kv_head * head_dim;
        head.k_scales = k.scales.data() + kv_head;
        head.q_low = q.low_terms.empty() ? nullptr : q.low_terms.data() + q_head * head_dim;
        head.k_low = k.low_terms.empty() ? nullptr : k.low_terms.data() + kv_head * head_dim;
        if (full_int8) {
          head.v8 = v_quantized->values.data() + kv_head * head_dim;
          head.v_scales = v_quantized->scales.data() + kv_head_index * v_scales_per_head;
        } else {
          head.v_half = v_half + kv_head * head_dim;
        }
        head.q_dot_k_mean =
            options.q_dot_k_mean != nullptr ? options.q_dot_k_mean + q_head : nullptr;
        const std::size_t tile = static_cast<std::size_t>(std::min(options.block_n, shape.seq_kv));
        TileScratch scratch{std::vector<float>(tile), std::vector<double>(tile),
                            std::vector<double>(head_dim), std::vector<double>(head_dim)};
        RowState row;
        row.output.resize(head_dim);
        for (int i = first_row; i < end_row; ++i) {
          const std::size_t row_index = q_head + static_cast<std::size_t>(i);
          model_row(setup, head, i, shape.allowed_keys(i), scratch, row, out + row_index * head_dim,
                    lse != nullptr ? lse + row_index : nullptr,
                    options.p_unit_share != nullptr ? options.p_unit_share + row_index : nullptr);
        }
      });
}

}  // namespace intfa::reference
