// Paged prefill on a GPU (skipped without one): packed queries of several sequences against their
// sequences' cached K/V, the pages of all of them out of order in one shared pool, checked per
// sequence against attention over the same quantized cache with Q quantized as the library
// quantizes it (tight: a bug in the gather, the packing or the varlen kernel) and against float64
// attention of the original Q/K/V (the quantization error, reported and bounded). The batches mix
// long prefills, chunks over cached prefixes, decode rows (one query), sequences with no queries
// and an empty one; GQA and MQA, page sizes 16 to 128, every head dim, INT8 and INT4 caches,
// FP16 and BF16, K smoothing, a workspace for more rows than the batch has. The workspace is
// poisoned with NaNs first (the gather must leave none where the kernel reads).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

#include "decode/paged_test_support.hpp"

namespace intfa::testing {
namespace {

// The bounds are the decode tests' (paged_test_support.hpp): against the same quantized cache
// the prefill has 16-bit P and FP32 accumulation as decode has, and its INT8 Q adds about 0.3%
// to the quantization error against the original inputs.

struct PrefillCase {
  std::string name;
  int bits = 8;
  bool bf16 = false;
  int head_dim = 128;
  int heads_q = 32, heads_kv = 8;
  int page_size = 16;
  bool causal = true;
  bool smooth = false;       // keys with 4-sigma channel offsets, smoothed by their mean
  std::vector<int> cached;   // tokens already in the cache before this step, per sequence
  std::vector<int> queries;  // new tokens (appended, then queried), per sequence
  int kv_slack = 0;  // problem.kv_tokens beyond the lengths' sum (rows the gather must zero)
};

void PrintTo(const PrefillCase& c, std::ostream* os) {
  *os << "INT" << c.bits << " cache, " << (c.bf16 ? "bf16" : "f16") << " D=" << c.head_dim
      << " Hq=" << c.heads_q << " Hkv=" << c.heads_kv << " page " << c.page_size
      << (c.causal ? " causal" : "") << (c.smooth ? ", smoothed K" : "");
}

// Rows quantized as quantize_qk (per row, INT8) and dequantized: [rows][head_dim].
std::vector<float> int8_rows(const std::vector<float>& rows, int head_dim) {
  std::vector<float> out(rows.size());
  for (std::size_t r = 0; r < rows.size() / head_dim; ++r) {
    const reference::CacheRow row = reference::quantize_cache_row(&rows[r * head_dim], head_dim, 8,
                                                                  reference::PagedLayout{}.group);
    reference::dequantize_cache_row(row, head_dim, 8, reference::PagedLayout{}.group,
                                    &out[r * head_dim]);
  }
  return out;
}

class PagedPrefillGpu : public ::testing::TestWithParam<PrefillCase> {};

TEST_P(PagedPrefillGpu, EverySequenceMatchesAttentionOverItsCachedKV) {
  INTFA_REQUIRE_GPU();
  const PrefillCase& c = GetParam();
  const std::uint64_t seed = reference::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const int batch = static_cast<int>(c.cached.size());
  const int d = c.head_dim, group = c.heads_q / c.heads_kv;
  std::vector<int> lengths(static_cast<std::size_t>(batch)), q_offsets = {0};
  int longest = 1, longest_q = 1;
  long long kv_tokens = 0;
  for (int b = 0; b < batch; ++b) {
    lengths[b] = c.cached[b] + c.queries[b];
    longest = std::max(longest, lengths[b]);
    longest_q = std::max(longest_q, c.queries[b]);
    kv_tokens += lengths[b];
    q_offsets.push_back(q_offsets.back() + c.queries[b]);
  }
  const int total_q = q_offsets.back();
  const int max_pages = (longest + c.page_size - 1) / c.page_size;
  reference::PagedLayout layout;
  layout.num_pages = batch * max_pages + 5;
  layout.page_size = c.page_size;
  layout.heads_kv = c.heads_kv;
  layout.head_dim = d;
  layout.bits = c.bits;
  std::uint64_t stream_seed = seed;
  // Keys with per-channel offsets of 4 sigma, and the offsets as the cache's smoothing.
  std::vector<float> channel_offset(static_cast<std::size_t>(c.heads_kv) * d, 0.0f);
  if (c.smooth) {
    channel_offset = random_16bit(channel_offset.size(), ++stream_seed, false, 4.0f);
  }
  DeviceCache cache(layout, c.smooth ? &channel_offset : nullptr);
  PagePool pool(layout.num_pages, seed);
  std::vector<Sequence> sequences(static_cast<std::size_t>(batch));
  std::vector<float> k_all, v_all;
  std::vector<std::int32_t> slots;
  for (int b = 0; b < batch; ++b) {
    const int tokens = lengths[b];
    if (tokens == 0) continue;
    std::vector<float> k =
        random_16bit(static_cast<std::size_t>(tokens) * c.heads_kv * d, ++stream_seed, c.bf16);
    const std::vector<float> v = random_16bit(k.size(), ++stream_seed, c.bf16);
    for (std::size_t i = 0; i < k.size(); ++i) {
      k[i] = reference::round_to_16bit(k[i] + channel_offset[i % channel_offset.size()], c.bf16);
    }
    for (int t = 0; t < tokens; ++t) {
      slots.push_back(sequences[b].next_slot(pool, c.page_size));
    }
    keep_rows(sequences[b], k.data(), v.data(), tokens, c.heads_kv, d);
    k_all.insert(k_all.end(), k.begin(), k.end());
    v_all.insert(v_all.end(), v.begin(), v.end());
  }
  Stream stream;
  if (!slots.empty()) cache.append(k_all, v_all, slots, c.bf16, stream.get());
  ASSERT_EQ(cache.mismatched_bytes(), 0u);

  std::vector<std::int32_t> table(static_cast<std::size_t>(batch) * max_pages, -1);
  for (int b = 0; b < batch; ++b) {
    std::copy(sequences[b].pages.begin(), sequences[b].pages.end(),
              table.begin() + static_cast<std::ptrdiff_t>(b) * max_pages);
  }
  // Queries: [total_q][heads_q][d], sequence b's rows from q_offsets[b].
  const std::vector<float> q =
      random_16bit(static_cast<std::size_t>(total_q) * c.heads_q * d, ++stream_seed, c.bf16);
  PagedPrefillProblem problem;
  problem.batch = batch;
  problem.heads_q = c.heads_q;
  problem.total_q = total_q;
  problem.max_q_len = longest_q;
  problem.max_pages = max_pages;
  problem.max_seq_len = longest;
  problem.kv_tokens = kv_tokens + c.kv_slack;
  problem.causal = c.causal;
  const DType dtype = c.bf16 ? DType::kBF16 : DType::kF16;
  DeviceBuffer table_device(table.size() * 4), lengths_device(lengths.size() * 4),
      offsets_device(q_offsets.size() * 4), q_device(q.size() * 2), out_device(q.size() * 2),
      lse_device(static_cast<std::size_t>(total_q) * c.heads_q * 4),
      workspace(paged_prefill_workspace_bytes(cache.cache(), problem));
  table_device.upload(table);
  lengths_device.upload(lengths);
  offsets_device.upload(q_offsets);
  q_device.upload(to_16bit(q, c.bf16));
  out_device.fill_bytes(0xFF);
  lse_device.fill_bytes(0xFF);
  workspace.fill_bytes(0xFF);  // NaN 16-bit V, NaN scales
  auto rows = [&](void* data) {
    TensorView view;
    view.data = data;
    view.dtype = dtype;
    view.strides = {0, d, static_cast<std::int64_t>(c.heads_q) * d, 1};
    return view;
  };
  PagedPrefillTensors tensors;
  tensors.q = rows(q_device.get());
  tensors.out = rows(out_device.get());
  tensors.lse = lse_device.as<float>();
  tensors.query_start_loc = offsets_device.as<int>();
  tensors.block_table = table_device.as<int>();
  tensors.seq_lens = lengths_device.as<int>();
  tensors.workspace = workspace.get();
  tensors.workspace_bytes = workspace.bytes();
  paged_prefill(cache.cache(), problem, tensors, stream.get());
  stream.synchronize();
  const std::vector<float> out =
      from_16bit(out_device.download_as<std::uint16_t>(q.size()), c.bf16);
  const std::vector<float> lse =
      lse_device.download_as<float>(static_cast<std::size_t>(total_q) * c.heads_q);

  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  double worst_model = 0, worst_original = 0;
  for (int b = 0; b < batch; ++b) {
    const int n_q = c.queries[b], length = lengths[b];
    SCOPED_TRACE("sequence " + std::to_string(b) + " (" + std::to_string(n_q) + " queries, " +
                 std::to_string(length) + " keys)");
    if (n_q == 0) continue;
    // Q: [heads_q][n_q][d], the original and as the kernel quantizes it.
    std::vector<float> q_hnd(static_cast<std::size_t>(c.heads_q) * n_q * d);
    for (int i = 0; i < n_q; ++i)
      for (int h = 0; h < c.heads_q; ++h)
        for (int x = 0; x < d; ++x)
          q_hnd[(static_cast<std::size_t>(h) * n_q + i) * d + x] =
              q[(static_cast<std::size_t>(q_offsets[b] + i) * c.heads_q + h) * d + x];
    const std::vector<float> q_model = int8_rows(q_hnd, d);
    // K as the gather hands it over (INT8 rows; an INT4 cache's quantized again per row) and V
    // rounded to the queries' 16-bit type.
    std::vector<float> k_model = cache.model().dequantized_k(sequences[b].pages.data(), length);
    if (c.bits == 4) k_model = int8_rows(k_model, d);
    std::vector<float> v_model = cache.model().dequantized_v(sequences[b].pages.data(), length);
    for (float& value : v_model) value = reference::round_to_16bit(value, c.bf16);
    const std::size_t outputs = q_hnd.size(), row_count = q_hnd.size() / d;
    std::vector<double> model_out(outputs), model_lse(row_count), original_out(outputs);
    const reference::Shape shape =
        reference::make_shape(1, c.heads_q, c.heads_kv, n_q, length, d, c.causal);
    reference::attention_f64(shape, q_model.data(), k_model.data(), v_model.data(),
                             model_out.data(), model_lse.data());
    reference::attention_f64(shape, q_hnd.data(), sequences[b].k.data(), sequences[b].v.data(),
                             original_out.data());
    // The device's rows of this sequence as [heads_q][n_q][d]; its LSE as [heads_q][n_q], with
    // K smoothing's term added back to the model's (the LSE of the original scores).
    std::vector<float> got(outputs), got_lse(row_count);
    std::vector<double> want_lse(row_count);
    for (int h = 0; h < c.heads_q; ++h) {
      for (int i = 0; i < n_q; ++i) {
        const std::size_t at = static_cast<std::size_t>(h) * n_q + i;
        for (int x = 0; x < d; ++x) {
          got[at * d + x] =
              out[(static_cast<std::size_t>(q_offsets[b] + i) * c.heads_q + h) * d + x];
        }
        got_lse[at] = lse[static_cast<std::size_t>(h) * total_q + q_offsets[b] + i];
        double smoothing = 0;
        for (int x = 0; x < d; ++x) {
          smoothing += static_cast<double>(q_hnd[at * d + x]) *
                       channel_offset[static_cast<std::size_t>(h / group) * d + x];
        }
        want_lse[at] = model_lse[at] + scale * smoothing;
      }
    }
    const double model = reference::compare(model_out.data(), got.data(), outputs).relative_l2;
    const double original =
        reference::compare(original_out.data(), got.data(), outputs).relative_l2;
    worst_model = std::max(worst_model, model);
    worst_original = std::max(worst_original, original);
    EXPECT_LE(model, model_bound(c.bf16));
    EXPECT_LE(lse_error(want_lse, got_lse.data(), row_count), kLseBound);
    EXPECT_LE(original, original_bound(c.bits));
  }
  std::printf("  relative L2: %.2e against the quantized cache, %.4f against the originals\n",
              worst_model, worst_original);
  RecordProperty("relative_l2_quantized_cache", std::to_string(worst_model));
  RecordProperty("relative_l2_original", std::to_string(worst_original));
}

const PrefillCase kCases[] = {
    // Prefills, chunks over cached prefixes, decode rows, no queries, and an empty sequence.
    {"Int8MixedBatchCausal",
     8,
     false,
     128,
     32,
     8,
     16,
     true,
     false,
     {0, 100, 1000, 17, 0, 300, 0},
     {200, 1, 130, 0, 1, 64, 0},
     100},
    {"Int8MqaBf16SmoothedPage64", 8, true, 64, 8, 1, 64, true, true, {500, 3}, {77, 300}},
    {"Int4GqaPage128", 4, false, 128, 16, 4, 128, true, false, {64, 0, 129}, {200, 129, 1}, 7},
    {"Int8Head256Page32NotCausal", 8, false, 256, 8, 2, 32, false, false, {129, 40}, {257, 3}},
    {"Int4Bf16Head64Smoothed", 4, true, 64, 4, 4, 16, true, true, {31}, {33}},
    // K smoothing with several sequences and KV heads: each head's offsets, the packed batch's.
    {"Int8GqaSmoothedThreeSequences",
     8,
     false,
     128,
     16,
     4,
     32,
     true,
     true,
     {100, 50, 0},
     {60, 1, 90}},
};

INSTANTIATE_TEST_SUITE_P(Cases, PagedPrefillGpu, ::testing::ValuesIn(kCases),
                         [](const auto& param_info) { return param_info.param.name; });

}  // namespace
}  // namespace intfa::testing
