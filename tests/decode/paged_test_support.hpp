// What the paged-cache GPU tests share: a device cache mirrored by the CPU model, a shared pool of
// pages handed out in random order, sequences that grow in it, and the two references of a decode
// (the same quantized cache, tight; the original K/V, reported).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "intfa/paged.hpp"
#include "reference/half.hpp"
#include "reference/paged_model.hpp"
#include "reference/reference.hpp"
#include "support/gpu.hpp"

namespace intfa::testing {

// Tight bounds against the same quantized cache: FP16 P and FP32 accumulation, plus the output's
// own rounding (BF16 keeps 8 bits).
inline double model_bound(bool bf16) {
  return bf16 ? 6e-3 : 2e-3;
}
constexpr double kLseBound = 2e-3;
// The quantization error against the original K/V on N(0, 1) (templates/decode/README.md: INT8
// ~0.9-1.2%, INT4 ~14% on long sequences; short ones vary more).
inline double original_bound(int bits) {
  return bits == 8 ? 0.02 : 0.30;
}

// 16-bit bits of values (already representable) for upload.
inline std::vector<std::uint16_t> to_16bit(const std::vector<float>& values, bool bf16) {
  std::vector<std::uint16_t> bits(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    bits[i] =
        bf16 ? reference::float_to_bf16_bits(values[i]) : reference::float_to_f16_bits(values[i]);
  }
  return bits;
}

inline std::vector<float> from_16bit(const std::vector<std::uint16_t>& bits, bool bf16) {
  std::vector<float> values(bits.size());
  for (std::size_t i = 0; i < bits.size(); ++i) {
    values[i] =
        bf16 ? reference::bf16_bits_to_float(bits[i]) : reference::f16_bits_to_float(bits[i]);
  }
  return values;
}

// Random values of a distribution, rounded to the 16-bit type the device gets.
inline std::vector<float> random_16bit(std::size_t count, std::uint64_t seed, bool bf16,
                                       float scale = 1.0f) {
  std::vector<float> values =
      reference::random_values(count, reference::Distribution::kNormal, seed);
  for (float& value : values) value = reference::round_to_16bit(value * scale, bf16);
  return values;
}

// One layer's cache on the device, every byte poisoned with 0xFF (NaN scales in slots no append
// wrote), and its CPU model poisoned alike.
class DeviceCache {
 public:
  DeviceCache(const reference::PagedLayout& layout, const std::vector<float>* k_offset)
      : model_(layout, 0xFF),
        k_data_(layout.data_bytes()),
        v_data_(layout.data_bytes()),
        k_scale_(layout.scale_total_bytes()),
        v_scale_(layout.scale_total_bytes()) {
    for (DeviceBuffer* buffer : {&k_data_, &v_data_, &k_scale_, &v_scale_}) {
      buffer->fill_bytes(0xFF);
    }
    cache_.num_pages = layout.num_pages;
    cache_.page_size = layout.page_size;
    cache_.heads_kv = layout.heads_kv;
    cache_.head_dim = layout.head_dim;
    cache_.bits = layout.bits;
    cache_.k_data = k_data_.get();
    cache_.v_data = v_data_.get();
    cache_.k_scale = k_scale_.get();
    cache_.v_scale = v_scale_.get();
    if (k_offset != nullptr) {
      offset_ = *k_offset;
      offset_buffer_ = DeviceBuffer(offset_.size() * sizeof(float));
      offset_buffer_.upload(offset_);
      cache_.k_offset = offset_buffer_.as<float>();
    }
  }

  // Appends on the device (k, v: [tokens][heads_kv][head_dim] 16-bit values) and in the model.
  void append(const std::vector<float>& k, const std::vector<float>& v,
              const std::vector<std::int32_t>& slots, bool bf16, CUstream stream) {
    const int tokens = static_cast<int>(slots.size());
    const reference::PagedLayout& layout = model_.layout();
    DeviceBuffer k_device(k.size() * 2), v_device(v.size() * 2), slot_device(slots.size() * 4);
    k_device.upload(to_16bit(k, bf16));
    v_device.upload(to_16bit(v, bf16));
    slot_device.upload(slots);
    const DType dtype = bf16 ? DType::kBF16 : DType::kF16;
    auto view = [&](void* data) {
      TensorView rows;
      rows.data = data;
      rows.dtype = dtype;
      rows.strides = {0, layout.head_dim,
                      static_cast<std::int64_t>(layout.heads_kv) * layout.head_dim, 1};
      return rows;
    };
    paged_append(cache_, view(k_device.get()), view(v_device.get()), slot_device.as<int>(), tokens,
                 stream);
    INTFA_DRIVER(cuStreamSynchronize, stream);
    model_.append(k.data(), v.data(), slots.data(), tokens,
                  offset_.empty() ? nullptr : offset_.data());
  }

