// A CPU model of the paged KV cache (templates/decode/README.md): how the append kernel quantizes
// and packs one (token, head) row, the bytes of a whole cache after a sequence of appends, and the
// dequantized K/V the decode kernel attends over. A kernel checked against this model is checked
// for bugs (bytes equal after append; decode within rounding of the f16 tensor-core operands);
// the gap between attention over the model's cache and float64 attention of the original K/V is
// the quantization error.
#pragma once

#include <cstdint>
#include <vector>

namespace intfa::reference {

// One (token, head) row as the cache stores it, before packing.
struct CacheRow {
  std::vector<std::int8_t> values;  // [head_dim], in [-127, 127] (INT8) or [-7, 7] (INT4)
  // INT8: one scale (FP32). INT4: head_dim / group scales, each an FP16 value (held as float).
  std::vector<float> scales;
};

// The append kernel's quantizer. `offset` (K smoothing, may be null) is subtracted in FP32 first.
// INT8: scale = amax / 127, inverse = amax > 0 ? 1 / scale : 0 (IEEE FP32 divisions),
//   q = clamp(round_half_even(x * inverse), -127, 127) (as quantize_rows).
// INT4, per group of `group` channels: scale = f16(amax / 7), inverse = scale > 0 ? 1 / scale : 0
//   with the rounded scale, q = clamp(round_half_even(x * inverse), -7, 7).
CacheRow quantize_cache_row(const float* x, int head_dim, int bits, int group,
                            const float* offset = nullptr);

// What the decode kernel multiplies with, per channel: INT8 value * scale (the kernel applies the
// scale to the score or to P in FP32; the product here is rounded once, to float), INT4
// f16(value * scale) (the kernel dequantizes into FP16 tensor-core operands).
void dequantize_cache_row(const CacheRow& row, int head_dim, int bits, int group, float* out);

// Two's-complement nibbles, element 2i in the low nibble of byte i (the library's kI4x2).
std::vector<std::uint8_t> pack_int4(const std::int8_t* values, int count);
std::vector<std::int8_t> unpack_int4(const std::uint8_t* bytes, int count);

// The cache's geometry (templates/decode/README.md, "Layout").
struct PagedLayout {
  int num_pages = 0;
  int page_size = 16;
  int heads_kv = 1;
  int head_dim = 128;
  int bits = 8;
  int group = 32;  // INT4 scale group along head_dim

  int row_bytes() const { return head_dim * bits / 8; }
  int scales_per_row() const { return bits == 8 ? 1 : head_dim / group; }
  int scale_bytes() const { return bits == 8 ? 4 : 2; }  // FP32 or FP16
  std::size_t data_bytes() const;         // K (or V): [num_pages][heads_kv][page_size][row_bytes]
  std::size_t scale_total_bytes() const;  // [num_pages][heads_kv][page_size][scales_per_row]
  // Byte offsets of one (slot, head) row in the data and scale arrays; slot = page * page_size +
  // position in the page.
  std::size_t data_offset(std::int64_t slot, int head) const;
  std::size_t scale_offset(std::int64_t slot, int head) const;
};

// The bytes of a whole cache on the host, changed exactly as the append kernel changes the
// device's: the GPU tests download the device cache and compare it with this byte for byte.
class PagedCacheModel {
 public:
  // Every byte starts as `fill` (the tests poison the device cache the same way, so that a decode
  // that reads a slot no append wrote sees NaN scales).
  PagedCacheModel(const PagedLayout& layout, std::uint8_t fill);

  // k, v: [tokens][heads_kv][head_dim] values (of FP16/BF16 inputs); slot_mapping[i] < 0 skips
  // token i. `k_offset` ([heads_kv][head_dim], may be null) is subtracted from K first.
  void append(const float* k, const float* v, const std::int32_t* slot_mapping, int tokens,
              const float* k_offset);

  // Dequantized K or V of one sequence's first `length` tokens through its block table row:
  // [heads_kv][length][head_dim] (dequantize_cache_row of every row).
  std::vector<float> dequantized_k(const std::int32_t* block_table_row, int length) const;
  std::vector<float> dequantized_v(const std::int32_t* block_table_row, int length) const;

  const PagedLayout& layout() const { return layout_; }
  const std::vector<std::uint8_t>& k_data() const { return k_data_; }
  const std::vector<std::uint8_t>& v_data() const { return v_data_; }
  const std::vector<std::uint8_t>& k_scales() const { return k_scales_; }
  const std::vector<std::uint8_t>& v_scales() const { return v_scales_; }

 private:
  void store(const CacheRow& row, std::int64_t slot, int head, std::vector<std::uint8_t>& data,
             std::vector<std::uint8_t>& scales);
  CacheRow load(std::int64_t slot, int head, const std::vector<std::uint8_t>& data,
                const std::vector<std::uint8_t>& scales) const;
  std::vector<float> dequantized(const std::int32_t* block_table_row, int length,
                                 const std::vector<std::uint8_t>& data,
                                 const std::vector<std::uint8_t>& scales) const;

  PagedLayout layout_;
  std::vector<std::uint8_t> k_data_, v_data_, k_scales_, v_scales_;
};

// What decode attends with: query values rounded as the kernel feeds its tensor cores,
// f16(q * softmax_scale * log2(e)) (an FP32 product, then FP16), in the log2 domain. Attention
// over these with softmax_scale = ln(2) in float64 is the decode kernel's algorithm up to the
// FP16 rounding of P (and of V's scale folded into P, INT8) and FP32 accumulation.
std::vector<float> decode_queries(const float* q, std::size_t count, double softmax_scale);

}  // namespace intfa::reference
