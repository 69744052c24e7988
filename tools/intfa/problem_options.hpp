// Command-line options that describe an attention problem and its numerics, shared by the verbs
// that run attention (run, bench, tune, precompile).
#pragma once

#include <string>
#include <vector>

#include "intfa/args.hpp"
#include "intfa/attention.hpp"
#include "intfa/types.hpp"
#include "reference/reference.hpp"

namespace intfa::cli {

// --variant full|half, --p s8|u8, --p-scale running|tile, --v-scale tensor|channel|block,
// --dtype f16|bf16, --dist normal|uniform, --qk-bits 8|4, --softmax-scale X,
// --config BLOCK_M,BLOCK_N,WARPS,STAGES
extern const char* const kNumericsOptionsHelp;
const std::vector<std::string>& numerics_option_names();

Variant parse_variant(const std::string& text);
void parse_numerics(const Args& args, AttentionProblem& problem, AttentionOptions& options,
                    DType& io_type);
reference::Distribution parse_distribution(const Args& args);
KernelConfig parse_config(const std::string& text);

std::string describe_numerics(const AttentionProblem& problem, const AttentionOptions& options);

}  // namespace intfa::cli
