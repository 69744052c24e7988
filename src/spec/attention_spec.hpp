// From an attention problem to the AttentionSpec that serves it: the public enums in kernel terms
// and the tile-config heuristic. The checks a config must pass before anything is compiled and its
// shared memory are the kernels' own (src/families/attention_family.hpp: validate_config,
// shared_bytes).
#pragma once

#include <vector>

#include "device/arch.hpp"
#include "families/attention_family.hpp"
#include "intfa/attention.hpp"

namespace intfa::attention {

struct SpecRequest {
  device::Arch arch = device::Arch::kSm80;
  int head_dim = 128;
  Variant variant = Variant::kFullInt8;
  int qk_bits = 8;
  bool causal = false;
  bool varlen = false;  // packed sequences (AttentionTensors::varlen)
  DType v_type = DType::kF16;    // half INT8 only
  DType output_type = DType::kF16;
  AttentionNumerics numerics;  // the kernel's spec keeps those the variant reads
  // attention_forward_16bit: Q arrives in q_type and the Hopper kernel quantizes it itself
  // (AttentionSpec::quantizes_q; with q_dot_k_mean, K is smoothed and it writes the LSE term too).
  // make_spec honours it only for a Hopper config; the portable kernel takes quantize_rows' Q.
  bool quantize_q_in_kernel = false;
  DType q_type = DType::kF16;
  bool q_dot_k_mean = false;
  // ... and rotates Q's rows first (AttentionSpec::rotate), as quantize_rows would.
  QKRotation rotate_q = QKRotation::kOff;
};

// The request of a dense call of `problem` with FP16/BF16 inputs and output of `io_type` under
// `options`' numerics: the one place the CLI, the ahead-of-time lists and the bench tools turn a
// problem into a request (attention_forward reads V's and the output's types from the tensors).
SpecRequest request_for(device::Arch arch, const AttentionProblem& problem,
                        const AttentionOptions& options, DType io_type);

// `request` as attention_forward_16bit asks for it, with `dtype` inputs under `options`: Q
// quantized by the Hopper kernel itself where it can (8-bit Q.K, dense batches, no rotation of Q
// and K) unless INTFA_QUANTIZE_Q_IN_KERNEL=0 (docs/environment.md).
SpecRequest with_q_in_kernel(SpecRequest request, const AttentionOptions& options, DType dtype);

// The kernels' head dim that serves a 16-bit call's `head_dim`: itself for 64, 128 and 256, the
// next of them for another multiple of 8 up to 256 (templates/attention/README.md, "Head dims
// between the kernels'"). Throws InvalidArgument naming `field` for any other value.
int kernel_head_dim(int head_dim, const char* field);

// The spec for `request` with tile config `config` (not validated).
AttentionSpec make_spec(const SpecRequest& request, const KernelConfig& config);

// Whether the Hopper kernel (KernelPath::kWgmma) implements `request`: sm_90a, full or half INT8
// with 8-bit Q.K, dense batches.
bool wgmma_serves(const SpecRequest& request);

// The default tile config for an arch, head dim and variant (the tuning database overrides it):
// the Hopper kernel where it serves the request, else the portable one. `seq_bucket` is the
// problem's tune::seq_bucket (max(seq_q, seq_kv) rounded up to a power of two, 1024..16384);
// 0, where no length is known, gives the choice for long sequences.
KernelConfig heuristic_config(const SpecRequest& request, int seq_bucket = 0);

// Every config heuristic_config returns for `request` over all sequence lengths, the
// long-sequence one first (what a deployment bundle compiles).
std::vector<KernelConfig> heuristic_configs(const SpecRequest& request);

// The default config of the portable kernel (also the fallback when the Hopper kernel cannot
// describe the tensors with TMA).
KernelConfig portable_heuristic_config(const SpecRequest& request);

// Every tile config the tuner may try for `request` (before shared-memory pruning).
std::vector<KernelConfig> candidate_configs(const SpecRequest& request);

// Those of `configs` whose kernel for `request` fits `max_shared_bytes` of shared memory. A config
// that is invalid in itself throws InvalidArgument (validate_config).
std::vector<KernelConfig> fitting_configs(const SpecRequest& request,
                                          const std::vector<KernelConfig>& configs,
                                          int max_shared_bytes);

}  // namespace intfa::attention
