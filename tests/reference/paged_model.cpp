// The paged cache's quantizers, packing and byte layout, step by step as
// templates/decode/README.md specifies them. FP32 steps are done in FP32 (the kernels' rounding).
#include "reference/paged_model.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <string>

#include "intfa/errors.hpp"
#include "reference/half.hpp"

namespace intfa::reference {
namespace {

static_assert(FLT_EVAL_METHOD == 0, "the model needs float arithmetic evaluated in float");

constexpr double kLog2E = 1.4426950408889634074;

std::int8_t quantize_value(float x, float inverse, float range) {
  const float rounded = std::nearbyint(x * inverse);
  // A NaN product (a NaN or infinite input) gives 0, as the kernels' conversion does.
  if (std::isnan(rounded)) return 0;
  return static_cast<std::int8_t>(std::clamp(rounded, -range, range));
}

void require_geometry(int head_dim, int bits, int group) {
  if (bits != 8 && bits != 4) {
    throw InvalidArgument("bits", std::to_string(bits), "expected 8 or 4");
  }
  if (head_dim <= 0 || head_dim % 8 != 0) {
    throw InvalidArgument("head_dim", std::to_string(head_dim), "expected a multiple of 8");
  }
  if (bits == 4 && (group <= 0 || head_dim % group != 0)) {
    throw InvalidArgument("group", std::to_string(group), "expected a divisor of head_dim");
  }
}

}  // namespace

CacheRow quantize_cache_row(const float* x, int head_dim, int bits, int group,
                            const float* offset) {
  require_geometry(head_dim, bits, group);
  std::vector<float> centred(x, x + head_dim);
  if (offset != nullptr) {
    for (int c = 0; c < head_dim; ++c) centred[static_cast<std::size_t>(c)] -= offset[c];
  }
  CacheRow row;
  row.values.resize(static_cast<std::size_t>(head_dim));
  const int group_size = bits == 8 ? head_dim : group;
  const float range = bits == 8 ? 127.0f : 7.0f;
  for (int first = 0; first < head_dim; first += group_size) {
    float amax = 0.0f;
    for (int c = first; c < first + group_size; ++c) {
      amax = std::max(amax, std::fabs(centred[static_cast<std::size_t>(c)]));
    }
    float scale = amax / range;
    float inverse = amax > 0.0f ? 1.0f / scale : 0.0f;
    if (bits == 4) {
      // The stored FP16 scale is the one the values are quantized against; it saturates at
      // FP16's largest value.
      scale = round_to_16bit(std::min(scale, 65504.0f), false);
      inverse = scale > 0.0f ? 1.0f / scale : 0.0f;
    }
    row.scales.push_back(scale);
    for (int c = first; c < first + group_size; ++c) {
      row.values[static_cast<std::size_t>(c)] =
          quantize_value(centred[static_cast<std::size_t>(c)], inverse, range);
    }
  }
  return row;
}

void dequantize_cache_row(const CacheRow& row, int head_dim, int bits, int group, float* out) {
  require_geometry(head_dim, bits, group);
  for (int c = 0; c < head_dim; ++c) {
    const float value = row.values[static_cast<std::size_t>(c)];
    if (bits == 8) {
      out[c] = value * row.scales[0];
    } else {
      out[c] = round_to_16bit(value * row.scales[static_cast<std::size_t>(c / group)], false);
    }
  }
}

std::vector<std::uint8_t> pack_int4(const std::int8_t* values, int count) {
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>((count + 1) / 2), 0);
  for (int i = 0; i < count; ++i) {
    const auto nibble = static_cast<std::uint8_t>(values[i] & 0xF);
    bytes[static_cast<std::size_t>(i / 2)] |= static_cast<std::uint8_t>(nibble << (4 * (i % 2)));
  }
  return bytes;
}

std::vector<std::int8_t> unpack_int4(const std::uint8_t* bytes, int count) {
  std::vector<std::int8_t> values(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    const int nibble = (bytes[i / 2] >> (4 * (i % 2))) & 0xF;
    values[static_cast<std::size_t>(i)] =
        static_cast<std::int8_t>(nibble >= 8 ? nibble - 16 : nibble);
  }
  return values;
}

std::size_t PagedLayout::data_bytes() const {
  return static_cast<std::size_t>(num_pages) * heads_kv * page_size * row_bytes();
}

std::size_t PagedLayout::scale_total_bytes() const {
  return static_cast<std::size_t>(num_pages) * heads_kv * page_size * scales_per_row() *
         scale_bytes();
}

std::size_t PagedLayout::data_offset(std::int64_t slot, int head) const {
  const std::int64_t page = slot / page_size;
  const std::int64_t position = slot % page_size;
  return static_cast<std::size_t>(((page * heads_kv + head) * page_size + position) * row_bytes());
}

std::size_t PagedLayout::scale_offset(std::int64_t slot, int head) const {
  const std::int64_t page = slot / page_size;
  const std::int64_t position = slot % page_size;
  return static_cast<std::size_t>(((page * heads_kv + head) * page_size + position) *
                                  scales_per_row() * scale_bytes());
}

