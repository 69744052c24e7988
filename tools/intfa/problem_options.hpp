// Command-line options that describe an attention problem and its numerics, shared by the verbs
// that run attention (run, bench, tune, precompile).
#pragma once

#include <string>
#include <vector>

#include "device/arch.hpp"
#include "intfa/args.hpp"
#include "intfa/attention.hpp"
#include "intfa/errors.hpp"
#include "intfa/types.hpp"
#include "reference/input_families.hpp"
#include "reference/reference.hpp"
#include "spec/attention_spec.hpp"

namespace intfa::cli {

// --variant full|half, a flag per numerics option (INTFA_ATTENTION_NUMERICS: its short flag,
// --p, and its member's, --p-encoding), --dtype f16|bf16, --dist FAMILY, --qk-bits 8|4,
// --softmax-scale X, --config BLOCK_M,BLOCK_N,WARPS,STAGES, and the flags --smooth-k and --rotate
const char* numerics_options_help();
const std::vector<std::string>& numerics_option_names();
// Only the numerics options' flags (both spellings) and their help lines: what tune and
// precompile take besides their own options.
const std::vector<std::string>& numerics_flag_names();
const char* numerics_flags_help();
// The numerics options' flags (the defaults where none is given).
AttentionNumerics parse_numerics_options(const Args& args);

// --smooth-k[=BOOL] and --rotate[=BOOL|auto] (defaults as AttentionOptions:
// numerics_options_help): how the 16-bit Q and K are quantized (AttentionOptions::smooth_k,
// rotate_qk); the flags (Grammar::flags) and auto flags (Grammar::auto_flags) of run, bench,
// tune and precompile.
const std::vector<std::string>& qk_transform_flag_names();
const std::vector<std::string>& qk_transform_auto_flag_names();
void parse_qk_transforms(const Args& args, AttentionOptions& options);

Variant parse_variant(const std::string& text);
void parse_numerics(const Args& args, AttentionProblem& problem, AttentionOptions& options,
                    DType& io_type);
// --dist: an input family of reference/input_families.hpp (normal by default).
reference::InputFamily parse_input_family(const Args& args);
KernelConfig parse_config(const std::string& text);

std::string describe_numerics(const AttentionProblem& problem, const AttentionOptions& options);

// The list options of the verbs that sweep a grid (head dims 64, 128, 256). Each value is
// checked; a bad one is a UsageError naming the option. --causal is a flag (on alone) that also
// takes a list: --causal=off,on.
std::vector<int> parse_head_dims(const Args& args, const std::vector<long>& fallback);
std::vector<bool> parse_causal_list(const Args& args, const std::vector<bool>& fallback);

// The checks attention_forward makes of a problem and its options (as a launch would, but without
// a GPU), each failure a UsageError naming the option that set the field ("--head-dim 96: ...").
void validate_problem_options(const AttentionProblem& problem, const AttentionOptions& options);

// `base` at `variant` and `head_dim`, with `batch` batches of `heads` heads (as many KV heads) and
// Q and K of `seq` tokens: a point of the grids bench and tune sweep.
AttentionProblem grid_point(const AttentionProblem& base, Variant variant, int head_dim, long seq,
                            int batch, int heads);

// validate_problem_options of each problem of a grid that sweeps variants, head dims and
// sequence lengths (Q and K of one length) over `batch` batches of `heads` heads, and that the
// host holds its inputs (require_host_memory): the verbs that sweep one check it whole before
// they look for a GPU.
void validate_grid(const AttentionProblem& base, const AttentionOptions& options,
                   const std::vector<Variant>& variants, const std::vector<int>& head_dims,
                   const std::vector<long>& seqs, int batch, int heads);

// A field the library's checks name and the option that sets it ("problem.head_dim",
// "--head-dim"); a field that ends in '.' stands for every member under it ("config.").
struct OptionOfField {
  std::string field;
  std::string option;
};
// `error` as a UsageError naming the option that sets its field ("--head-dim: invalid
// problem.head_dim = 96: ..."); `error` itself where none of `options` does.
[[noreturn]] void throw_naming_option(const InvalidArgument& error,
                                      const std::vector<OptionOfField>& options);
std::vector<Variant> parse_variant_list(const Args& args, const std::vector<std::string>& fallback);

// The kernel request for `problem` under `options`' numerics, with 16-bit tensors of `io_type`.
attention::SpecRequest spec_request(device::Arch arch, const AttentionProblem& problem,
                                    const AttentionOptions& options, DType io_type);

}  // namespace intfa::cli
