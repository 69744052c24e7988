#include "spec/attention_spec.hpp"

#include <string>

#include "common/env.hpp"
#include "intfa/errors.hpp"

namespace intfa::attention {
namespace {

// The largest sequence bucket (tune::seq_bucket) the heuristic treats as short.
constexpr int kShortSequenceBucket = 1024;

kernels::ElementType element_type(DType dtype, const char* field) {
  if (dtype == DType::kF16) return kernels::ElementType::kF16;
  if (dtype == DType::kBF16) return kernels::ElementType::kBF16;
  throw InvalidArgument(field, dtype_name(dtype), "expected f16 or bf16");
}

}  // namespace


SpecRequest request_for(device::Arch arch, const AttentionProblem& problem,
                        const AttentionOptions& options, DType io_type) {
  SpecRequest request;
  request.arch = arch;
  request.head_dim = problem.head_dim;
  request.variant = problem.variant;
  request.qk_bits = problem.qk_bits;
  request.causal = problem.causal;
  request.v_type = io_type;
  request.output_type = io_type;
  request.numerics = options.numerics;
  return request;
}

int kernel_head_dim(int head_dim, const char* field) {
  if (head_dim < 8 || head_dim > 256 || head_dim % 8 != 0) {
    throw InvalidArgument(field, std::to_string(head_dim),
                          "expected a multiple of 8 up to 256 (64, 128 and 256 run their own "
                          "kernels, others the next of them)");
  }
  return head_dim <= 64 ? 64 : head_dim <= 128 ? 128 : 256;
}

SpecRequest with_q_in_kernel(SpecRequest request, const AttentionOptions& options, DType dtype) {
  const bool enabled = env::flag("INTFA_QUANTIZE_Q_IN_KERNEL", true);
  if (enabled && request.qk_bits == 8) {
    request.quantize_q_in_kernel = true;
    request.q_type = dtype;
    request.q_dot_k_mean = options.smooth_k;
    request.rotate_q = options.rotate_qk;
  }
  return request;
}

AttentionSpec make_spec(const SpecRequest& request, const KernelConfig& config) {
  AttentionSpec spec;
  spec.path = config.path;
  spec.arch = request.arch;
  spec.head_dim = request.head_dim;
  spec.block_m = config.block_m;
  spec.block_n = config.block_n;
  spec.warps = config.warps;
  spec.stages = config.stages;
  spec.qk_bits = request.qk_bits;
  spec.causal = request.causal;
  spec.varlen = request.varlen;
  spec.output_type = element_type(request.output_type, "tensors.out.dtype");
  spec.variant = request.variant;
  spec.numerics = numerics_read_by(request.variant, request.numerics);
  if (request.variant == Variant::kHalfInt8) {
    spec.input_type = element_type(request.v_type, "tensors.v.dtype");
  }
  if (request.quantize_q_in_kernel && config.path == KernelPath::kWgmma) {
    // Half INT8's V has Q's type (attention_forward_16bit takes one dtype for Q, K and V).
    spec.quantizes_q = true;
    spec.input_type = element_type(request.q_type, "inputs.q.dtype");
    spec.q_dot_k_mean = request.q_dot_k_mean;
    spec.rotate = request.rotate_q;
  }
  return spec;
}

bool wgmma_serves(const SpecRequest& request) {
  return request.arch == device::Arch::kSm90a && request.qk_bits == 8;
}

KernelConfig heuristic_config(const SpecRequest& request, int seq_bucket) {
  if (wgmma_serves(request)) {
    // Full INT8 at d <= 128 (not per-block V): the fastest candidates of the Hopper kernel's
    // config sweep, causal off and on, both orders (the figures: bench/history/2026-11-24.md,
    // "Why the heuristic chooses what it chooses (moved from code comments)").
    //   - Up to 1k tokens a block has 8 key tiles, and its fill and drain (the first tile's
    //     softmax, the last P.V, the epilogue) weigh most: one consumer warpgroup per block,
    //     two blocks per SM, so that one block's fill and drain overlap the other's main loop.
    //   - Beyond: three consumer warpgroups without turns, faster than two in turns at d=64 and
    //     d=128.
    // Per-block V keeps two warpgroups: three measured slower there at N=4k
    // (bench/history/2026-11-23.md, "2026-11-23 (late night): three consumer warpgroups at d=128").
    const bool short_sequences = seq_bucket > 0 && seq_bucket <= kShortSequenceBucket;
    // Half INT8 (its FP32 output, S and 16-bit P of 128-key tiles do not fit three warpgroups'
    // registers at d=128): each choice the fastest candidate of its bucket, both orders (the
    // figures: bench/history/2026-11-27.md, "Why the heuristic chooses what it chooses (moved
    // from code comments)").
    //   - d=64: up to 1k tokens one consumer warpgroup, two blocks per SM, two stages; beyond,
    //     three consumer warpgroups with three stages, where P.V runs one tile behind Q.K^T
    //     (kPvBehindScores).
    //   - d=128: up to 1k tokens two warpgroups taking turns, three stages (P.V behind: faster
    //     than two stages, which wait for P.V); beyond, three warpgroups without turns with
    //     64-key tiles (what fits their registers), three stages.
    //   - d=256: two warpgroups with 64-key tiles, two stages (three stages do not fit).
    // At d=128 1k causal three warpgroups measured 2% faster in one order: too little for a rule
    // of its own.
    if (request.variant == Variant::kHalfInt8) {
      if (request.head_dim <= 64) {
        return short_sequences ? KernelConfig{64, 128, 8, 2, KernelPath::kWgmma}
                               : KernelConfig{192, 128, 16, 3, KernelPath::kWgmma};
      }
      if (request.head_dim >= 256) return KernelConfig{128, 64, 12, 2, KernelPath::kWgmma};
      return short_sequences ? KernelConfig{128, 128, 12, 3, KernelPath::kWgmma}
                             : KernelConfig{192, 64, 16, 3, KernelPath::kWgmma};
    }
    // Full INT8 at d=64: three stages, where P.V runs one tile behind Q.K^T (kPvBehindScores),
    // with one warpgroup up to 1k and three beyond (bench/RESULTS.md, "Against the FP8 peers, and
    // full INT8's P.V one tile behind"). At d=128 three warpgroups cannot hold it, and one with
    // three stages loses the second block per SM.
    if (request.head_dim <= 128 && request.numerics.v_granularity != VScaleGranularity::kPerBlock) {
      const int stages = request.head_dim <= 64 ? 3 : 2;
      return short_sequences ? KernelConfig{64, 128, 8, stages, KernelPath::kWgmma}
                             : KernelConfig{192, 128, 16, stages, KernelPath::kWgmma};
    }
    // Otherwise two consumer warpgroups, 128 keys per tile (64 at d=256, where the output takes
    // the registers), two stages (bench/history/2026-11-23.md, "The Hopper kernel (issue 6)").
    return KernelConfig{128, request.head_dim >= 256 ? 64 : 128, 12, 2, KernelPath::kWgmma};
  }
  return portable_heuristic_config(request);
}

std::vector<KernelConfig> heuristic_configs(const SpecRequest& request) {
  std::vector<KernelConfig> configs = {heuristic_config(request)};
  const KernelConfig short_sequences = heuristic_config(request, kShortSequenceBucket);
  if (short_sequences != configs.front()) configs.push_back(short_sequences);
  return configs;
}

KernelConfig portable_heuristic_config(const SpecRequest& request) {
  // Head dim 256: a 64 x 32 block is what fits the registers (Q, S, P and the output tile stay
  // there). Otherwise 16 rows per warp and 4 warps; 128 keys per tile halves the online-softmax
  // rescales per key against 64, except for half INT8 at d=64, where the 16-bit V tile of 64 keys
  // with 128 rows won. Each choice is the fastest of every candidate in a sweep at N=4096, causal
  // off and on, or within 5% of it (bench/history/2026-11-23.md, "Tile-config sweep (B=4, H=32,
  // N=4096): the three fastest per bucket"); two stages, because three do not fit twice per SM on
  // sm_86/sm_89 (`intfa tune` finds those).
  if (request.head_dim >= 256) return KernelConfig{64, 32, 4, 2};
  if (request.variant == Variant::kFullInt8) return KernelConfig{64, 128, 4, 2};
  if (request.head_dim <= 64) return KernelConfig{128, 64, 4, 2};
  // Half INT8 at d=128: 128 keys of 16-bit V need 105 KB, more than sm_86/sm_89 offer.
  const KernelConfig wide{64, 128, 4, 2};
  const bool wide_fits = shared_bytes(make_spec(request, wide)) <=
                         device::default_max_shared_bytes(request.arch);
  return wide_fits ? wide : KernelConfig{64, 64, 4, 2};
}

std::vector<KernelConfig> candidate_configs(const SpecRequest& request) {
  std::vector<KernelConfig> configs;
  if (wgmma_serves(request)) {
    for (int block_n : {64, 128}) {
      if (request.head_dim >= 256 && block_n > 64) continue;
      for (int stages : {2, 3}) {
        configs.push_back(KernelConfig{128, block_n, 12, stages, KernelPath::kWgmma});
        // Three consumer warpgroups: full INT8 at d=128 with 128-key tiles only (64-key tiles
        // measured slower there: bench/history/2026-11-23.md, "2026-11-23 (late night): three
        // consumer warpgroups at d=128").
        // Half INT8 keeps its FP32 output, S and P in registers: three fit at d <= 64, and at
        // d=128 with 64-key tiles.
        const bool full_int8 = request.variant == Variant::kFullInt8;
        const bool three_fit =
            request.head_dim <= 64 ||
            (request.head_dim <= 128 && (full_int8 ? block_n == 128 : block_n == 64));
        if (three_fit) {
          configs.push_back(KernelConfig{192, block_n, 16, stages, KernelPath::kWgmma});
        }
        // One consumer warpgroup, two blocks per SM: 128-key tiles (64-key tiles measured
        // 15-27% slower at d=64), two stages, and three at d=64 (at d=128 three leave one
        // block per SM).
        if (request.head_dim <= 128 && block_n == 128 && (stages == 2 || request.head_dim <= 64)) {
          configs.push_back(KernelConfig{64, block_n, 8, stages, KernelPath::kWgmma});
        }
      }
    }
  }
  for (int warps : {4, 8}) {
    for (int rows_per_warp : {16, 32}) {
      if (rows_per_warp == 32 && request.head_dim > 64) continue;  // registers
      for (int block_n : {32, 64, 128}) {
        if (request.head_dim >= 256 && block_n > 64) continue;
        for (int stages : {2, 3}) {
          configs.push_back(KernelConfig{rows_per_warp * warps, block_n, warps, stages});
        }
      }
    }
  }
  return configs;
}

std::vector<KernelConfig> fitting_configs(const SpecRequest& request,
                                          const std::vector<KernelConfig>& configs,
                                          int max_shared_bytes) {
  std::vector<KernelConfig> fitting;
  for (const KernelConfig& config : configs) {
    try {
      validate_config(make_spec(request, config), max_shared_bytes);
      fitting.push_back(config);
    } catch (const Unsupported&) {
      // Needs more shared memory than the device offers.
    }
  }
  return fitting;
}

}  // namespace intfa::attention