PagedCacheModel::PagedCacheModel(const PagedLayout& layout, std::uint8_t fill)
    : layout_(layout),
      k_data_(layout.data_bytes(), fill),
      v_data_(layout.data_bytes(), fill),
      k_scales_(layout.scale_total_bytes(), fill),
      v_scales_(layout.scale_total_bytes(), fill) {
  require_geometry(layout.head_dim, layout.bits, layout.group);
}

void PagedCacheModel::store(const CacheRow& row, std::int64_t slot, int head,
                            std::vector<std::uint8_t>& data, std::vector<std::uint8_t>& scales) {
  std::uint8_t* destination = data.data() + layout_.data_offset(slot, head);
  if (layout_.bits == 8) {
    std::memcpy(destination, row.values.data(), row.values.size());
  } else {
    const std::vector<std::uint8_t> packed = pack_int4(row.values.data(), layout_.head_dim);
    std::memcpy(destination, packed.data(), packed.size());
  }
  std::uint8_t* scale_bytes = scales.data() + layout_.scale_offset(slot, head);
  for (std::size_t i = 0; i < row.scales.size(); ++i) {
    if (layout_.bits == 8) {
      std::memcpy(scale_bytes + 4 * i, &row.scales[i], 4);
    } else {
      const std::uint16_t bits = float_to_f16_bits(row.scales[i]);
      std::memcpy(scale_bytes + 2 * i, &bits, 2);
    }
  }
}

CacheRow PagedCacheModel::load(std::int64_t slot, int head, const std::vector<std::uint8_t>& data,
                               const std::vector<std::uint8_t>& scales) const {
  CacheRow row;
  const std::uint8_t* source = data.data() + layout_.data_offset(slot, head);
  if (layout_.bits == 8) {
    row.values.assign(reinterpret_cast<const std::int8_t*>(source),
                      reinterpret_cast<const std::int8_t*>(source) + layout_.head_dim);
  } else {
    row.values = unpack_int4(source, layout_.head_dim);
  }
  const std::uint8_t* scale_bytes = scales.data() + layout_.scale_offset(slot, head);
  for (int i = 0; i < layout_.scales_per_row(); ++i) {
    if (layout_.bits == 8) {
      float scale;
      std::memcpy(&scale, scale_bytes + 4 * i, 4);
      row.scales.push_back(scale);
    } else {
      std::uint16_t bits;
      std::memcpy(&bits, scale_bytes + 2 * i, 2);
      row.scales.push_back(f16_bits_to_float(bits));
    }
  }
  return row;
}

void PagedCacheModel::append(const float* k, const float* v, const std::int32_t* slot_mapping,
                             int tokens, const float* k_offset) {
  const std::size_t row = static_cast<std::size_t>(layout_.head_dim);
  for (int token = 0; token < tokens; ++token) {
    const std::int32_t slot = slot_mapping[token];
    if (slot < 0) continue;
    for (int head = 0; head < layout_.heads_kv; ++head) {
      const std::size_t at = (static_cast<std::size_t>(token) * layout_.heads_kv + head) * row;
      const float* offset = k_offset != nullptr ? k_offset + head * row : nullptr;
      store(quantize_cache_row(k + at, layout_.head_dim, layout_.bits, layout_.group, offset), slot,
            head, k_data_, k_scales_);
      store(quantize_cache_row(v + at, layout_.head_dim, layout_.bits, layout_.group), slot, head,
            v_data_, v_scales_);
    }
  }
}

std::vector<float> PagedCacheModel::dequantized(const std::int32_t* block_table_row, int length,
                                                const std::vector<std::uint8_t>& data,
                                                const std::vector<std::uint8_t>& scales) const {
  const std::size_t row = static_cast<std::size_t>(layout_.head_dim);
  std::vector<float> out(static_cast<std::size_t>(layout_.heads_kv) * length * row);
  for (int head = 0; head < layout_.heads_kv; ++head) {
    for (int token = 0; token < length; ++token) {
      const std::int64_t slot =
          static_cast<std::int64_t>(block_table_row[token / layout_.page_size]) *
              layout_.page_size +
          token % layout_.page_size;
      dequantize_cache_row(load(slot, head, data, scales), layout_.head_dim, layout_.bits,
                           layout_.group,
                           out.data() + (static_cast<std::size_t>(head) * length + token) * row);
    }
  }
  return out;
}

std::vector<float> PagedCacheModel::dequantized_k(const std::int32_t* block_table_row,
                                                  int length) const {
  return dequantized(block_table_row, length, k_data_, k_scales_);
}

std::vector<float> PagedCacheModel::dequantized_v(const std::int32_t* block_table_row,
                                                  int length) const {
  return dequantized(block_table_row, length, v_data_, v_scales_);
}

std::vector<float> decode_queries(const float* q, std::size_t count, double softmax_scale) {
  const auto scale_log2 = static_cast<float>(softmax_scale * kLog2E);
  std::vector<float> out(count);
  for (std::size_t i = 0; i < count; ++i) out[i] = round_to_16bit(q[i] * scale_log2, false);
  return out;
}

}  // namespace intfa::reference
