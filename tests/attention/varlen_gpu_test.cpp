// Varlen (packed) attention against per-sequence runs: sequences of mixed lengths, length 1 and
// empty ones next to each other, are packed, quantized (Q and K as one packed tensor, V with
// quantize_v_varlen) and attended in one call; then each sequence alone goes through the dense
// path. Each sequence is quantized exactly as the dense path quantizes it and the kernel does the
// same arithmetic on it, so the outputs and LSEs must be identical; a sequence with queries but
// no keys must come out zero with an LSE of -inf. The one 16-bit call (attention_forward_16bit) of
// the packed inputs must give the packed call's bits too (on sm_90a the Hopper kernel quantizes Q
// itself there). Each case runs under the heuristic's config (on sm_90a the Hopper kernel) and the
// portable kernel's. Skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <ostream>
#include <string>
#include <vector>

#include "device/device_info.hpp"
#include "intfa/attention.hpp"
#include "intfa/quantize.hpp"
#include "reference/half.hpp"
#include "reference/reference.hpp"
#include "spec/attention_spec.hpp"
#include "support/gpu.hpp"

namespace intfa {
namespace {

using testing::DeviceBuffer;
using testing::Stream;

struct VarlenCase {
  const char* name;
  Variant variant;
  bool causal;
  int heads_q, heads_kv, head_dim, qk_bits;
  VScaleGranularity granularity;
  PEncoding p_encoding;
  PScaleReference p_scale;
  std::vector<int> q_lengths, kv_lengths;
};

// GetParam(): the sequences and the problem (the numerics options are in the test's name).
void PrintTo(const VarlenCase& c, std::ostream* os) {
  const auto list = [](const std::vector<int>& lengths) {
    std::string text;
    for (int length : lengths) text += (text.empty() ? "" : ",") + std::to_string(length);
    return text;
  };
  *os << (c.variant == Variant::kFullInt8 ? "full INT8" : "half INT8") << " Hq=" << c.heads_q
      << " Hkv=" << c.heads_kv << " D=" << c.head_dim << " Q.K INT" << c.qk_bits
      << (c.causal ? " causal" : "") << " Nq=" << list(c.q_lengths)
      << " Nkv=" << list(c.kv_lengths);
}

std::vector<int> prefix_sums(const std::vector<int>& lengths) {
  std::vector<int> offsets(lengths.size() + 1, 0);
  std::partial_sum(lengths.begin(), lengths.end(), offsets.begin() + 1);
  return offsets;
}

int longest(const std::vector<int>& lengths) {
  return *std::max_element(lengths.begin(), lengths.end());
}

DeviceBuffer upload_bits(const std::vector<std::uint16_t>& bits) {
  DeviceBuffer buffer(bits.size() * 2);
  buffer.upload(bits);
  return buffer;
}

// The quantized inputs and the output of one attention call over rows [heads][rows][dim] in BNHD
// (packed: batch 1, all rows; dense: one sequence), from 16-bit rows `q` and `kv` already laid
// out in BNHD.
struct Call {
  DeviceBuffer q16, k16, v16, q8, k8, v8, q_scale, k_scale, v_scale, out, lse;
  AttentionTensors tensors;
};

void quantize_and_attend(const VarlenCase& c, const AttentionProblem& problem, int q_rows,
                         int kv_rows, const std::vector<std::uint16_t>& q,
                         const std::vector<std::uint16_t>& k, const std::vector<std::uint16_t>& v,
                         const VarlenLayout* varlen, const KernelConfig& config, Call& call,
                         CUstream stream) {
  const int d = c.head_dim;
  const TensorShape q_shape{1, c.heads_q, q_rows, d};
  const TensorShape kv_shape{1, c.heads_kv, kv_rows, d};
  call.q16 = upload_bits(q);
  call.k16 = upload_bits(k);
  call.v16 = upload_bits(v);
  const DType qk_type = c.qk_bits == 8 ? DType::kI8 : DType::kI4x2;
  call.q8 = DeviceBuffer(static_cast<std::size_t>(q_rows) * c.heads_q * d * c.qk_bits / 8);
  call.k8 = DeviceBuffer(static_cast<std::size_t>(kv_rows) * c.heads_kv * d * c.qk_bits / 8);
  call.q_scale = DeviceBuffer(static_cast<std::size_t>(q_rows) * c.heads_q * 4);
  call.k_scale = DeviceBuffer(static_cast<std::size_t>(kv_rows) * c.heads_kv * 4);
  AttentionTensors& t = call.tensors;
  t.q = TensorView::dense(call.q8.get(), qk_type, Layout::kBNHD, q_shape);
  t.k = TensorView::dense(call.k8.get(), qk_type, Layout::kBNHD, kv_shape);
  QuantizeOptions bits;
  bits.bits = c.qk_bits;
  quantize_qk(q_shape, TensorView::dense(call.q16.get(), DType::kF16, Layout::kBNHD, q_shape), t.q,
              call.q_scale.as<float>(), stream, bits);
  quantize_qk(kv_shape, TensorView::dense(call.k16.get(), DType::kF16, Layout::kBNHD, kv_shape),
              t.k, call.k_scale.as<float>(), stream, bits);
  const TensorView v_view = TensorView::dense(call.v16.get(), DType::kF16, Layout::kBNHD, kv_shape);
  if (c.variant == Variant::kFullInt8) {
    const int batch = problem.batch;
    call.v8 = DeviceBuffer(v_int8_bytes(batch, c.heads_kv, problem.seq_kv, d));
    call.v_scale = DeviceBuffer(v_scale_count(c.granularity, batch, c.heads_kv, problem.seq_kv, d) *
                                sizeof(float));
    const TensorShape v_shape{batch, c.heads_kv, problem.seq_kv, d};
    if (varlen != nullptr) {
      quantize_v_varlen(v_shape, v_view, varlen->total_kv, varlen->cu_seqlens_kv, call.v8.get(),
                        call.v_scale.as<float>(), c.granularity, stream);
    } else {
      quantize_v(v_shape, v_view, call.v8.get(), call.v_scale.as<float>(), c.granularity, stream);
    }
    t.v = v_int8_view(call.v8.get(), batch, c.heads_kv, problem.seq_kv, d);
    t.v_scale = call.v_scale.as<float>();
  } else {
    t.v = v_view;
  }
  t.q_scale = call.q_scale.as<float>();
  t.k_scale = call.k_scale.as<float>();
  call.out = DeviceBuffer(static_cast<std::size_t>(q_rows) * c.heads_q * d * 2);
  call.out.fill_bytes(0xFF);  // NaN: an element the kernel does not write cannot pass
  call.lse = DeviceBuffer(static_cast<std::size_t>(q_rows) * c.heads_q * 4);
  call.lse.fill_bytes(0xFF);
  t.out = TensorView::dense(call.out.get(), DType::kF16, Layout::kBNHD, q_shape);
  t.lse = call.lse.as<float>();
  if (varlen != nullptr) t.varlen = *varlen;
  AttentionOptions options;
  options.numerics.v_granularity = c.granularity;
  options.numerics.p_encoding = c.p_encoding;
  options.numerics.p_scale = c.p_scale;
  options.config = config;
  attention_forward(problem, t, stream, options);
}

// Rows [first, first + count) of every head of a BNHD [rows][heads][dim] array.
std::vector<std::uint16_t> rows_of(const std::vector<std::uint16_t>& packed, int heads, int dim,
                                   int first, int count) {
  const std::size_t row = static_cast<std::size_t>(heads) * dim;
  return std::vector<std::uint16_t>(packed.begin() + first * row,
                                    packed.begin() + (first + count) * row);
}

// One packed call of case `c` under `config`, and each sequence's own dense call under the same
// config: the outputs and LSEs must be the same bits.
void expect_packed_matches_dense(const VarlenCase& c, const KernelConfig& config,
                                 const std::vector<std::uint16_t>& q,
                                 const std::vector<std::uint16_t>& k,
                                 const std::vector<std::uint16_t>& v,
                                 const std::vector<int>& q_offsets,
                                 const std::vector<int>& kv_offsets, Stream& stream) {
  const int batch = static_cast<int>(c.q_lengths.size());
  const int total_q = q_offsets.back(), total_kv = kv_offsets.back();
  const int d = c.head_dim;
  DeviceBuffer cu_q(q_offsets.size() * 4), cu_kv(kv_offsets.size() * 4);
  cu_q.upload(q_offsets);
  cu_kv.upload(kv_offsets);
  const VarlenLayout varlen{cu_q.as<int>(), cu_kv.as<int>(), total_q, total_kv};
  AttentionProblem packed_problem{
      batch, c.heads_q, c.heads_kv, longest(c.q_lengths), longest(c.kv_lengths), d, c.causal};
  packed_problem.variant = c.variant;
  packed_problem.qk_bits = c.qk_bits;

  Call packed;
  quantize_and_attend(c, packed_problem, total_q, total_kv, q, k, v, &varlen, config, packed,
                      stream.get());
  stream.synchronize();
  const auto out =
      packed.out.download_as<std::uint16_t>(static_cast<std::size_t>(total_q) * c.heads_q * d);
  const auto lse = packed.lse.download_as<float>(static_cast<std::size_t>(total_q) * c.heads_q);

  // The one 16-bit call of the same packed inputs (where the Hopper kernel serves it, Q quantized
  // in the kernel, from each sequence's rows): the same bits.
  {
    SCOPED_TRACE("attention_forward_16bit");
    const TensorShape q_shape{1, c.heads_q, total_q, d};
    const TensorShape kv_shape{1, c.heads_kv, total_kv, d};
    DeviceBuffer one_out(static_cast<std::size_t>(total_q) * c.heads_q * d * 2),
        one_lse(static_cast<std::size_t>(total_q) * c.heads_q * 4),
        workspace(std::max<std::size_t>(1, attention_workspace_bytes(packed_problem, varlen)));
    one_out.fill_bytes(0xFF);
    one_lse.fill_bytes(0xFF);
    AttentionInputs inputs;
    inputs.q = TensorView::dense(packed.q16.get(), DType::kF16, Layout::kBNHD, q_shape);
    inputs.k = TensorView::dense(packed.k16.get(), DType::kF16, Layout::kBNHD, kv_shape);
    inputs.v = TensorView::dense(packed.v16.get(), DType::kF16, Layout::kBNHD, kv_shape);
    inputs.out = TensorView::dense(one_out.get(), DType::kF16, Layout::kBNHD, q_shape);
    inputs.lse = one_lse.as<float>();
    inputs.varlen = varlen;
    AttentionOptions options;
    options.smooth_k = false;
    options.rotate_qk = QKRotation::kOff;
    options.numerics.v_granularity = c.granularity;
    options.numerics.p_encoding = c.p_encoding;
    options.numerics.p_scale = c.p_scale;
    options.config = config;
    attention_forward_16bit(packed_problem, inputs, workspace.get(), workspace.bytes(),
                            stream.get(), options);
    stream.synchronize();
    EXPECT_TRUE(one_out.download_as<std::uint16_t>(out.size()) == out)
        << "outputs differ from the packed call on quantize_qk's Q";
    const auto one_lse_values = one_lse.download_as<float>(lse.size());
    EXPECT_EQ(std::memcmp(one_lse_values.data(), lse.data(), lse.size() * sizeof(float)), 0)
        << "LSEs differ from the packed call on quantize_qk's Q";
  }

  for (int b = 0; b < batch; ++b) {
    const int n_q = c.q_lengths[b], n_kv = c.kv_lengths[b];
    SCOPED_TRACE("sequence " + std::to_string(b) + " (" + std::to_string(n_q) + " queries, " +
                 std::to_string(n_kv) + " keys)");
    if (n_q == 0) continue;
    std::vector<std::uint16_t> expected_out(static_cast<std::size_t>(n_q) * c.heads_q * d, 0);
    std::vector<float> expected_lse(static_cast<std::size_t>(n_q) * c.heads_q,
                                    -std::numeric_limits<float>::infinity());
    if (n_kv > 0) {
      AttentionProblem one{1, c.heads_q, c.heads_kv, n_q, n_kv, d, c.causal};
      one.variant = c.variant;
      one.qk_bits = c.qk_bits;
      Call dense;
      quantize_and_attend(c, one, n_q, n_kv, rows_of(q, c.heads_q, d, q_offsets[b], n_q),
                          rows_of(k, c.heads_kv, d, kv_offsets[b], n_kv),
                          rows_of(v, c.heads_kv, d, kv_offsets[b], n_kv), nullptr, config, dense,
                          stream.get());
      stream.synchronize();
      expected_out = dense.out.download_as<std::uint16_t>(expected_out.size());
      expected_lse = dense.lse.download_as<float>(expected_lse.size());
    }
    const std::size_t row = static_cast<std::size_t>(c.heads_q) * d;
    std::size_t different = 0;
    for (std::size_t i = 0; i < expected_out.size(); ++i) {
      different += out[q_offsets[b] * row + i] != expected_out[i];
    }
    EXPECT_EQ(different, 0u) << "output elements that differ from the dense run, of "
                             << expected_out.size();
    std::size_t lse_different = 0;
    for (int h = 0; h < c.heads_q; ++h) {
      for (int n = 0; n < n_q; ++n) {
        const float got = lse[static_cast<std::size_t>(h) * total_q + q_offsets[b] + n];
        const float want = expected_lse[static_cast<std::size_t>(h) * n_q + n];
        lse_different += std::memcmp(&got, &want, sizeof got) != 0;
      }
    }
    EXPECT_EQ(lse_different, 0u) << "LSE values that differ from the dense run";
  }
}

class VarlenGpu : public ::testing::TestWithParam<VarlenCase> {};

TEST_P(VarlenGpu, EverySequenceMatchesItsOwnDenseRun) {
  INTFA_REQUIRE_GPU();
  const VarlenCase& c = GetParam();
  const std::vector<int> q_offsets = prefix_sums(c.q_lengths);
  const std::vector<int> kv_offsets = prefix_sums(c.kv_lengths);
  const int total_q = q_offsets.back(), total_kv = kv_offsets.back();
  const std::uint64_t seed = reference::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  auto random_bits = [&](std::size_t count, std::uint64_t stream_seed) {
    const std::vector<float> values =
        reference::random_values(count, reference::Distribution::kNormal, stream_seed);
    std::vector<std::uint16_t> bits(count);
    for (std::size_t i = 0; i < count; ++i) bits[i] = reference::float_to_f16_bits(values[i]);
    return bits;
  };
  const int d = c.head_dim;
  const auto q = random_bits(static_cast<std::size_t>(total_q) * c.heads_q * d, seed);
  const auto k = random_bits(static_cast<std::size_t>(total_kv) * c.heads_kv * d, seed + 1);
  const auto v = random_bits(static_cast<std::size_t>(total_kv) * c.heads_kv * d, seed + 2);

  Stream stream;
  attention::SpecRequest request;
  request.arch = device::cached_device_info(device::current_device()).arch;
  request.head_dim = d;
  request.variant = c.variant;
  request.qk_bits = c.qk_bits;
  request.causal = c.causal;
  request.numerics.v_granularity = c.granularity;
  // The packed call's config, also used by the dense calls it is compared with bit for bit: the
  // heuristic's (the Hopper kernel on sm_90a, for 8-bit Q.K) and the portable kernel's.
  request.varlen = true;
  std::vector<KernelConfig> configs = {attention::heuristic_config(request)};
  if (attention::portable_heuristic_config(request) != configs[0]) {
    configs.push_back(attention::portable_heuristic_config(request));
  }
  for (const KernelConfig& config : configs) {
    SCOPED_TRACE("config " + config.to_string());
    expect_packed_matches_dense(c, config, q, k, v, q_offsets, kv_offsets, stream);
  }
}

const VarlenCase kCases[] = {
    {"FullGqaSelfAttention",
     Variant::kFullInt8,
     false,
     8,
     2,
     128,
     8,
     VScaleGranularity::kPerChannel,
     PEncoding::kUnsigned255,
     PScaleReference::kTileMax,
     {1, 0, 0, 77, 130, 64, 1, 200},
     {1, 0, 0, 77, 130, 64, 1, 200}},
    {"FullCausalCrossLengthsPerBlockV",
     Variant::kFullInt8,
     true,
     4,
     4,
     64,
     8,
     VScaleGranularity::kPerBlock,
     PEncoding::kSigned127,
     PScaleReference::kRunningMax,
     {3, 0, 100, 17, 1, 300},
     {50, 7, 0, 17, 300, 65}},
    {"HalfCausalSelfAttention",
     Variant::kHalfInt8,
     true,
     4,
     2,
     128,
     8,
     VScaleGranularity::kPerTensor,
     PEncoding::kUnsigned255,
     PScaleReference::kTileMax,
     {129, 1, 0, 64, 250},
     {129, 1, 0, 64, 250}},
    {"FullInt4CausalPerTensor",
     Variant::kFullInt8,
     true,
     2,
     1,
     128,
     4,
     VScaleGranularity::kPerTensor,
     PEncoding::kUnsigned255,
     PScaleReference::kTileMax,
     {40, 0, 1, 97},
     {40, 0, 1, 97}},
};

INSTANTIATE_TEST_SUITE_P(Cases, VarlenGpu, ::testing::ValuesIn(kCases),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

}  // namespace
}  // namespace intfa