  // How many bytes of each array differ from the model's (0 when the appends were exact).
  std::size_t mismatched_bytes() const {
    std::size_t count = 0;
    auto compare = [&](const DeviceBuffer& buffer, const std::vector<std::uint8_t>& expected) {
      const auto bytes = buffer.download_as<std::uint8_t>(expected.size());
      for (std::size_t i = 0; i < bytes.size(); ++i) count += bytes[i] != expected[i];
    };
    compare(k_data_, model_.k_data());
    compare(v_data_, model_.v_data());
    compare(k_scale_, model_.k_scales());
    compare(v_scale_, model_.v_scales());
    return count;
  }

  const PagedKVCache& cache() const { return cache_; }
  const reference::PagedCacheModel& model() const { return model_; }
  const std::vector<float>& offset() const { return offset_; }

 private:
  reference::PagedCacheModel model_;
  DeviceBuffer k_data_, v_data_, k_scale_, v_scale_, offset_buffer_;
  std::vector<float> offset_;
  PagedKVCache cache_;
};

// A shared pool of pages handed out in a random order, and sequences that grow in it: each keeps
// its block table row and its original K/V ([heads_kv][tokens][head_dim]) for the references.
class PagePool {
 public:
  PagePool(int num_pages, std::uint64_t seed) : free_(static_cast<std::size_t>(num_pages)) {
    for (int page = 0; page < num_pages; ++page) free_[static_cast<std::size_t>(page)] = page;
    std::shuffle(free_.begin(), free_.end(), std::mt19937_64(seed));
  }
  int take() {
    if (free_.empty()) throw std::runtime_error("the test's page pool is exhausted");
    const int page = free_.back();
    free_.pop_back();
    return page;
  }

 private:
  std::vector<int> free_;
};

struct Sequence {
  std::vector<std::int32_t> pages;
  int length = 0;
  std::vector<float> k, v;  // [heads_kv][length][head_dim], the original values

