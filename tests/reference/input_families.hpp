// Inputs shaped like those real models produce (issue 25), for the accuracy tables
// (intfa_accuracy_model, bench/accuracy.py mirrors them), the CPU tests that pin the defaults'
// accuracy, and the GPU checks: keys with large per-channel offsets, a few channels of Q and K an
// order of magnitude larger than the rest, sharply attending heads, and their combinations.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reference/reference.hpp"

namespace intfa::reference {

enum class InputFamily {
  kNormal,              // Q, K, V ~ N(0, 1)
  kUniform,             // Q, K, V ~ U(-0.5, 0.5)
  kKeyOffsets,          // N(0, 1), K plus a per-(batch, head, channel) offset 4 * N(0, 1) shared by
                        // every token (the offsets real keys carry)
  kOutlierChannels,     // N(0, 1), 4 channels of Q and K (the same 4 per KV head) 10x larger
  kSharp,               // N(0, 1) with Q and K scaled 1.7x: scores 2.9x wider, sharp attention
  kOffsetsAndOutliers,  // kKeyOffsets and kOutlierChannels together
  kSharpOffsetsAndOutliers,  // all three
  kValueOutliers,            // N(0, 1), 4 channels of V 10x larger
  // kOutlierChannels in half the heads: KV heads b * heads_kv + h with an even index (and their
  // query heads), the others N(0, 1). A layer whose heads differ, which automatic rotation
  // decides head by head.
  kOutlierHeads,
};

const std::vector<InputFamily>& all_input_families();
std::string family_name(InputFamily family);  // "normal", "k_offset", ... (parse_family's names)
std::string family_description(InputFamily family);  // "K + per-channel offset 4 sigma", ...
// The family of `name`; throws InvalidArgument("family", name, the names) otherwise.
InputFamily parse_family(const std::string& name);

// Q [batch][heads_q][seq_q][head_dim], K and V [batch][heads_kv][seq_kv][head_dim], dense, each
// value rounded to FP16 (or BF16) as the GPU sees it. Deterministic for a seed.
struct AttentionInputValues {
  std::vector<float> q, k, v;
};
AttentionInputValues make_inputs(InputFamily family, const Shape& shape, std::uint64_t seed,
                                 bool bf16 = false);

}  // namespace intfa::reference
