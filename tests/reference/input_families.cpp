#include "reference/input_families.hpp"

#include <algorithm>
#include <numeric>
#include <random>

#include "intfa/errors.hpp"
#include "reference/half.hpp"
#include "reference/parallel_heads.hpp"

namespace intfa::reference {
namespace {

constexpr float kOffsetSigmas = 4.0f;    // per-channel key offsets: 4 * N(0, 1)
constexpr int kOutlierChannels = 4;      // channels of Q and K (or V) ...
constexpr float kOutlierFactor = 10.0f;  // ... this much larger than the rest
constexpr float kSharpFactor = 1.7f;     // Q and K scaled: scores 1.7^2 = 2.89x wider

bool has_offsets(InputFamily family) {
  return family == InputFamily::kKeyOffsets || family == InputFamily::kOffsetsAndOutliers ||
         family == InputFamily::kSharpOffsetsAndOutliers;
}

bool has_qk_outliers(InputFamily family) {
  return family == InputFamily::kOutlierChannels || family == InputFamily::kOffsetsAndOutliers ||
         family == InputFamily::kSharpOffsetsAndOutliers;
}

bool is_sharp(InputFamily family) {
  return family == InputFamily::kSharp || family == InputFamily::kSharpOffsetsAndOutliers;
}

// kOutlierChannels distinct channels of [0, head_dim) for each of `heads` heads, drawn from seed.
std::vector<int> outlier_channels(int heads, int head_dim, std::uint64_t seed) {
  std::mt19937_64 generator(seed);
  std::vector<int> chosen;
  std::vector<int> channels(static_cast<std::size_t>(head_dim));
  for (int h = 0; h < heads; ++h) {
    std::iota(channels.begin(), channels.end(), 0);
    std::shuffle(channels.begin(), channels.end(), generator);
    const int count = std::min(kOutlierChannels, head_dim);
    chosen.insert(chosen.end(), channels.begin(), channels.begin() + count);
  }
  return chosen;
}

// Multiplies the chosen channels of every row of [batch * heads][seq][head_dim] `values` by
// `factor`; query head h of a GQA group uses the channels of its KV head. `even_heads_only`: only
// the rows of KV heads with an even index (kOutlierHeads).
void scale_channels(std::vector<float>& values, const Shape& shape, int heads, int seq,
                    const std::vector<int>& channels, float factor, bool even_heads_only = false) {
  const std::size_t dim = static_cast<std::size_t>(shape.head_dim);
  const int group = heads / shape.heads_kv;
  const std::size_t per_head = static_cast<std::size_t>(std::min(kOutlierChannels, shape.head_dim));
  for (std::size_t b = 0; b < static_cast<std::size_t>(shape.batch); ++b) {
    for (int h = 0; h < heads; ++h) {
      const std::size_t kv_head = b * shape.heads_kv + static_cast<std::size_t>(h / group);
      if (even_heads_only && kv_head % 2 != 0) continue;
      const std::size_t head = b * heads + static_cast<std::size_t>(h);
      for (std::size_t n = 0; n < static_cast<std::size_t>(seq); ++n) {
        float* row = values.data() + (head * seq + n) * dim;
        for (std::size_t i = 0; i < per_head; ++i) row[channels[kv_head * per_head + i]] *= factor;
      }
    }
  }
}

}  // namespace

const std::vector<InputFamily>& all_input_families() {
  static const std::vector<InputFamily> families = {InputFamily::kNormal,
                                                    InputFamily::kUniform,
                                                    InputFamily::kKeyOffsets,
                                                    InputFamily::kOutlierChannels,
                                                    InputFamily::kSharp,
                                                    InputFamily::kOffsetsAndOutliers,
                                                    InputFamily::kSharpOffsetsAndOutliers,
                                                    InputFamily::kValueOutliers,
                                                    InputFamily::kOutlierHeads};
  return families;
}

std::string family_name(InputFamily family) {
  switch (family) {
    case InputFamily::kNormal:
      return "normal";
    case InputFamily::kUniform:
      return "uniform";
    case InputFamily::kKeyOffsets:
      return "k_offset";
    case InputFamily::kOutlierChannels:
      return "outliers";
    case InputFamily::kSharp:
      return "sharp";
    case InputFamily::kOffsetsAndOutliers:
      return "offset_outliers";
    case InputFamily::kSharpOffsetsAndOutliers:
      return "sharp_offset_outliers";
    case InputFamily::kValueOutliers:
      return "v_outliers";
    case InputFamily::kOutlierHeads:
      return "outlier_heads";
  }
  throw InternalError("unknown InputFamily");
}

std::string family_description(InputFamily family) {
  switch (family) {
    case InputFamily::kNormal:
      return "N(0,1)";
    case InputFamily::kUniform:
      return "U(-0.5,0.5)";
    case InputFamily::kKeyOffsets:
      return "K + per-channel offset 4 sigma";
    case InputFamily::kOutlierChannels:
      return "4 channels of Q, K x10";
    case InputFamily::kSharp:
      return "sharp (Q, K x1.7)";
    case InputFamily::kOffsetsAndOutliers:
      return "offset + outliers";
    case InputFamily::kSharpOffsetsAndOutliers:
      return "sharp + offset + outliers";
    case InputFamily::kValueOutliers:
      return "4 channels of V x10";
    case InputFamily::kOutlierHeads:
      return "outliers in half the heads";
  }
  throw InternalError("unknown InputFamily");
}

InputFamily parse_family(const std::string& name) {
  std::string names;
  for (InputFamily family : all_input_families()) {
    if (family_name(family) == name) return family;
    names += (names.empty() ? "" : ", ") + family_name(family);
  }
  throw InvalidArgument("family", name, "expected one of " + names);
}

AttentionInputValues make_inputs(InputFamily family, const Shape& shape, std::uint64_t seed,
                                 bool bf16) {
  shape.validate();
  const Distribution distribution =
      family == InputFamily::kUniform ? Distribution::kUniformHalf : Distribution::kNormal;
  AttentionInputValues inputs;
  inputs.q = random_values(shape.q_elements(), distribution, seed);
  inputs.k = random_values(shape.kv_elements(), distribution, seed + 1);
  inputs.v = random_values(shape.kv_elements(), distribution, seed + 2);
  const std::size_t dim = static_cast<std::size_t>(shape.head_dim);
  const int kv_heads = shape.batch * shape.heads_kv;
  if (has_qk_outliers(family)) {
    const std::vector<int> channels = outlier_channels(kv_heads, shape.head_dim, seed + 3);
    scale_channels(inputs.q, shape, shape.heads_q, shape.seq_q, channels, kOutlierFactor);
    scale_channels(inputs.k, shape, shape.heads_kv, shape.seq_kv, channels, kOutlierFactor);
  }
  if (family == InputFamily::kOutlierHeads) {
    const std::vector<int> channels = outlier_channels(kv_heads, shape.head_dim, seed + 3);
    scale_channels(inputs.q, shape, shape.heads_q, shape.seq_q, channels, kOutlierFactor, true);
    scale_channels(inputs.k, shape, shape.heads_kv, shape.seq_kv, channels, kOutlierFactor, true);
  }
  if (family == InputFamily::kValueOutliers) {
    const std::vector<int> channels = outlier_channels(kv_heads, shape.head_dim, seed + 3);
    scale_channels(inputs.v, shape, shape.heads_kv, shape.seq_kv, channels, kOutlierFactor);
  }
  if (is_sharp(family)) {
    for (std::vector<float>* values : {&inputs.q, &inputs.k}) {
      for (float& value : *values) value *= kSharpFactor;
    }
  }
  if (has_offsets(family)) {
    const std::vector<float> offsets =
        random_values(static_cast<std::size_t>(kv_heads) * dim, Distribution::kNormal, seed + 4);
    const std::size_t seq = static_cast<std::size_t>(shape.seq_kv);
    for (std::size_t head = 0; head < static_cast<std::size_t>(kv_heads); ++head) {
      for (std::size_t n = 0; n < seq; ++n) {
        for (std::size_t c = 0; c < dim; ++c) {
          inputs.k[(head * seq + n) * dim + c] += kOffsetSigmas * offsets[head * dim + c];
        }
      }
    }
  }
  // On every core: a B=4 H=32 N=16k problem has 800 M values.
  for (std::vector<float>* values : {&inputs.q, &inputs.k, &inputs.v}) {
    for_each_chunk_in_parallel(values->size(), std::size_t{1} << 20,
                               [&](std::size_t, std::size_t begin, std::size_t end) {
                                 for (std::size_t i = begin; i < end; ++i) {
                                   (*values)[i] = round_to_16bit((*values)[i], bf16);
                                 }
                               });
  }
  return inputs;
}

}  // namespace intfa::reference
