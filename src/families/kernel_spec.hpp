// KernelSpec: everything that selects one compiled kernel. It is the first value of the pipeline
// (KernelSpec -> RenderedUnit -> CacheKey -> Cubin -> LoadedKernel) and is written next to each
// cache entry in readable form. Fields a family does not use stay at their defaults, so two specs
// of one family are equal exactly when they would render the same unit.
#pragma once

#include <string>

#include "common/json.hpp"
#include "device/arch.hpp"
#include "intfa/numerics.hpp"
#include "render/kernel_source.hpp"
#include "render/render.hpp"
#include "render/template_set.hpp"

namespace intfa::families {

// Each family's host file (its spec fields, instantiation, shared memory, checks, launch shape and
// parameters): src/families/quantize_family.hpp, attention_family.hpp, attention_wgmma_family.hpp
// and src/families/paged_family.hpp.
enum class KernelFamily {
  kQuantizeRows,     // FP16/BF16 rows -> INT8 (or packed INT4) + one FP32 scale per row (Q, K)
  kChannelMean,      // per-(batch, head) channel means of K (the first pass of K smoothing)
  kQuantizeVScale,   // per-(batch, head) max|V| / 127 (the first pass of per-tensor V)
  kQuantizeV,        // FP16/BF16 V -> INT8 in the attention kernel's V layout
  kQuantizeKVScale,  // K's rows and V's max pass in one launch (attention_forward_16bit)
  kQuantizeKV,       // K's rows and all of V in one launch, V read once (sm_90a clusters)
  kAttention,        // the attention forward (both variants), mma.sync: every arch
  kAttentionWgmma,   // the full-INT8 attention forward for sm_90a: wgmma, TMA, warp specialised
  // The paged KV cache (src/families/paged_family.hpp owns their fields and instantiation):
  kPagedAppend,  // FP16/BF16 K/V rows -> INT8/INT4 cache slots
  kPagedDecode,  // split-KV decode attention over the paged cache
  kMergeStates,  // merge of partial attention states by their LSE (the split-KV combine)
};

struct KernelSpec {
  KernelFamily family = KernelFamily::kAttention;
  device::Arch arch = device::Arch::kSm80;
  int head_dim = 0;

  // Attention tiling (zero for other families).
  int block_m = 0;
  int block_n = 0;
  int warps = 0;
  int stages = 0;

  int qk_bits = 8;  // 8, or 4 for the INT4 Q.K option
  kernels::AttentionVariant variant = kernels::AttentionVariant::kFullInt8;
  // Unquantized element type: the input of the quantize kernels, V of the half-INT8 variant, Q of
  // an attention kernel that quantizes Q itself.
  kernels::ElementType input_type = kernels::ElementType::kF16;
  kernels::ElementType output_type = kernels::ElementType::kF16;
  bool causal = false;
  // The attention kernels' numerics (both variants read k_granularity; full INT8 the others);
  // quantize kernels read v_granularity (V's) and k_granularity (K's rows). Options a kernel
  // does not read stay at their enum's first value (paper_numerics).
  AttentionNumerics numerics = paper_numerics();
  bool smooth_k = false;  // quantize kernels: subtract K's channel mean before quantizing
  bool varlen = false;    // attention: packed sequences with cu_seqlens (AttentionParams)
  // quantize_rows of Q when K is smoothed: also write q . (K's channel mean) per row, the LSE term.
  bool q_dot_k_mean = false;
  // quantize_rows, and the Hopper attention kernel's own Q pass (quantizes_q): rotate rows
  // (incoherent processing, quantize/rotation.h) before quantizing.
  bool rotate = false;
  // The Hopper attention kernel: Q arrives in input_type (16 bits) and the kernel quantizes it
  // per token itself (intfa.attention's path: one quantize pass fewer); with q_dot_k_mean it also
  // writes K smoothing's LSE term.
  bool quantizes_q = false;

  friend bool operator==(const KernelSpec& a, const KernelSpec& b);
  friend bool operator!=(const KernelSpec& a, const KernelSpec& b) { return !(a == b); }

  // One line, only the fields the family uses:
  // "attention sm_90a d128 m128 n64 w8 s2 full_int8 qk8 f16->f16 causal p=u8 p-scale=tile
  // v-scale=tensor".
  std::string to_string() const;
  json::Value to_json() const;
  // Inverse of to_json; throws InvalidArgument naming the bad member.
  static KernelSpec from_json(const json::Value& value);
};

// The spec's fields packed into the JIT core's key (render/kernel_source.hpp): equal ids exactly
// for equal specs.
render::KernelId kernel_id(const KernelSpec& spec);
// The instantiation of `spec` by its family's host file. Defined by
// src/families/kernel_families.cpp, the one switch over KernelFamily. Throws InternalError for an
// unknown family.
render::Instantiation instantiation_for(const KernelSpec& spec);
// The unit of `spec` (render::render_unit of its instantiation). Throws InvalidArgument when the
// spec's family cannot be rendered with its fields (validation of sizes against a device lives
// with each family's host code, before rendering).
render::RenderedUnit render(const KernelSpec& spec,
                            const render::TemplateSet& templates = render::TemplateSet::active());
// What the JIT core takes for `spec`: its unit, arch, to_string() and to_json().
render::KernelSource kernel_source(
    const KernelSpec& spec, const render::TemplateSet& templates = render::TemplateSet::active());

std::string family_name(KernelFamily family);
// What to_string says after "family arch dN": the fields the spec's family uses (each family's
// host file says it; defined by src/families/kernel_families.cpp, as instantiation_for).
std::string family_fields_text(const KernelSpec& spec);
}  // namespace intfa::families

namespace intfa::families {
// For unordered containers keyed by spec.
struct KernelSpecHash {
  std::size_t operator()(const KernelSpec& spec) const noexcept;
};
}  // namespace intfa::families
