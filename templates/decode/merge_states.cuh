// The merge of partial attention states by their LSE (issue 29's merge_states; the combine of
// split-KV decode): out = sum_s w_s values_s / sum_s w_s with w_s = exp(lse_s - max_s lse_s).
// Each thread owns 8 consecutive channels of one row, and each state is read once. A row's
// states are shared by `state_groups` groups of its threads (group g takes states g, g + groups,
// ...), whose partial sums meet in shared memory: a split-KV decode of one long sequence has few
// rows (64 at B=1) and up to 64 states each, so the kernel is a chain of load latencies, not a
// stream of bytes, and it is as short as the loads issued together make it. The host picks the
// groups (src/decode/paged_api.cpp, launch_merge); one group is the plain per-row merge.
#pragma once

#include "common/grid_dependency.cuh"
#include "common/numeric.cuh"
#include "decode/paged_params.h"

namespace intfa {
namespace kernels {

// 8 consecutive values of a state as floats (FP32 states: two 16-byte loads; 16-bit: one).
template <ElementType Type>
__device__ __forceinline__ void load_8_values(const void* base, i64 offset, float (&values)[8]) {
  if constexpr (Type == ElementType::kF32) {
    const uint4* source = reinterpret_cast<const uint4*>(static_cast<const float*>(base) + offset);
    const uint4 low = source[0], high = source[1];
    const u32 words[8] = {low.x, low.y, low.z, low.w, high.x, high.y, high.z, high.w};
#pragma unroll
    for (int i = 0; i < 8; ++i) values[i] = __int_as_float(static_cast<int>(words[i]));
  } else {
    const uint4 raw = *reinterpret_cast<const uint4*>(static_cast<const u16*>(base) + offset);
    const u32 words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      values[2 * i] = element_to_float<Type>(static_cast<u16>(words[i] & 0xFFFF));
      values[2 * i + 1] = element_to_float<Type>(static_cast<u16>(words[i] >> 16));
    }
  }
}

template <int HeadDim, ElementType StateType, ElementType OutputType>
__global__ void __launch_bounds__(kPagedRowThreads) merge_states(const MergeStatesParams params) {
  // Launched as a programmatic dependent of the kernel before it (common/grid_dependency.cuh):
  // nothing that kernel may write is read or written before this wait.
  wait_for_previous_grid();
  allow_next_grid_to_launch();
  static_assert(HeadDim == 64 || HeadDim == 128 || HeadDim == 256, "head_dim 64, 128 or 256");
  static_assert(OutputType != ElementType::kF32, "16-bit outputs");
  constexpr int kThreadsPerRow = HeadDim / 8;
  constexpr int kSlots = paged_rows_per_set(HeadDim);  // of kThreadsPerRow threads in a block
  constexpr float kLog2E = 1.4426950408889634f;
  constexpr float kLn2 = 0.6931471805599453f;
  // Each thread's states' values in flight at once (64 registers).
  constexpr int kStatesInFlight = kMergeStatesPerThread;
  const float minus_infinity = __int_as_float(0xff800000);
  const int groups = params.state_groups;  // a power of two dividing kSlots: uniform per block
  const int slot = threadIdx.x / kThreadsPerRow;
  const int group = slot % groups;
  const int lane_in_row = threadIdx.x % kThreadsPerRow;
  const i64 row = static_cast<i64>(blockIdx.x) * (kSlots / groups) + slot / groups;
  const i64 rows = static_cast<i64>(params.outer) * params.inner * params.heads;
  // No early return: the groups of a block meet at __syncthreads.
  const bool live = row < rows;
  const int head = static_cast<int>(row % params.heads);
  const int inner = static_cast<int>(row / params.heads % params.inner);
  const int outer = static_cast<int>(row / (static_cast<i64>(params.heads) * params.inner));
  const int channel = lane_in_row * 8;
  auto offset3 = [&](const i64(&strides)[3]) {
    return outer * strides[0] + inner * strides[1] + head * strides[2];
  };
  const i64 first_lse_at = offset3(params.first_lse_strides);
  const i64 rest_lse_at = offset3(params.rest_lse_strides);
  auto state_lse = [&](int state) {
    return state == 0 ? params.first_lse[first_lse_at]
                      : params.rest_lse[(state - 1) * params.lse_state_stride + rest_lse_at];
  };
  __shared__ float group_maximum[kSlots];
  __shared__ float group_sums[kPagedRowThreads][9];  // 8 values and the weight sum (odd: no
                                                     // bank conflicts between a row's lanes)

  float maximum = minus_infinity;
  if (live) {
    for (int state = group; state < params.num_states; state += groups)
      maximum = fmaxf(maximum, state_lse(state));
  }
  if (groups > 1) {
    if (lane_in_row == 0) group_maximum[slot] = maximum;
    __syncthreads();
    const int first_slot = slot - group;
    for (int g = 0; g < groups; ++g) maximum = fmaxf(maximum, group_maximum[first_slot + g]);
  }
  float merged[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) merged[i] = 0.0f;
  float weight_sum = 0.0f;
  if (live && maximum != minus_infinity) {
    const int stride = groups * kStatesInFlight;
    for (int first = group; first < params.num_states; first += stride) {
      float lse[kStatesInFlight];
#pragma unroll
      for (int j = 0; j < kStatesInFlight; ++j) {
        const int state = first + j * groups;
        lse[j] = state < params.num_states ? state_lse(state) : minus_infinity;
      }
      float values[kStatesInFlight][8];
#pragma unroll
      for (int j = 0; j < kStatesInFlight; ++j) {
        // A state of LSE -inf holds nothing: its values are never read.
        if (lse[j] == minus_infinity) continue;
        const int state = first + j * groups;
        if (state == 0) {
          load_8_values<StateType>(params.first_values,
                                   offset3(params.first_values_strides) + channel, values[j]);
        } else {
          load_8_values<StateType>(params.rest_values,
                                   (state - 1) * params.values_state_stride +
                                       offset3(params.rest_values_strides) + channel,
                                   values[j]);
        }
      }
#pragma unroll
      for (int j = 0; j < kStatesInFlight; ++j) {
        if (lse[j] == minus_infinity) continue;
        const float weight = exp2_approx((lse[j] - maximum) * kLog2E);
        weight_sum += weight;
#pragma unroll
        for (int i = 0; i < 8; ++i) merged[i] += weight * values[j][i];
      }
    }
  }
  if (groups > 1) {
#pragma unroll
    for (int i = 0; i < 8; ++i) group_sums[threadIdx.x][i] = merged[i];
    group_sums[threadIdx.x][8] = weight_sum;
    __syncthreads();
    if (group != 0) return;  // group 0 writes the row
    for (int g = 1; g < groups; ++g) {
      const int thread = threadIdx.x + g * kThreadsPerRow;
#pragma unroll
      for (int i = 0; i < 8; ++i) merged[i] += group_sums[thread][i];
      weight_sum += group_sums[thread][8];
    }
  }
  if (!live) return;
  if (weight_sum > 0.0f) {
    const float inverse = divide_rn(1.0f, weight_sum);
#pragma unroll
    for (int i = 0; i < 8; ++i) merged[i] *= inverse;
  }
  // In place, merged and merged_lse may be first_values and first_lse: every thread that reads
  // them (group 0, the row's lanes: consecutive lanes of one warp) has read them before they are
  // written.
  const unsigned row_lanes = kThreadsPerRow == 32
                                 ? 0xFFFFFFFFu
                                 : ((1u << kThreadsPerRow) - 1u)
                                       << (threadIdx.x % 32 / kThreadsPerRow * kThreadsPerRow);
  __syncwarp(row_lanes);

  u16* out = static_cast<u16*>(params.merged) + offset3(params.merged_strides) + channel;
  *reinterpret_cast<uint4*>(out) = make_uint4(
      pack_float2<OutputType>(merged[0], merged[1]), pack_float2<OutputType>(merged[2], merged[3]),
      pack_float2<OutputType>(merged[4], merged[5]), pack_float2<OutputType>(merged[6], merged[7]));
  if (params.merged_lse != nullptr && lane_in_row == 0) {
    params.merged_lse[offset3(params.merged_lse_strides)] =
        weight_sum > 0.0f ? maximum + log2_approx(weight_sum) * kLn2 : maximum;
  }
}

}  // namespace kernels
}  // namespace intfa
