// Every check attention_forward makes before it launches anything (those it shares with the other
// entry points are src/common/tensor_checks.hpp's). Each failure is an InvalidArgument naming the
// field ("tensors.k.strides") and the value.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "common/tensor_checks.hpp"
#include "intfa/attention.hpp"
#include "intfa/types.hpp"

namespace intfa::attention {

void validate_problem(const AttentionProblem& problem);
void validate_options(const AttentionProblem& problem, const AttentionOptions& options);
// `channels`: the head dim of the output and of half INT8's 16-bit V, problem.head_dim or (for
// attention_forward_16bit's head dims between the kernels') fewer; 0 means problem.head_dim.
void validate_tensors(const AttentionProblem& problem, const AttentionTensors& tensors,
                      const AttentionOptions& options, int channels = 0);

// The shared checks of the public API's arguments, under their old names here.
using checks::validate_offsets;
using checks::validate_scales;
using checks::validate_shape;
using checks::validate_v_layout;
using checks::validate_v_seq;
using checks::validate_varlen;
using checks::validate_view;
using checks::ViewRequirements;

}  // namespace intfa::attention