  // The slot of the next token, taking a page from the pool at a page boundary.
  std::int32_t next_slot(PagePool& pool, int page_size) {
    if (length % page_size == 0) pages.push_back(pool.take());
    const std::int32_t slot = pages.back() * page_size + length % page_size;
    ++length;
    return slot;
  }
};

// Token rows [tokens][heads_kv][head_dim] of new K or V, and the same appended per sequence.
inline void keep_rows(Sequence& sequence, const float* k_rows, const float* v_rows, int tokens,
                      int heads_kv, int head_dim) {
  const std::size_t row = static_cast<std::size_t>(head_dim);
  const int old_length = sequence.length - tokens;
  std::vector<float> k(static_cast<std::size_t>(heads_kv) * sequence.length * row);
  std::vector<float> v(k.size());
  for (int h = 0; h < heads_kv; ++h) {
    for (int t = 0; t < sequence.length; ++t) {
      float* k_to = &k[(static_cast<std::size_t>(h) * sequence.length + t) * row];
      float* v_to = &v[(static_cast<std::size_t>(h) * sequence.length + t) * row];
      const float *k_from, *v_from;
      if (t < old_length) {
        k_from = &sequence.k[(static_cast<std::size_t>(h) * old_length + t) * row];
        v_from = &sequence.v[(static_cast<std::size_t>(h) * old_length + t) * row];
      } else {
        const std::size_t at = (static_cast<std::size_t>(t - old_length) * heads_kv + h) * row;
        k_from = k_rows + at;
        v_from = v_rows + at;
      }
      std::copy(k_from, k_from + row, k_to);
      std::copy(v_from, v_from + row, v_to);
    }
  }
  sequence.k.swap(k);
  sequence.v.swap(v);
}

// The two references of one sequence's decode. q: [q_len][heads_q][head_dim] (the device
// layout). out: [q_len][heads_q][head_dim], lse: [q_len][heads_q].
struct DecodeReference {
  std::vector<double> quantized_out, quantized_lse;  // attention over the model's cache
  std::vector<double> original_out, original_lse;    // float64 attention of the original K/V
};

inline DecodeReference decode_reference(const DeviceCache& cache, const Sequence& sequence,
                                        const std::vector<float>& q, int q_len, int heads_q,
                                        bool causal) {
  const reference::PagedLayout& layout = cache.model().layout();
  const int d = layout.head_dim, heads_kv = layout.heads_kv, length = sequence.length;
  const std::size_t row = static_cast<std::size_t>(d);
  // [q_len][heads_q][d] -> [heads_q][q_len][d]
  std::vector<float> q_hnd(q.size());
  for (int i = 0; i < q_len; ++i)
    for (int h = 0; h < heads_q; ++h)
      std::copy(&q[(static_cast<std::size_t>(i) * heads_q + h) * row],
                &q[(static_cast<std::size_t>(i) * heads_q + h) * row] + row,
                &q_hnd[(static_cast<std::size_t>(h) * q_len + i) * row]);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const std::size_t outputs = static_cast<std::size_t>(heads_q) * q_len * row;
  const std::size_t rows = static_cast<std::size_t>(heads_q) * q_len;
  std::vector<double> out_hnd(outputs), lse_hnd(rows), original_hnd(outputs),
      original_lse_hnd(rows);
  const std::vector<float> q_log2 = reference::decode_queries(q_hnd.data(), q_hnd.size(), scale);
  if (length > 0) {
    const std::vector<float> k = cache.model().dequantized_k(sequence.pages.data(), length);
    const std::vector<float> v = cache.model().dequantized_v(sequence.pages.data(), length);
    reference::attention_f64(
        reference::make_shape(1, heads_q, heads_kv, q_len, length, d, causal, 0.6931471805599453),
        q_log2.data(), k.data(), v.data(), out_hnd.data(), lse_hnd.data());
    reference::attention_f64(reference::make_shape(1, heads_q, heads_kv, q_len, length, d, causal),
                             q_hnd.data(), sequence.k.data(), sequence.v.data(),
                             original_hnd.data(), original_lse_hnd.data());
  } else {
    std::fill(lse_hnd.begin(), lse_hnd.end(), -std::numeric_limits<double>::infinity());
    std::fill(original_lse_hnd.begin(), original_lse_hnd.end(),
              -std::numeric_limits<double>::infinity());
  }
  DecodeReference reference;
  reference.quantized_out.resize(outputs);
  reference.original_out.resize(outputs);
  reference.quantized_lse.resize(rows);
  reference.original_lse.resize(rows);
  const int group = heads_q / heads_kv;
  for (int h = 0; h < heads_q; ++h) {
    // K smoothing: the kernel adds q' . offset back, so that its LSE is the unsmoothed keys'.
    std::vector<double> smoothing(static_cast<std::size_t>(q_len), 0.0);
    if (!cache.offset().empty()) {
      const float* offset = &cache.offset()[static_cast<std::size_t>(h / group) * row];
      for (int i = 0; i < q_len; ++i)
        for (int c = 0; c < d; ++c)
          smoothing[static_cast<std::size_t>(i)] +=
              static_cast<double>(q_log2[(static_cast<std::size_t>(h) * q_len + i) * row + c]) *
              offset[c];
    }
    for (int i = 0; i < q_len; ++i) {
      const std::size_t from = static_cast<std::size_t>(h) * q_len + i;
      const std::size_t to = static_cast<std::size_t>(i) * heads_q + h;
      std::copy(&out_hnd[from * row], &out_hnd[from * row] + row,
                &reference.quantized_out[to * row]);
      std::copy(&original_hnd[from * row], &original_hnd[from * row] + row,
                &reference.original_out[to * row]);
      reference.quantized_lse[to] =
          lse_hnd[from] + 0.6931471805599453 * smoothing[static_cast<std::size_t>(i)];
      reference.original_lse[to] = original_lse_hnd[from];
    }
  }
  return reference;
}

// Largest |a - b| over finite pairs; a pair where exactly one is -inf (or either is NaN) counts
// as infinite.
inline double lse_error(const std::vector<double>& expected, const float* actual,
                        std::size_t count) {
  double worst = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const bool expected_empty = std::isinf(expected[i]) && expected[i] < 0;
    const bool actual_empty = std::isinf(actual[i]) && actual[i] < 0;
    if (expected_empty && actual_empty) continue;
    if (expected_empty != actual_empty || std::isnan(actual[i])) {
      return std::numeric_limits<double>::infinity();
    }
    worst = std::max(worst, std::fabs(expected[i] - static_cast<double>(actual[i])));
  }
  return worst;
}

// RAII: a decode step captured in a CUDA graph.
class CapturedGraph {
 public:
  template <typename Body>
  CapturedGraph(CUstream stream, Body&& body) {
    INTFA_DRIVER(cuStreamBeginCapture, stream, CU_STREAM_CAPTURE_MODE_GLOBAL);
    try {
      body();
    } catch (...) {
      CUgraph abandoned = nullptr;
      device::driver().cuStreamEndCapture(stream, &abandoned);
      if (abandoned != nullptr) device::driver().cuGraphDestroy(abandoned);
      throw;
    }
    INTFA_DRIVER(cuStreamEndCapture, stream, &graph_);
    INTFA_DRIVER(cuGraphInstantiate, &exec_, graph_, 0);
  }
  ~CapturedGraph() {
    if (exec_ != nullptr) device::driver().cuGraphExecDestroy(exec_);
    if (graph_ != nullptr) device::driver().cuGraphDestroy(graph_);
  }
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;
  void launch(CUstream stream) const { INTFA_DRIVER(cuGraphLaunch, exec_, stream); }

 private:
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
};

}  // namespace intfa::testing
