// The Hopper attention kernel's main loops for half INT8 (attention_forward_wgmma.cuh: consume
// picks one by Config): P in 16 bits, P.V accumulated in FP32 by the wgmma into the output itself,
// which is rescaled when a row's reference moves. main_loop_16bit_pv for independent warpgroups
// (P.V one tile behind Q.K^T with three stages, tiles_16bit_pv_behind; waited for with two),
// main_loop_16bit_pv_in_turns for warpgroups taking turns; before them half INT8's softmax of a
// tile.
#pragma once

#include "attention/wgmma_tile_steps.cuh"

namespace intfa {
namespace kernels {

template <class Config>
struct WgmmaHalfInt8Loops : WgmmaTileSteps<Config> {
  using Steps = WgmmaTileSteps<Config>;
  // What the loops take from the tile steps and the pipeline.
  using Steps::issue_pv_16bit;
  using Steps::issue_score_tile;
  using Steps::kOutputTiles;
  using Steps::kScoreTiles;
  using Steps::kStages;
  using Steps::pass_idle_turns;
  using Steps::pass_turn;
  using Steps::release;
  using Steps::scale_tile;
  using Steps::wait_for_turn;
  using Steps::wait_until_full;
  using typename Steps::BlockWork;
  using typename Steps::RowState;
  using typename Steps::SharedLayout;
  using typename Steps::Softmax;

  // Half INT8's softmax of one tile (README "Half INT8") up to P: y from S, the exponent
  // reference, e in FP32 (`e`; Softmax::pack_p_16bit rounds it into P), l rescaled by alpha and the
  // tile's sum added; alpha (0 where a row saw no key before) is left for the caller to rescale
  // the output with, and whether any row of the warp needs it. It touches neither P nor the
  // output, so it runs while the wgmma of the previous tile's P V still reads and writes them.
  __device__ __forceinline__ static bool exponentiate_tile_16bit(
      float (&e)[kScoreTiles][4], float (&alpha)[2], const int (&s)[kScoreTiles][4], RowState& rows,
      const float* k_scales, int tile, int warp_first_row, const BlockWork& work,
      LaneCoordinates coordinates) {
    float y[1][kScoreTiles][4];
    float tile_max[1][2];
    float c_tile[1][2][Softmax::kKBlocks];
    scale_tile(y, tile_max, c_tile, s, rows, k_scales, tile * Config::kBlockN, warp_first_row, work,
               coordinates);
    bool rescale = false;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      // running_max is half INT8's reference (half_int8_reference): within 2^8 of the maximum.
      const float previous = rows.running_max[0][half];
      const float updated = half_int8_reference(previous, tile_max[0][half]);
      rows.running_max[0][half] = updated;
      alpha[half] = previous == negative_infinity() ? 0.0f : exp2_approx(previous - updated);
      rescale |= previous != updated;
    }
    float tile_sum[1][2];
    Softmax::exponentiate_16bit(reinterpret_cast<float(&)[1][kScoreTiles][4]>(e), tile_sum, y,
                                c_tile, rows.running_max);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      rows.sum[0][half] = fmaf(rows.sum[0][half], alpha[half], tile_sum[0][half]);
    }
    return __any_sync(0xFFFFFFFFu, rescale);
  }

  // The whole softmax of one tile, P included, for the loops that wait for their P V first.
  __device__ __forceinline__ static bool softmax_16bit(
      u32 (&p)[Config::kPvSteps][4], float (&alpha)[2], const int (&s)[kScoreTiles][4],
      RowState& rows, const float* k_scales, int tile, int warp_first_row, const BlockWork& work,
      LaneCoordinates coordinates) {
    float e[kScoreTiles][4];
    const bool rescale = exponentiate_tile_16bit(e, alpha, s, rows, k_scales, tile, warp_first_row,
                                                 work, coordinates);
    pack_p_16bit(p, e);
    return rescale;
  }

  // ptxas keeps shared-memory stores in order with a wgmma wait but moves arithmetic across it:
  // it sank the row maxima, exponents and sums of exponentiate_tile_16bit below the wait for the
  // previous tile's P V, so that nothing overlapped it (the SASS of sm_90a). Storing the row sums,
  // which depend on all of that work, to a word no one reads keeps it ahead of the wait. The store
  // is warp-wide in the SASS whatever its predicate, so lane 0 alone stores, to its warp's own
  // word: no two threads write one address (compute-sanitizer's racecheck reported each lane's
  // store to a shared word of the warpgroup as a write-write hazard).
  __device__ __forceinline__ static void keep_ahead_of_wait(const SharedLayout& shared, int group,
                                                            const RowState& rows) {
    const u32 lane = threadIdx.x % 32;
    asm volatile(
        "{\n"
        ".reg .pred first_lane;\n"
        "setp.eq.u32 first_lane, %2, 0;\n"
        "@first_lane st.shared.f32 [%0], %1;\n"
        "}\n" ::"r"(shared.unread_word(group, (threadIdx.x / 32) % 4)),
        "f"(rows.sum[0][0] + rows.sum[0][1]), "r"(lane)
        : "memory");
  }

