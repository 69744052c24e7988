// The paged cache on a GPU (skipped without one): appends byte for byte as the CPU model, and a
// serving loop of prefill then many append + decode steps over sequences of different lengths
// whose pages come out of order from one shared pool, each decode checked against attention over
// the same quantized cache (tight: a kernel bug) and against float64 attention of the original K/V
// (the quantization error, reported and bounded). Edge cases: length 1, page-boundary lengths,
// empty sequences, padding tokens, GQA/MQA, causal multi-query with rows that see no key, every
// head dim, both widths, BF16, K smoothing, forced splits and configs, and a decode step captured
// in a CUDA graph and replayed with new lengths.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

#include "common/log.hpp"
#include "decode/paged_test_support.hpp"
#include "families/paged_family.hpp"
#include "intfa/errors.hpp"
#include "support/gpu.hpp"

namespace intfa::testing {
namespace {

struct ServingCase {
  std::string name;
  int bits = 8;
  bool bf16 = false;
  int head_dim = 128;
  int heads_q = 32, heads_kv = 8;
  int page_size = 16;
  int q_len = 1;
  bool causal = false;
  bool smooth = false;  // keys with 4-sigma channel offsets, smoothed with the first prefill's mean
  int num_splits = 0;
  PagedDecodeConfig config{};
  int steps = 5;
  std::vector<int> prefill = {1, 16, 17, 200, 700};
};

std::string case_name(const ::testing::TestParamInfo<ServingCase>& info) {
  return info.param.name;
}
void PrintTo(const ServingCase& c, std::ostream* os) {
  *os << "INT" << c.bits << " cache, " << (c.bf16 ? "bf16" : "f16") << " D=" << c.head_dim
      << " Hq=" << c.heads_q << " Hkv=" << c.heads_kv << " page " << c.page_size << ", " << c.q_len
      << (c.q_len == 1 ? " query" : " queries") << (c.causal ? " causal" : "")
      << (c.smooth ? ", smoothed K" : "") << ", splits "
      << (c.num_splits == 0 ? "heuristic" : std::to_string(c.num_splits));
  if (c.config.block_rows != 0) {
    *os << ", config " << c.config.block_rows << "," << c.config.stage_tokens << ","
        << c.config.stages;
  }
  *os << ", " << c.steps << " steps";
}

class PagedServingGpu : public ::testing::TestWithParam<ServingCase> {};

TEST_P(PagedServingGpu, EveryStepMatchesAttentionOverTheSameQuantizedCache) {
  INTFA_REQUIRE_GPU();
  const ServingCase c = GetParam();
  const std::uint64_t seed = reference::fresh_seed();
  std::printf("  seed %llu\n", static_cast<unsigned long long>(seed));
  const int batch = static_cast<int>(c.prefill.size());
  const int d = c.head_dim;
  const std::size_t row = static_cast<std::size_t>(d);
  int longest = 0;
  for (int length : c.prefill) longest = std::max(longest, length + c.steps * c.q_len);
  const int max_pages = (longest + c.page_size - 1) / c.page_size;

  reference::PagedLayout layout;
  layout.num_pages = batch * max_pages + 7;
  layout.page_size = c.page_size;
  layout.heads_kv = c.heads_kv;
  layout.head_dim = d;
  layout.bits = c.bits;
  layout.group = 32;
  // Keys with per-(head, channel) offsets when smoothing is tested; the offset is the mean of the
  // longest prompt's keys (fixed before the first append, as a serving stack would).
  const std::vector<float> channel_offsets = reference::random_values(
      static_cast<std::size_t>(c.heads_kv) * d, reference::Distribution::kNormal, seed + 9);
  std::uint64_t stream_seed = seed;
  auto new_rows = [&](int tokens, bool keys) {
    std::vector<float> rows =
        random_16bit(static_cast<std::size_t>(tokens) * c.heads_kv * d, ++stream_seed, c.bf16);
    if (keys && c.smooth) {
      for (int t = 0; t < tokens; ++t)
        for (int h = 0; h < c.heads_kv; ++h)
          for (int ch = 0; ch < d; ++ch) {
            float& value = rows[(static_cast<std::size_t>(t) * c.heads_kv + h) * row + ch];
            value = reference::round_to_16bit(value + 4.0f * channel_offsets[h * row + ch], c.bf16);
          }
    }
    return rows;
  };

  // The prefill: every sequence's tokens in one append, with padding tokens between them.
  PagePool pool(layout.num_pages, seed + 1);
  std::vector<Sequence> sequences(static_cast<std::size_t>(batch));
  std::vector<float> prefill_k, prefill_v;
  std::vector<std::int32_t> slots;
  std::vector<std::vector<float>> kept_k(static_cast<std::size_t>(batch)),
      kept_v(static_cast<std::size_t>(batch));
  for (int b = 0; b < batch; ++b) {
    const int tokens = c.prefill[static_cast<std::size_t>(b)];
    kept_k[static_cast<std::size_t>(b)] = new_rows(tokens, true);
    kept_v[static_cast<std::size_t>(b)] = new_rows(tokens, false);
  }
  std::vector<float> offset;
  if (c.smooth) {
    offset.assign(static_cast<std::size_t>(c.heads_kv) * d, 0.0f);
    const std::size_t longest_prefill = static_cast<std::size_t>(
        std::max_element(c.prefill.begin(), c.prefill.end()) - c.prefill.begin());
    const std::vector<float>& first = kept_k[longest_prefill];
    const int tokens = c.prefill[longest_prefill];
    for (int h = 0; h < c.heads_kv; ++h)
      for (int ch = 0; ch < d; ++ch) {
        double sum = 0;
        for (int t = 0; t < tokens; ++t)
          sum += first[(static_cast<std::size_t>(t) * c.heads_kv + h) * row + ch];
        offset[h * row + ch] = static_cast<float>(sum / tokens);
      }
  }
  DeviceCache cache(layout, c.smooth ? &offset : nullptr);
  Stream stream;
  const std::vector<float> padding(static_cast<std::size_t>(c.heads_kv) * d, 1e4f);
  // Tokens are interleaved across sequences (page by page from the shared pool), as a batch of
  // prompts arriving together would be.
  std::vector<int> written(static_cast<std::size_t>(batch), 0);
  for (bool more = true; more;) {
    more = false;
    for (int b = 0; b < batch; ++b) {
      Sequence& sequence = sequences[static_cast<std::size_t>(b)];
      const int total = c.prefill[static_cast<std::size_t>(b)];
      const int take = std::min(c.page_size, total - written[static_cast<std::size_t>(b)]);
      for (int t = 0; t < take; ++t) {
        const std::size_t at =
            static_cast<std::size_t>(written[static_cast<std::size_t>(b)] + t) * c.heads_kv * row;
        slots.push_back(sequence.next_slot(pool, c.page_size));
        prefill_k.insert(prefill_k.end(), &kept_k[static_cast<std::size_t>(b)][at],
                         &kept_k[static_cast<std::size_t>(b)][at] + c.heads_kv * row);
        prefill_v.insert(prefill_v.end(), &kept_v[static_cast<std::size_t>(b)][at],
                         &kept_v[static_cast<std::size_t>(b)][at] + c.heads_kv * row);
      }
      written[static_cast<std::size_t>(b)] += take;
      more = more || written[static_cast<std::size_t>(b)] < total;
      // A padding token (vLLM's slot -1) after each sequence's chunk: skipped.
      slots.push_back(-1);
      prefill_k.insert(prefill_k.end(), padding.begin(), padding.end());
      prefill_v.insert(prefill_v.end(), padding.begin(), padding.end());
    }
  }
  for (int b = 0; b < batch; ++b) {
    Sequence& sequence = sequences[static_cast<std::size_t>(b)];
    const int tokens = sequence.length;  // all of them new: keep_rows takes the last `tokens`
    keep_rows(sequence, kept_k[static_cast<std::size_t>(b)].data(),
              kept_v[static_cast<std::size_t>(b)].data(), tokens, c.heads_kv, d);
  }
  cache.append(prefill_k, prefill_v, slots, c.bf16, stream.get());
  EXPECT_EQ(cache.mismatched_bytes(), 0u) << "the prefill's appends differ from the CPU model";

  const DType dtype = c.bf16 ? DType::kBF16 : DType::kF16;
  PagedDecodeProblem problem;
  problem.batch = batch;
  problem.q_len = c.q_len;
  problem.heads_q = c.heads_q;
  problem.max_pages = max_pages;
  problem.max_seq_len = longest;
  problem.causal = c.causal;
  PagedDecodeOptions options;
  options.num_splits = c.num_splits;
  options.config = c.config;
  const std::size_t workspace_bytes = paged_decode_workspace_bytes(cache.cache(), problem, options);
  DeviceBuffer workspace(std::max<std::size_t>(workspace_bytes, 256));
  const std::size_t q_elements = static_cast<std::size_t>(batch) * c.q_len * c.heads_q * d;
  DeviceBuffer q_device(q_elements * 2), out_device(q_elements * 2),
      lse_device(static_cast<std::size_t>(batch) * c.q_len * c.heads_q * 4),
      table_device(static_cast<std::size_t>(batch) * max_pages * 4),
      lengths_device(static_cast<std::size_t>(batch) * 4);
  std::printf("  splits %d, workspace %zu bytes\n",
              paged_decode_splits(cache.cache(), problem, options), workspace_bytes);

  double worst_model = 0, worst_lse = 0, worst_original = 0;
  for (int step = 0; step < c.steps; ++step) {
    // q_len new tokens per sequence, then the decode of their queries.
    std::vector<float> step_k, step_v;
    std::vector<std::int32_t> step_slots;
    for (Sequence& sequence : sequences) {
      const std::vector<float> k = new_rows(c.q_len, true), v = new_rows(c.q_len, false);
      for (int t = 0; t < c.q_len; ++t) step_slots.push_back(sequence.next_slot(pool, c.page_size));
      keep_rows(sequence, k.data(), v.data(), c.q_len, c.heads_kv, d);
      step_k.insert(step_k.end(), k.begin(), k.end());
      step_v.insert(step_v.end(), v.begin(), v.end());
    }
    cache.append(step_k, step_v, step_slots, c.bf16, stream.get());

    std::vector<std::int32_t> table(static_cast<std::size_t>(batch) * max_pages, -1);
    std::vector<std::int32_t> lengths(static_cast<std::size_t>(batch));
    for (int b = 0; b < batch; ++b) {
      const Sequence& sequence = sequences[static_cast<std::size_t>(b)];
      std::copy(sequence.pages.begin(), sequence.pages.end(),
                table.begin() + static_cast<std::ptrdiff_t>(b) * max_pages);
      lengths[static_cast<std::size_t>(b)] = sequence.length;
    }
    table_device.upload(table);
    lengths_device.upload(lengths);
    const std::vector<float> q = random_16bit(q_elements, ++stream_seed, c.bf16);
    q_device.upload(to_16bit(q, c.bf16));
    out_device.fill_bytes(0xFF);
    lse_device.fill_bytes(0xFF);
    PagedDecodeTensors tensors;
    tensors.q =
        TensorView::dense(q_device.get(), dtype, Layout::kBNHD, {batch, c.heads_q, c.q_len, d});
    tensors.out =
        TensorView::dense(out_device.get(), dtype, Layout::kBNHD, {batch, c.heads_q, c.q_len, d});
    tensors.lse = lse_device.as<float>();
    tensors.block_table = table_device.as<int>();
    tensors.seq_lens = lengths_device.as<int>();
    tensors.workspace = workspace.get();
    tensors.workspace_bytes = workspace.bytes();
    paged_decode(cache.cache(), problem, tensors, stream.get(), options);
    stream.synchronize();
    const std::vector<float> out =
        from_16bit(out_device.download_as<std::uint16_t>(q_elements), c.bf16);
    const std::vector<float> lse =
        lse_device.download_as<float>(static_cast<std::size_t>(batch) * c.q_len * c.heads_q);

    const std::size_t per_sequence = static_cast<std::size_t>(c.q_len) * c.heads_q * d;
    for (int b = 0; b < batch; ++b) {
      const std::vector<float> q_b(q.begin() + static_cast<std::ptrdiff_t>(b * per_sequence),
                                   q.begin() + static_cast<std::ptrdiff_t>((b + 1) * per_sequence));
      const DecodeReference reference = decode_reference(
          cache, sequences[static_cast<std::size_t>(b)], q_b, c.q_len, c.heads_q, c.causal);
      const float* out_b = out.data() + b * per_sequence;
      const double model =
          reference::compare(reference.quantized_out.data(), out_b, per_sequence).relative_l2;
      const double original =
          reference::compare(reference.original_out.data(), out_b, per_sequence).relative_l2;
      const double lse_gap = lse_error(
          reference.quantized_lse, lse.data() + static_cast<std::size_t>(b) * c.q_len * c.heads_q,
          static_cast<std::size_t>(c.q_len) * c.heads_q);
      EXPECT_LE(model, model_bound(c.bf16)) << "step " << step << " sequence " << b << " (length "
                                            << sequences[static_cast<std::size_t>(b)].length << ")";
      EXPECT_LE(lse_gap, kLseBound) << "step " << step << " sequence " << b;
      EXPECT_LE(original, original_bound(c.bits)) << "step " << step << " sequence " << b;
      worst_model = std::max(worst_model, model);
      worst_lse = std::max(worst_lse, lse_gap);
      worst_original = std::max(worst_original, original);
    }
  }
  EXPECT_EQ(cache.mismatched_bytes(), 0u) << "the steps' appends differ from the CPU model";
  std::printf(
      "  %s: against the same quantized cache rel. L2 <= %.2e, LSE within %.2e; against "
      "the original K/V rel. L2 <= %.3f%%\n",
      c.name.c_str(), worst_model, worst_lse, 100 * worst_original);
  RecordProperty("relative_l2_quantized_cache", std::to_string(worst_model));
  RecordProperty("relative_l2_original", std::to_string(worst_original));
}

ServingCase serving(std::string name, void (*change)(ServingCase&)) {
  ServingCase c;
  c.name = std::move(name);
  change(c);
  return c;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PagedServingGpu,
    ::testing::Values(
        serving("Int8_Gqa32x8_D128", [](ServingCase&) {}),
        serving("Int4_Gqa32x8_D128", [](ServingCase& c) { c.bits = 4; }),
        serving("Int8_Bf16_Mha4_D64_Page32_Causal4",
                [](ServingCase& c) {
                  c.bf16 = true, c.head_dim = 64, c.heads_q = c.heads_kv = 4, c.page_size = 32;
                  c.q_len = 4, c.causal = true;
                }),
        serving("Int4_Bf16_Gqa8x2_D256_Page64_Causal2",
                [](ServingCase& c) {
                  c.bits = 4, c.bf16 = true, c.head_dim = 256, c.heads_q = 8, c.heads_kv = 2;
                  c.page_size = 64, c.q_len = 2, c.causal = true;
                }),
        serving("Int8_Mqa32x1_D128_Page128",
                [](ServingCase& c) { c.heads_kv = 1, c.page_size = 128; }),
        serving("Int8_Smoothed_KeysWithChannelOffsets", [](ServingCase& c) { c.smooth = true; }),
        serving("Int4_Smoothed_KeysWithChannelOffsets",
                [](ServingCase& c) { c.bits = 4, c.smooth = true; }),
        serving("Int4_Gqa16x4_D64_Causal16",
                [](ServingCase& c) {
                  c.bits = 4, c.head_dim = 64, c.heads_q = 16, c.heads_kv = 4, c.q_len = 16;
                  c.causal = true, c.steps = 3;
                }),
        serving("Int8_Gqa8x2_Causal16_Rows32",
                [](ServingCase& c) {
                  c.heads_q = 8, c.heads_kv = 4, c.q_len = 16, c.causal = true, c.steps = 3;
                }),
        serving("Int8_OneSplit", [](ServingCase& c) { c.num_splits = 1; }),
        serving("Int8_SevenSplits_Stage128_FourStages",
                [](ServingCase& c) {
                  c.num_splits = 7;
                  c.config = {16, 128, 4};
                }),
        serving("Int4_Rows64Config_TwoStages",
                [](ServingCase& c) {
                  c.bits = 4;
                  c.config = {64, 64, 2};
                }),
        // Narrow INT4 at d = 64: two key groups, K's 32-byte rows four to a 128-byte bank row.
        serving("Int4_Bf16_Gqa32x8_D64_Narrow",
                [](ServingCase& c) { c.bits = 4, c.bf16 = true, c.head_dim = 64; }),
        // Four rows fit the narrow block the heuristic picks; the 16-row one still takes them.
        serving("Int4_Bf16_Gqa32x8_D64_WideBlockForFourRows",
                [](ServingCase& c) {
                  c.bits = 4, c.bf16 = true, c.head_dim = 64;
                  c.config = {16, 64, 3};
                })),
    case_name);

// ---- edge cases of one decode ------------------------------------------------------------------

struct SingleDecode {
  int bits = 8;
  int q_len = 1;
  bool causal = false;
  std::vector<int> lengths;  // 0 allowed
  int heads_q = 8, heads_kv = 2, head_dim = 128, page_size = 16;
  int num_splits = 0;
  PagedDecodeConfig config{};
  bool with_lse = true;  // else tensors.lse is null
};

// Fills a cache with `lengths` tokens per sequence (pages from a shuffled pool) and decodes once;
// returns the device's out and LSE with the references.
void check_single_decode(const SingleDecode& s) {
  const std::uint64_t seed = reference::fresh_seed();
  std::printf("  seed %llu\n", static_cast<unsigned long long>(seed));
  const int batch = static_cast<int>(s.lengths.size());
  int longest = 1;
  for (int length : s.lengths) longest = std::max(longest, length);
  const int max_pages = (longest + s.page_size - 1) / s.page_size;
  reference::PagedLayout layout;
  layout.num_pages = batch * max_pages + 3;
  layout.page_size = s.page_size;
  layout.heads_kv = s.heads_kv;
  layout.head_dim = s.head_dim;
  layout.bits = s.bits;
  DeviceCache cache(layout, nullptr);
  PagePool pool(layout.num_pages, seed);
  std::vector<Sequence> sequences(static_cast<std::size_t>(batch));
  std::vector<float> k_all, v_all;
  std::vector<std::int32_t> slots;
  std::uint64_t stream_seed = seed;
  for (int b = 0; b < batch; ++b) {
    const int tokens = s.lengths[static_cast<std::size_t>(b)];
    if (tokens == 0) continue;
    Sequence& sequence = sequences[static_cast<std::size_t>(b)];
    const std::vector<float> k = random_16bit(
        static_cast<std::size_t>(tokens) * s.heads_kv * s.head_dim, ++stream_seed, false);
    const std::vector<float> v = random_16bit(k.size(), ++stream_seed, false);
    for (int t = 0; t < tokens; ++t) slots.push_back(sequence.next_slot(pool, s.page_size));
    keep_rows(sequence, k.data(), v.data(), tokens, s.heads_kv, s.head_dim);
    k_all.insert(k_all.end(), k.begin(), k.end());
    v_all.insert(v_all.end(), v.begin(), v.end());
  }
  Stream stream;
  if (!slots.empty()) cache.append(k_all, v_all, slots, false, stream.get());
  std::vector<std::int32_t> table(static_cast<std::size_t>(batch) * max_pages, -1);
  for (int b = 0; b < batch; ++b) {
    const Sequence& sequence = sequences[static_cast<std::size_t>(b)];
    std::copy(sequence.pages.begin(), sequence.pages.end(),
              table.begin() + static_cast<std::ptrdiff_t>(b) * max_pages);
  }
  DeviceBuffer table_device(table.size() * 4), lengths_device(s.lengths.size() * 4);
  table_device.upload(table);
  lengths_device.upload(s.lengths);
  PagedDecodeProblem problem;
  problem.batch = batch;
  problem.q_len = s.q_len;
  problem.heads_q = s.heads_q;
  problem.max_pages = max_pages;
  problem.max_seq_len = longest;
  problem.causal = s.causal;
  PagedDecodeOptions options;
  options.num_splits = s.num_splits;
  options.config = s.config;
  const std::size_t q_elements = static_cast<std::size_t>(batch) * s.q_len * s.heads_q * s.head_dim;
  const std::vector<float> q = random_16bit(q_elements, ++stream_seed, false);
  DeviceBuffer q_device(q_elements * 2), out_device(q_elements * 2),
      lse_device(static_cast<std::size_t>(batch) * s.q_len * s.heads_q * 4),
      workspace(std::max<std::size_t>(
          256, paged_decode_workspace_bytes(cache.cache(), problem, options)));
  q_device.upload(to_16bit(q, false));
  out_device.fill_bytes(0xFF);
  lse_device.fill_bytes(0xFF);
  PagedDecodeTensors tensors;
  tensors.q = TensorView::dense(q_device.get(), DType::kF16, Layout::kBNHD,
                                {batch, s.heads_q, s.q_len, s.head_dim});
  tensors.out = TensorView::dense(out_device.get(), DType::kF16, Layout::kBNHD,
                                  {batch, s.heads_q, s.q_len, s.head_dim});
  tensors.lse = s.with_lse ? lse_device.as<float>() : nullptr;
  tensors.block_table = table_device.as<int>();
  tensors.seq_lens = lengths_device.as<int>();
  tensors.workspace = workspace.get();
  tensors.workspace_bytes = workspace.bytes();
  paged_decode(cache.cache(), problem, tensors, stream.get(), options);
  stream.synchronize();
  const std::vector<float> out =
      from_16bit(out_device.download_as<std::uint16_t>(q_elements), false);
  const std::vector<float> lse =
      lse_device.download_as<float>(static_cast<std::size_t>(batch) * s.q_len * s.heads_q);
  const std::size_t per_sequence = static_cast<std::size_t>(s.q_len) * s.heads_q * s.head_dim;
  const std::size_t rows = static_cast<std::size_t>(s.q_len) * s.heads_q;
  for (int b = 0; b < batch; ++b) {
    const std::vector<float> q_b(q.begin() + static_cast<std::ptrdiff_t>(b * per_sequence),
                                 q.begin() + static_cast<std::ptrdiff_t>((b + 1) * per_sequence));
    const DecodeReference reference = decode_reference(
        cache, sequences[static_cast<std::size_t>(b)], q_b, s.q_len, s.heads_q, s.causal);
    const float* out_b = out.data() + b * per_sequence;
    EXPECT_LE(reference::compare(reference.quantized_out.data(), out_b, per_sequence).relative_l2,
              model_bound(false))
        << "sequence " << b << " of length " << s.lengths[static_cast<std::size_t>(b)];
    if (s.with_lse) {
      EXPECT_LE(lse_error(reference.quantized_lse, lse.data() + b * rows, rows), kLseBound)
          << "sequence " << b << " of length " << s.lengths[static_cast<std::size_t>(b)];
    }
  }
}

TEST(PagedDecodeGpu, LengthOnePageBoundariesAndEmptySequences) {
  INTFA_REQUIRE_GPU();
  SingleDecode s;
  s.lengths = {1, 0, 15, 16, 17, 32, 48, 64, 0, 1};
  for (int bits : {8, 4}) {
    s.bits = bits;
    check_single_decode(s);
  }
}

TEST(PagedDecodeGpu, RowsThatSeeNoKeyAreZeroWithLseMinusInfinity) {
  INTFA_REQUIRE_GPU();
  // 16 causal queries over sequences shorter than 16: query i of a sequence of length L sees
  // keys up to L - 16 + i, so its first 16 - L rows see none (the reference has them 0, -inf).
  SingleDecode s;
  s.q_len = 16;
  s.causal = true;
  s.lengths = {3, 16, 0, 9};
  check_single_decode(s);
}

TEST(PagedDecodeGpu, EveryPageSizeAndSplitCountGivesTheSameAttention) {
  INTFA_REQUIRE_GPU();
  for (int page_size : {16, 32, 64, 128}) {
    for (int splits : {1, 3, 64}) {
      SingleDecode s;
      s.page_size = page_size;
      s.num_splits = splits;
      s.lengths = {1000, 129, 1};
      check_single_decode(s);
    }
  }
}

// Two splits of a row block run as one thread block cluster on sm_90 and later, which merges them
// in shared memory (paged_decode.cuh, "The cluster's merge"): each block merges rows rank,
// rank + 2, ... of both blocks' states; three take the merge kernel. Every head dim and width; the
// narrow block, and wide ones whose warps merge first (16 and 32 rows: four or two warps share a
// row tile) or not (64 rows: four row tiles, the pipeline's buffers under the cluster's state);
// 16 rows (4 queries) and 64 (16 queries), over several row blocks or part of one; a split left
// empty by the short sequences, an empty sequence, and a call without LSE. The log says which
// merge ran: the clusters wherever paged::splits_may_merge_in_clusters allows them.
TEST(PagedDecodeGpu, SplitsMergedInTheirClusterGiveTheSameAttention) {
  INTFA_REQUIRE_GPU();
  const device::Arch arch = current_arch();
  const std::vector<int> lengths = {700, 129, 1, 0};
  for (int head_dim : {64, 128, 256}) {
    for (int bits : {8, 4}) {
      for (int block_rows : {8, 16, 32, 64}) {
        for (int q_len : {4, 16}) {
          for (int splits : {2, 3}) {
            SingleDecode s;
            s.bits = bits;
            s.head_dim = head_dim;
            s.q_len = q_len;
            s.causal = true;
            s.num_splits = splits;
            s.config = {block_rows, 64, block_rows >= 32 && head_dim < 256 ? 3 : 2};
            s.lengths = lengths;
            s.with_lse = q_len == 4 || splits == 3;
            std::printf("  d=%d, %d bits, %d-row blocks, %d queries, %d splits\n", head_dim, bits,
                        block_rows, q_len, splits);
            const log::ScopedCapture capture;
            check_single_decode(s);
            const paged::PagedSpec spec =
                paged::decode_spec(arch, head_dim, bits, kernels::ElementType::kF16,
                                   kernels::ElementType::kF16, s.config);
            bool clusters_merged = false;
            for (const std::string& line : capture.infos()) {
              clusters_merged |= line.find("the clusters merge") != std::string::npos;
            }
            EXPECT_EQ(clusters_merged, paged::splits_may_merge_in_clusters(spec, splits));
          }
        }
      }
    }
  }
}

// The merge of many splits shares a row's states among thread groups that meet in shared memory
// (launch_merge's merge_state_groups: 9-16 states two groups, 17-32 four, 33-64 eight; at
// d=256, whose block has four row slots, four groups, each taking its states in two rounds of 8
// from 33). The long sequence fills every split (64 x 64 tokens less 5: 64-token stages), the
// short ones leave splits empty (LSE -inf, never read); 5 query heads over one KV head make 15
// rows, so the last block of every group count but d=256's is partly past the rows.
TEST(PagedDecodeGpu, EveryStateGroupCountOfTheMergeGivesTheSameAttention) {
  INTFA_REQUIRE_GPU();
  for (int head_dim : {64, 128, 256}) {
    for (int splits : {9, 20, 40, 64}) {
      SingleDecode s;
      s.head_dim = head_dim;
      s.heads_q = 5;
      s.heads_kv = 1;
      s.num_splits = splits;
      s.lengths = {64 * 64 - 5, 300, 0};
      check_single_decode(s);
    }
  }
}

TEST(PagedDecodeGpu, AWorkspaceSmallerThanTheSplitsNeedIsRefused) {
  INTFA_REQUIRE_GPU();
  reference::PagedLayout layout;
  layout.num_pages = 4;
  layout.heads_kv = 2;
  DeviceCache cache(layout, nullptr);
  PagedDecodeProblem problem;
  problem.batch = 1;
  problem.heads_q = 8;
  problem.max_pages = 4;
  problem.max_seq_len = 64;
  PagedDecodeOptions options;
  options.num_splits = 4;
  DeviceBuffer q(8 * 128 * 2), out(8 * 128 * 2), table(16), lengths(4), workspace(256);
  PagedDecodeTensors tensors;
  tensors.q = TensorView::dense(q.get(), DType::kF16, Layout::kBNHD, {1, 8, 1, 128});
  tensors.out = TensorView::dense(out.get(), DType::kF16, Layout::kBNHD, {1, 8, 1, 128});
  tensors.block_table = table.as<int>();
  tensors.seq_lens = lengths.as<int>();
  tensors.workspace = workspace.get();
  tensors.workspace_bytes = 256;
  try {
    paged_decode(cache.cache(), problem, tensors, nullptr, options);
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& error) {
    EXPECT_EQ(error.field(), "tensors.workspace_bytes");
  }
  EXPECT_GE(paged_decode_workspace_bytes(cache.cache(), problem, options), 4u * 8 * 128 * 4 + 256);
}

// ---- CUDA graphs -----------------------------------------------------------------------------

// A decode step captured once and replayed with new lengths, block tables and queries, in
// `num_splits` splits (0: the heuristic's, more than one here).
void check_captured_decode(int num_splits) {
  const std::uint64_t seed = reference::fresh_seed();
  std::printf("  seed %llu\n", static_cast<unsigned long long>(seed));
  const int batch = 3, heads_q = 16, heads_kv = 4, d = 128, page_size = 16, max_pages = 64;
  reference::PagedLayout layout;
  layout.num_pages = batch * max_pages;
  layout.page_size = page_size;
  layout.heads_kv = heads_kv;
  layout.head_dim = d;
  DeviceCache cache(layout, nullptr);
  PagePool pool(layout.num_pages, seed);
  std::vector<Sequence> sequences(batch);
  Stream stream;
  std::uint64_t stream_seed = seed;
  auto grow = [&](const std::vector<int>& tokens) {
    std::vector<float> k_all, v_all;
    std::vector<std::int32_t> slots;
    for (int b = 0; b < batch; ++b) {
      const int count = tokens[static_cast<std::size_t>(b)];
      if (count == 0) continue;
      const std::vector<float> k =
          random_16bit(static_cast<std::size_t>(count) * heads_kv * d, ++stream_seed, false);
      const std::vector<float> v = random_16bit(k.size(), ++stream_seed, false);
      for (int t = 0; t < count; ++t)
        slots.push_back(sequences[static_cast<std::size_t>(b)].next_slot(pool, page_size));
      keep_rows(sequences[static_cast<std::size_t>(b)], k.data(), v.data(), count, heads_kv, d);
      k_all.insert(k_all.end(), k.begin(), k.end());
      v_all.insert(v_all.end(), v.begin(), v.end());
    }
    cache.append(k_all, v_all, slots, false, stream.get());
  };
  grow({5, 300, 40});

  // Device inputs the graph reads at replay: lengths, block table, queries.
  PagedDecodeProblem problem;
  problem.batch = batch;
  problem.heads_q = heads_q;
  problem.max_pages = max_pages;
  problem.max_seq_len = max_pages * page_size;  // the graph's maximum, fixed at capture
  PagedDecodeOptions options;
  options.num_splits = num_splits;
  const std::size_t q_elements = static_cast<std::size_t>(batch) * heads_q * d;
  DeviceBuffer q_device(q_elements * 2), out_device(q_elements * 2),
      lse_device(batch * heads_q * 4), table_device(batch * max_pages * 4),
      lengths_device(batch * 4),
      workspace(std::max<std::size_t>(
          256, paged_decode_workspace_bytes(cache.cache(), problem, options)));
  ASSERT_GT(paged_decode_splits(cache.cache(), problem, options), 1)
      << "the graph should hold the combine";
  PagedDecodeTensors tensors;
  tensors.q = TensorView::dense(q_device.get(), DType::kF16, Layout::kBNHD, {batch, heads_q, 1, d});
  tensors.out =
      TensorView::dense(out_device.get(), DType::kF16, Layout::kBNHD, {batch, heads_q, 1, d});
  tensors.lse = lse_device.as<float>();
  tensors.block_table = table_device.as<int>();
  tensors.seq_lens = lengths_device.as<int>();
  tensors.workspace = workspace.get();
  tensors.workspace_bytes = workspace.bytes();
  auto upload_state = [&] {
    std::vector<std::int32_t> table(static_cast<std::size_t>(batch) * max_pages, 0);
    std::vector<std::int32_t> lengths(batch);
    for (int b = 0; b < batch; ++b) {
      std::copy(sequences[static_cast<std::size_t>(b)].pages.begin(),
                sequences[static_cast<std::size_t>(b)].pages.end(),
                table.begin() + static_cast<std::ptrdiff_t>(b) * max_pages);
      lengths[static_cast<std::size_t>(b)] = sequences[static_cast<std::size_t>(b)].length;
    }
    table_device.upload(table);
    lengths_device.upload(lengths);
  };
  upload_state();
  // The first call compiles and loads the kernels, which a capture cannot do.
  paged_decode(cache.cache(), problem, tensors, stream.get(), options);
  stream.synchronize();
  const CapturedGraph graph(stream.get(), [&] {
    paged_decode(cache.cache(), problem, tensors, stream.get(), options);
  });

  for (const std::vector<int>& tokens : {std::vector<int>{1, 1, 1}, {700, 0, 17}, {16, 1, 400}}) {
    grow(tokens);
    upload_state();
    const std::vector<float> q = random_16bit(q_elements, ++stream_seed, false);
    q_device.upload(to_16bit(q, false));
    out_device.fill_bytes(0xFF);
    graph.launch(stream.get());
    stream.synchronize();
    const std::vector<float> out =
        from_16bit(out_device.download_as<std::uint16_t>(q_elements), false);
    const std::vector<float> lse = lse_device.download_as<float>(batch * heads_q);
    const std::size_t per_sequence = static_cast<std::size_t>(heads_q) * d;
    for (int b = 0; b < batch; ++b) {
      const std::vector<float> q_b(q.begin() + static_cast<std::ptrdiff_t>(b * per_sequence),
                                   q.begin() + static_cast<std::ptrdiff_t>((b + 1) * per_sequence));
      const DecodeReference reference =
          decode_reference(cache, sequences[static_cast<std::size_t>(b)], q_b, 1, heads_q, false);
      EXPECT_LE(reference::compare(reference.quantized_out.data(), out.data() + b * per_sequence,
                                   per_sequence)
                    .relative_l2,
                model_bound(false))
          << "sequence " << b << " of length " << sequences[static_cast<std::size_t>(b)].length;
      EXPECT_LE(lse_error(reference.quantized_lse, lse.data() + b * heads_q, heads_q), kLseBound);
    }
  }
}

TEST(PagedDecodeGpu, ADecodeStepCapturedInAGraphReplaysWithNewLengths) {
  INTFA_REQUIRE_GPU();
  check_captured_decode(0);
}

// Two splits: on sm_90 the row blocks' clusters merge them (paged_decode.cuh, "The cluster's
// merge"), a launch with a cluster dimension in the graph.
TEST(PagedDecodeGpu, TwoSplitsMergedInTheirClustersReplayInAGraph) {
  INTFA_REQUIRE_GPU();
  check_captured_decode(2);
}

// ---- append
// ---------------------------------------------------------------------------------------

struct AppendCase {
  int bits, head_dim;
  bool bf16;
  bool smooth;
};

void PrintTo(const AppendCase& c, std::ostream* os) {
  *os << c.bits << " bits, d" << c.head_dim << (c.bf16 ? ", bf16" : ", f16")
      << (c.smooth ? ", smoothed" : "");
}

class PagedAppendGpu : public ::testing::TestWithParam<AppendCase> {};

TEST_P(PagedAppendGpu, WritesExactlyTheModelsBytesAndSkipsNegativeSlots) {
  INTFA_REQUIRE_GPU();
  const AppendCase c = GetParam();
  const std::uint64_t seed = reference::fresh_seed();
  std::printf("  seed %llu\n", static_cast<unsigned long long>(seed));
  reference::PagedLayout layout;
  layout.num_pages = 9;
  layout.page_size = 32;
  layout.heads_kv = 3;
  layout.head_dim = c.head_dim;
  layout.bits = c.bits;
  const std::vector<float> offset =
      random_16bit(static_cast<std::size_t>(3) * c.head_dim, seed, false);
  DeviceCache cache(layout, c.smooth ? &offset : nullptr);
  // 100 tokens into random distinct slots, every fifth one padding; magnitudes 1e-7 .. 1e3, the
  // smallest INT4 groups' FP16 scales subnormal (where the rounded scale no longer bounds the
  // values: the kernel must clamp them as the model does).
  const int tokens = 100;
  std::vector<std::int32_t> slots(9 * 32);
  for (int i = 0; i < 9 * 32; ++i) slots[static_cast<std::size_t>(i)] = i;
  std::shuffle(slots.begin(), slots.end(), std::mt19937_64(seed));
  slots.resize(tokens);
  for (int i = 0; i < tokens; i += 5) slots[static_cast<std::size_t>(i)] = -1;
  std::vector<float> k =
      random_16bit(static_cast<std::size_t>(tokens) * 3 * c.head_dim, seed + 1, c.bf16);
  std::vector<float> v = random_16bit(k.size(), seed + 2, c.bf16);
  for (std::size_t i = 0; i < k.size(); ++i) {
    const float magnitude = std::pow(10.0f, static_cast<float>(i / c.head_dim % 11) - 7.0f);
    k[i] = reference::round_to_16bit(k[i] * magnitude, c.bf16);
    v[i] = reference::round_to_16bit(v[i] * magnitude, c.bf16);
  }
  Stream stream;
  cache.append(k, v, slots, c.bf16, stream.get());
  EXPECT_EQ(cache.mismatched_bytes(), 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PagedAppendGpu,
    ::testing::Values(AppendCase{8, 128, false, false}, AppendCase{8, 64, true, true},
                      AppendCase{8, 256, false, false}, AppendCase{4, 128, false, true},
                      AppendCase{4, 64, true, false}, AppendCase{4, 256, true, false}),
    [](const ::testing::TestParamInfo<AppendCase>& param) {
      const AppendCase& c = param.param;
      return std::string(c.bits == 8 ? "Int8" : "Int4") + "_D" + std::to_string(c.head_dim) +
             (c.bf16 ? "_Bf16" : "_F16") + (c.smooth ? "_Smoothed" : "");
    });

}  // namespace
}  // namespace intfa::testing
