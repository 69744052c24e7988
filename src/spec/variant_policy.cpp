#include "spec/variant_policy.hpp"

#include <string>

#include "spec/seq_bucket.hpp"

namespace intfa::attention {
namespace {

// One row: half INT8 up to `half_up_to` tokens (a sequence bucket; 0: never), full INT8 beyond.
// Half INT8 is the more accurate (0.87-0.92% against 1.39-1.43% on N(0,1), and within the issue's
// 1.5% on every input family with automatic rotation, where full INT8 misses it at d=64), so a
// row takes it wherever it is at least 0.95x the speed of full INT8 end to end.
struct VariantRow {
  int head_dim;
  bool causal;
  int half_up_to;
};

// sm_90a, from `compare_sdpa.py` on the H200 (2026-11-29 08:25, interleaved, B=4 H=32; TOPS of
// intfa.attention full / half INT8, bench/history/2026-11-29.md, third session):
//   d=64:  1k 219/247, 4k 402/414, 16k 489/485; causal 138/169, 331/355, 446/476: half.
//   d=128: 1k 314/356, 4k 613/599, 16k 743/682: half to 2k (4k: full 2% ahead, and accurate
//          enough at d=128); causal 183/219, 471/501, 654/646: half to 8k.
//   d=256: not measured: full INT8, the default before this table.
constexpr VariantRow kSm90aRows[] = {
    {64, false, tune::kMaxSeqBucket},
    {64, true, tune::kMaxSeqBucket},
    {128, false, 2048},
    {128, true, 8192},
    {256, false, 0},
    {256, true, 0},
};

std::string bucket_text(int tokens) {
  return std::to_string(tokens / 1024) + "k";
}

std::string row_text(const VariantRow& row) {
  const std::string where = "d=" + std::to_string(row.head_dim) + (row.causal ? " causal" : "");
  if (row.half_up_to == 0) return where + ": full INT8";
  if (row.half_up_to >= tune::kMaxSeqBucket) return where + ": half INT8";
  return where + ": half INT8 up to " + bucket_text(row.half_up_to) + " tokens, full INT8 beyond";
}

}  // namespace

VariantChoice choose_variant(device::Arch arch, int head_dim, int seq_q, int seq_kv, bool causal) {
  VariantChoice choice;
  if (arch != device::Arch::kSm90a) {
    choice.reason = "no table for " + device::arch_name(arch) + ": full INT8";
    return choice;
  }
  const int bucket = tune::seq_bucket(seq_q, seq_kv);
  for (const VariantRow& row : kSm90aRows) {
    if (row.head_dim != head_dim || row.causal != causal) continue;
    choice.variant = bucket <= row.half_up_to ? Variant::kHalfInt8 : Variant::kFullInt8;
    choice.reason = "sm_90a " + row_text(row) + " (bucket " + bucket_text(bucket) + ")";
    return choice;
  }
  choice.reason = "sm_90a d=" + std::to_string(head_dim) + ": not in the table, full INT8";
  return choice;
}

std::string variant_policy_text(device::Arch arch) {
  if (arch != device::Arch::kSm90a) {
    return "variant auto on " + device::arch_name(arch) + ": full INT8 (no table)\n";
  }
  std::string text;
  for (const VariantRow& row : kSm90aRows) text += "variant auto on sm_90a " + row_text(row) + "\n";
  return text;
}

}  // namespace intfa::attention