  __device__ __forceinline__ static void pack_p_16bit(u32 (&p)[Config::kPvSteps][4],
                                                      const float (&e)[kScoreTiles][4]) {
    Softmax::pack_p_16bit(reinterpret_cast<u32(&)[1][Config::kPvSteps][4]>(p),
                          reinterpret_cast<const float(&)[1][kScoreTiles][4]>(e));
  }

  __device__ __forceinline__ static void rescale_output(float (&o)[kOutputTiles][4],
                                                        const float (&alpha)[2]) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
#pragma unroll
      for (int dt = 0; dt < kOutputTiles; ++dt) {
        o[dt][2 * half] *= alpha[half];
        o[dt][2 * half + 1] *= alpha[half];
      }
    }
  }

  // Half INT8 with P V one tile behind Q K^T (kPvBehindScores; as FlashAttention-3 overlaps a
  // warpgroup's softmax with its own P V): step t issues tile t's Q K^T, rescales the output for
  // tile t - 1 while that runs (as FlashAttention-3 does; rescaled after the wait for P V instead,
  // it was slower at d=64 causal: bench/history/2026-11-28.md, "Half INT8: the output rescaled
  // while Q.K^T runs"),
  // issues tile t - 1's P V, waits for the Q K^T only, exponentiates tile t while that P V still
  // runs, then waits for it and rounds tile t's P. P is rounded only after the wait, so one set of
  // P registers does: the running wgmma reads P and accumulates into the output, and the
  // exponentiation touches neither. Carried round the loop instead (tile t + 1's Q K^T issued
  // before the wait for P V), a wgmma in flight across the loop's back edge makes ptxas serialize
  // them all (C7514 in NVRTC's log). A slot is released only after the exponentiation of the next
  // tile, so the producer needs a third stage to keep a tile ahead. `take_turn` and `pass` bracket
  // each issue: the warpgroups' turns, or nothing for warpgroups that run independently;
  // visible_tiles + 1 issues, after which tiles 0 .. visible_tiles - 1 are released.
  template <class TakeTurn, class PassTurn>
  __device__ __forceinline__ static void tiles_16bit_pv_behind(
      float (&o)[kOutputTiles][4], RowState& rows, const SharedLayout& shared,
      const BlockWork& work, int group, int warp_first_row, int visible_tiles,
      LaneCoordinates coordinates, TakeTurn&& take_turn, PassTurn&& pass) {
    u32 p[Config::kPvSteps][4];
    int s[kScoreTiles][4];
    float e[kScoreTiles][4];
    float alpha[2];
    // The first tile, peeled: nothing to overlap, and the output is still zero (no rescale). The
    // loop below then waits on its MMAs unconditionally, which ptxas needs to leave them
    // asynchronous.
    wait_until_full(shared, 0);
    take_turn();
    issue_score_tile(s, shared, group, 0);
    pass();
    wgmma_wait<0>();
    wgmma_pin(s);
    bool rescale = false;  // whether the output needs alpha before the next P V: still zero here
    exponentiate_tile_16bit(e, alpha, s, rows, shared.k_scales_generic(0), 0, warp_first_row, work,
                            coordinates);
    pack_p_16bit(p, e);
    for (int tile = 1; tile < visible_tiles; ++tile) {
      wait_until_full(shared, tile);
      take_turn();
      issue_score_tile(s, shared, group, tile % kStages);
      if (rescale) rescale_output(o, alpha);  // the previous tile's, while S runs
      issue_pv_16bit(o, p, shared, (tile - 1) % kStages);
      pass();
      wgmma_wait<1>();  // this tile's S; the previous tile's P V runs on
      wgmma_pin(s);
      rescale = exponentiate_tile_16bit(e, alpha, s, rows, shared.k_scales_generic(tile % kStages),
                                        tile, warp_first_row, work, coordinates);
      keep_ahead_of_wait(shared, group, rows);
      wgmma_wait<0>();
      wgmma_pin(o);
      wgmma_pin(p);  // read by the wgmma until the wait
      release(shared, (tile - 1) % kStages);
      pack_p_16bit(p, e);
    }
    // The last P V.
    take_turn();
    if (rescale) rescale_output(o, alpha);
    issue_pv_16bit(o, p, shared, (visible_tiles - 1) % kStages);
    pass();
    wgmma_wait<0>();
    wgmma_pin(o);
    wgmma_pin(p);
    release(shared, (visible_tiles - 1) % kStages);
  }

  // Half INT8, the warpgroups independent of each other: with three stages P V one tile behind
  // Q K^T (tiles_16bit_pv_behind), with two main_loop_16bit_pv_waited.
  __device__ __forceinline__ static void main_loop_16bit_pv(float (&o)[kOutputTiles][4],
                                                            RowState& rows,
                                                            const SharedLayout& shared,
                                                            const BlockWork& work, int group,
                                                            int warp_first_row, int visible_tiles,
                                                            LaneCoordinates coordinates) {
    if constexpr (Config::kPvBehindScores) {
      if (visible_tiles > 0) {
        tiles_16bit_pv_behind(
            o, rows, shared, work, group, warp_first_row, visible_tiles, coordinates, [] {}, [] {});
      }
    } else {
      main_loop_16bit_pv_waited(o, rows, shared, work, group, warp_first_row, visible_tiles,
                                coordinates);
    }
  }

  // Half INT8 with two stages, the warpgroups independent: per tile S = Q K^T, the softmax, the
  // output rescaled when a row's reference moved, then O += P V into the FP32 output, waited for.
  __device__ __forceinline__ static void main_loop_16bit_pv_waited(
      float (&o)[kOutputTiles][4], RowState& rows, const SharedLayout& shared,
      const BlockWork& work, int group, int warp_first_row, int visible_tiles,
      LaneCoordinates coordinates) {
    for (int tile = 0; tile < visible_tiles; ++tile) {
      const int slot = tile % kStages;
      wait_until_full(shared, tile);
      int s[kScoreTiles][4];
      issue_score_tile(s, shared, group, slot);
      wgmma_wait<0>();
      wgmma_pin(s);
      u32 p[Config::kPvSteps][4];
      float alpha[2];
      if (softmax_16bit(p, alpha, s, rows, shared.k_scales_generic(slot), tile, warp_first_row,
                        work, coordinates)) {
        rescale_output(o, alpha);
      }
      issue_pv_16bit(o, p, shared, slot);
      wgmma_wait<0>();
      wgmma_pin(o);
      wgmma_pin(p);  // read by the wgmma until the wait
      release(shared, slot);
    }
  }

  // Half INT8 with the consumer warpgroups taking turns to issue their MMAs (as full INT8's
  // main_loop_in_turns), FlashAttention-3's ping-pong. With three stages, P V one tile behind
  // (tiles_16bit_pv_behind); with two, in turn t a warpgroup issues tile t's Q K^T and tile
  // t - 1's P V, waits for both, then makes tile t's P and rescales the output while the next
  // warpgroup's MMAs hold the tensor cores.
  __device__ __forceinline__ static void main_loop_16bit_pv_in_turns(
      float (&o)[kOutputTiles][4], RowState& rows, const SharedLayout& shared,
      const BlockWork& work, int group, int warp_first_row, int visible_tiles,
      LaneCoordinates coordinates) {
    if (group == Config::kConsumerGroups - 1) pass_turn(group);  // group 0 goes first
    int turn = 0;
    if constexpr (Config::kPvBehindScores) {
      if (visible_tiles > 0) {
        tiles_16bit_pv_behind(
            o, rows, shared, work, group, warp_first_row, visible_tiles, coordinates,
            [group] { wait_for_turn(group); }, [group] { pass_turn(group); });
        // Turns 0 .. visible_tiles are taken; the first tile past this warpgroup's diagonal is
        // released here, the rest (with their turns) by pass_idle_turns.
        turn = visible_tiles + 1;
        if (visible_tiles < work.tiles) {
          wait_until_full(shared, visible_tiles);
          release(shared, visible_tiles % kStages);
        }
      }
    } else if (visible_tiles > 0) {
      u32 p[Config::kPvSteps][4];
      int s[kScoreTiles][4];
      float alpha[2];
      wait_until_full(shared, 0);
      wait_for_turn(group);
      issue_score_tile(s, shared, group, 0);
      pass_turn(group);
      wgmma_wait<0>();
      wgmma_pin(s);
      // The output is still zero: no rescale.
      softmax_16bit(p, alpha, s, rows, shared.k_scales_generic(0), 0, warp_first_row, work,
                    coordinates);
      for (turn = 1; turn < visible_tiles; ++turn) {
        wait_until_full(shared, turn);
        wait_for_turn(group);
        issue_score_tile(s, shared, group, turn % kStages);
        issue_pv_16bit(o, p, shared, (turn - 1) % kStages);
        pass_turn(group);
        wgmma_wait<0>();
        wgmma_pin(s);
        wgmma_pin(o);
        wgmma_pin(p);
        release(shared, (turn - 1) % kStages);
        if (softmax_16bit(p, alpha, s, rows, shared.k_scales_generic(turn % kStages), turn,
                          warp_first_row, work, coordinates)) {
          rescale_output(o, alpha);
        }
      }
      // The last P V.
      if (turn < work.tiles) wait_until_full(shared, turn);
      wait_for_turn(group);
      issue_pv_16bit(o, p, shared, (turn - 1) % kStages);
      pass_turn(group);
      wgmma_wait<0>();
      wgmma_pin(o);
      wgmma_pin(p);
      release(shared, (turn - 1) % kStages);
      if (turn < work.tiles) release(shared, turn % kStages);
      ++turn;
    }
    pass_idle_turns(shared, work, group, turn);
  }
};

}  // namespace kernels
}  // namespace intfa
