// The attention kernels: the portable one (KernelPath::kMmaSync: mma.sync, every arch and the
// fallback on sm_90; attention_forward.cuh) and the Hopper one (KernelPath::kWgmma:
// attention_wgmma_family.hpp). Their spec (AttentionSpec, one type for both: they take the same
// fields, the heuristic and the tuner move a request between them by KernelConfig::path alone,
// and the shared memory, checks, parameters and launch shape below are written once for both),
// its text, JSON, id and render (the portable kernel's instantiation here, the Hopper kernel's in
// attention_wgmma_family.cpp). The request, make_spec and the heuristic are the spec layer's
// (src/spec/attention_spec.hpp).
#pragma once

#include <string>

#include "attention/attention_params.h"
#include "common/json.hpp"
#include "device/arch.hpp"
#include "intfa/attention.hpp"
#include "launch/kernel_runtime.hpp"
#include "render/kernel_source.hpp"
#include "render/render.hpp"

namespace intfa::attention {

struct AttentionSpec {
  KernelPath path = KernelPath::kMmaSync;  // which kernel: attention or attention_wgmma
  device::Arch arch = device::Arch::kSm80;
  int head_dim = 0;
  int block_m = 0;
  int block_n = 0;
  int warps = 0;
  int stages = 0;
  int qk_bits = 8;  // 8, or 4 for the INT4 Q.K option
  Variant variant = Variant::kFullInt8;
  // Half INT8: V's type; a kernel that quantizes Q itself: Q's type (and V's).
  kernels::ElementType input_type = kernels::ElementType::kF16;
  kernels::ElementType output_type = kernels::ElementType::kF16;
  bool causal = false;
  bool varlen = false;  // packed sequences with cu_seqlens (AttentionParams)
  // The options the variant reads (numerics_read_by); the others at their enums' first values.
  AttentionNumerics numerics = paper_numerics();
  // The Hopper kernel: Q arrives in input_type (16 bits) and the kernel quantizes it per token
  // itself (intfa.attention's path: one quantize pass fewer); with q_dot_k_mean it also writes K
  // smoothing's LSE term.
  bool quantizes_q = false;
  bool q_dot_k_mean = false;
  // ... and rotates Q's rows before quantizing them, as quantize_rows with the same rotation does
  // (the spec JSON's "rotate", which the quantize kernels' specs use for their rows).
  QKRotation rotate = QKRotation::kOff;

  friend bool operator==(const AttentionSpec& a, const AttentionSpec& b);
  friend bool operator!=(const AttentionSpec& a, const AttentionSpec& b) { return !(a == b); }

  // "attention sm_90a d128 m128 n64 w8 s2 full_int8 qk8 f16->f16 causal p=u8 p-scale=tile
  // v-scale=channel".
  std::string to_string() const;
  // The spec file's members (families/spec_format.hpp).
  json::Value to_json() const;
  // Inverse of to_json for "family" attention or attention_wgmma; throws InvalidArgument naming
  // the bad member.
  static AttentionSpec from_json(const json::Value& value);
};

// "attention" (mma.sync) or "attention_wgmma": the spec JSON's "family" and the unit's file name.
std::string kernel_name(KernelPath path);
// Whether `family` (a spec JSON's "family") names an attention kernel.
bool names_kernel(const std::string& family);

// The spec's fields packed into the JIT core's key: equal ids exactly for equal specs.
render::KernelId kernel_id(const AttentionSpec& spec);
// What the JIT core takes: the kernel's unit, arch, to_string() and to_json().
render::KernelSource kernel_source(const AttentionSpec& spec, const render::TemplateSet& templates =
                                                                  render::TemplateSet::active());

// The Numerics type of both kernels' instantiations: the spec's numerics as named constants.
render::ConstantsStruct numerics_constants(const AttentionSpec& spec);

// Shared memory the kernel of `spec` uses per block.
int shared_bytes(const AttentionSpec& spec);

// Throws InvalidArgument naming the bad config field (block_m not 16 or 32 rows per warp, ...),
// or Unsupported when the kernel would need more than `max_shared_bytes` of shared memory.
void validate_config(const AttentionSpec& spec, int max_shared_bytes);

// A view's batch, head and row strides in bytes (elements of `element_bytes`).
kernels::Strides byte_strides(const TensorView& view, int element_bytes);

// The parameters of both kernels (the Hopper kernel's WgmmaAttentionParams::attention) for the
// caller's tensors.
kernels::AttentionParams make_params(const AttentionProblem& problem,
                                     const AttentionTensors& tensors, double softmax_scale);

// One block per block_m query rows of each query head and batch, warps * 32 threads,
// shared_bytes(spec) of dynamic shared memory.
launch::LaunchShape launch_shape(const AttentionProblem& problem, const AttentionSpec& spec);

}  // namespace intfa::attention
