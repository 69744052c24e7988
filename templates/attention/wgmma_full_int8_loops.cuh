// The Hopper attention kernel's main loops for full INT8 (attention_forward_wgmma.cuh: consume
// picks one by Config): P in 8 bits, P.V into INT32 accumulators folded into the FP32 output per
// tile. main_loop waits for each MMA; tiles_pv_behind runs P.V one tile behind Q.K^T
// (kPvBehindScores); main_loop_in_turns lets the consumer warpgroups take turns (kTakesTurns),
// with main_turns_beside_pv for its softmax beside the warpgroup's own P.V (kSoftmaxBesidePv).
#pragma once

#include "attention/wgmma_tile_steps.cuh"

namespace intfa {
namespace kernels {

template <class Config>
struct WgmmaFullInt8Loops : WgmmaTileSteps<Config> {
  using Steps = WgmmaTileSteps<Config>;
  // What the loops take from the tile steps and the pipeline.
  using Steps::fold_into_output;
  using Steps::frame_tile;
  using Steps::gather_p;
  using Steps::issue_pv;
  using Steps::issue_score_tile;
  using Steps::kOutputTiles;
  using Steps::kScoreTiles;
  using Steps::kStages;
  using Steps::pass_idle_turns;
  using Steps::pass_turn;
  using Steps::quantize_tile;
  using Steps::release;
  using Steps::round_p;
  using Steps::scale_scores;
  using Steps::sum_tile;
  using Steps::tile_reference;
  using Steps::wait_for_turn;
  using Steps::wait_until_full;
  using typename Steps::BlockWork;
  using typename Steps::RowState;
  using typename Steps::SharedLayout;
  using typename Steps::Softmax;
  using typename Steps::TileP;

  // The turns of main_loop_in_turns after the first tile's softmax when kSoftmaxBesidePv (lever
  // 4 of issue 22): a turn issues tile t's Q K^T first and tile t - 1's P V after it, makes
  // tile t's P (into the other of two P sets: the running wgmma still reads the first) while
  // that P V runs, then folds it. Unrolled by two so that the sets swap by name. Leaves tile
  // visible_tiles - 1's P in `current` and returns the next turn.
  template <class IssueValues, class FoldValues, class QuantizeScores>
  __device__ __forceinline__ static int main_turns_beside_pv(
      TileP& current, int (&s)[kScoreTiles][4], IssueValues& issue_values, FoldValues& fold_values,
      QuantizeScores& quantize_scores, const SharedLayout& shared, int group, int visible_tiles) {
    constexpr int kChunks = Config::kPvChunks;
    TileP other;
    auto take_turn = [&](TileP& previous, TileP& next, int t) {
      int acc[kChunks][Config::kPvColumns / 8][4];
      wait_until_full(shared, t);
      wait_for_turn(group);
      issue_score_tile(s, shared, group, t % kStages);
      issue_values(acc, previous, t - 1);
      pass_turn(group);
      wgmma_wait<1>();
      quantize_scores(s, next, t);
      wgmma_wait<0>();
      fold_values(acc, previous, t - 1);
    };
    int turn = 1;
    for (; turn + 1 < visible_tiles; turn += 2) {
      take_turn(current, other, turn);
      take_turn(other, current, turn + 1);
    }
    if (turn < visible_tiles) {
      take_turn(current, other, turn);
      current = other;
      ++turn;
    }
    return turn;
  }

  // The consumer warpgroups take turns to issue their MMAs (FlashAttention-3's ping-pong), so
  // one's softmax runs while another's MMAs hold the tensor cores. In turn t a warpgroup issues
  // tile t - 1's P V and tile t's Q K^T, then folds P V while Q K^T runs. Every warpgroup takes
  // tiles + 1 turns (tiles above its causal diagonal only pass the turn on), so the turns stay in
  // step. The prologue and epilogue turns are peeled so that each loop waits on its MMAs
  // unconditionally, which ptxas needs to leave them asynchronous.
  __device__ __forceinline__ static void main_loop_in_turns(float (&o)[kOutputTiles][4],
                                                            RowState& rows,
                                                            const SharedLayout& shared,
                                                            const BlockWork& work, int group,
                                                            int warp_first_row, int visible_tiles,
                                                            LaneCoordinates coordinates) {
    constexpr int kChunks = Config::kPvChunks;
    auto issue_values = [&](int(&acc)[kChunks][Config::kPvColumns / 8][4], const TileP& tile_p,
                            int tile) {
#pragma unroll
      for (int chunk = 0; chunk < kChunks; ++chunk) {
        issue_pv(acc[chunk], tile_p.p, shared, tile % kStages, chunk, 0, Config::kPvSteps);
      }
    };
    auto fold_values = [&](int(&acc)[kChunks][Config::kPvColumns / 8][4], TileP& tile_p, int tile) {
      wgmma_pin(tile_p.p);
      release(shared, tile % kStages);
      float gamma[2];
      frame_tile(gamma, tile_p, rows, o);
#pragma unroll
      for (int chunk = 0; chunk < kChunks; ++chunk) {
        wgmma_pin(acc[chunk]);
        fold_into_output(o, acc[chunk], chunk, gamma, nullptr, coordinates);
      }
      sum_tile(rows, gamma, tile_p);
    };
    auto quantize_scores = [&](int(&s)[kScoreTiles][4], TileP& tile_p, int tile) {
      wgmma_pin(s);
      quantize_tile(tile_p, s, rows, shared.k_scales_generic(tile % kStages),
                    tile * Config::kBlockN, warp_first_row, work, coordinates);
    };

    if (group == Config::kConsumerGroups - 1) pass_turn(group);  // group 0 goes first
    int turn = 0;
    if (visible_tiles > 0) {
      int s[kScoreTiles][4];
      TileP current;
      wait_until_full(shared, 0);
      wait_for_turn(group);
      issue_score_tile(s, shared, group, 0);
      pass_turn(group);
      wgmma_wait<0>();
      quantize_scores(s, current, 0);
      if constexpr (Config::kSoftmaxBesidePv) {
        turn = main_turns_beside_pv(current, s, issue_values, fold_values, quantize_scores, shared,
                                    group, visible_tiles);
      } else {
        for (turn = 1; turn < visible_tiles; ++turn) {
          int acc[kChunks][Config::kPvColumns / 8][4];
          wait_until_full(shared, turn);
          wait_for_turn(group);
          issue_values(acc, current, turn - 1);
          issue_score_tile(s, shared, group, turn % kStages);
          pass_turn(group);
          wgmma_wait<1>();
          fold_values(acc, current, turn - 1);
          wgmma_wait<0>();
          quantize_scores(s, current, turn);
        }
      }
      int acc[kChunks][Config::kPvColumns / 8][4];
      if (turn < work.tiles) wait_until_full(shared, turn);
      wait_for_turn(group);
      issue_values(acc, current, turn - 1);
      pass_turn(group);
      wgmma_wait<0>();
      fold_values(acc, current, turn - 1);
      if (turn < work.tiles) release(shared, turn % kStages);
      ++turn;
    }
    pass_idle_turns(shared, work, group, turn);
  }

  // P V of one tile with both output chunks in flight at once (kPvChunksTogether), each folded
  // into the output as soon as it is done.
  __device__ __forceinline__ static void fold_tile_values_together(
      float (&o)[kOutputTiles][4], TileP& tile_p, const SharedLayout& shared, int slot,
      const float (&gamma)[2], LaneCoordinates coordinates) {
    int acc[2][Config::kPvColumns / 8][4];
#pragma unroll
    for (int chunk = 0; chunk < 2; ++chunk) {
      issue_pv(acc[chunk], tile_p.p, shared, slot, chunk, 0, Config::kPvSteps);
    }
    wgmma_wait<1>();
    wgmma_pin(acc[0]);
    fold_into_output(o, acc[0], 0, gamma, nullptr, coordinates);
    wgmma_wait<0>();
    wgmma_pin(acc[1]);
    wgmma_pin(tile_p.p);  // read by the wgmma until the last wait
    fold_into_output(o, acc[1], 1, gamma, nullptr, coordinates);
  }

  // Full INT8 with P V one tile behind Q K^T (kPvBehindScores): FlashAttention-3's overlap of a
  // warpgroup's softmax with its own P V, as tiles_16bit_pv_behind does for half INT8. Step t
  // waits for tile t's Q K^T and takes its scores, row maxima and reference (tile_scores), then
  // issues tile t - 1's P V, and while that runs rounds tile t's P into quantize_p_pair words
  // (round_p: the exponentials) and takes tile t - 1's fold factors (frame_tile: after tile
  // t - 2's fold, which a rebase of the frame must follow); then it waits for the P V, releases
  // its slot, folds it into the output, adds its row sums and only then gathers tile t's P into
  // the fragments the P V read, so one set of P registers does. Per tile the same operations in
  // the same order as main_loop: the output and the sums are the same bits. The P V is issued
  // after the maxima, not beside the Q K^T: with the K scales loaded and the maxima taken while
  // the P V accumulators and P are live, ptxas spilled 48-76 bytes at d=64 with three
  // warpgroups (and sank the P V's issue below the maxima itself). The first Q K^T and the last
  // P V are peeled, so that no wgmma is in flight across the loop's back edge (C7514:
  // tiles_16bit_pv_behind). A slot is released one step later than main_loop releases it.
  __device__ __forceinline__ static void tiles_pv_behind(float (&o)[kOutputTiles][4],
                                                         RowState& rows, const SharedLayout& shared,
                                                         const BlockWork& work, int group,
                                                         int warp_first_row, int visible_tiles,
                                                         LaneCoordinates coordinates) {
    constexpr int kChunks = Config::kPvChunks;
    using Accumulators = int[kChunks][Config::kPvColumns / 8][4];
    using Multipliers = float[1][2][Softmax::kKBlocks];
    TileP current;  // the tile whose P V is issued next
    u32 pairs[kScoreTiles][2];
    // Tile `tile`'s S = Q K^T, waited for, as scores y with their multipliers and reference.
    auto tile_scores = [&](float(&y)[1][kScoreTiles][4], Multipliers& c_tile, float(&reference)[2],
                           int tile) {
      int s[kScoreTiles][4];
      const float* k_scales = shared.k_scales_generic(tile % kStages);
      wait_until_full(shared, tile);
      issue_score_tile(s, shared, group, tile % kStages);
      wgmma_wait<0>();
      wgmma_pin(s);
      scale_scores(y, s, k_scales, tile * Config::kBlockN, warp_first_row, work, coordinates);
      tile_reference(reference, c_tile, y, rows, k_scales);
    };
    auto issue_values = [&](Accumulators& acc, int tile) {
#pragma unroll
      for (int chunk = 0; chunk < kChunks; ++chunk) {
        issue_pv(acc[chunk], current.p, shared, tile % kStages, chunk, 0, Config::kPvSteps);
      }
    };
    auto fold_values = [&](Accumulators& acc, int tile) {
      float gamma[2];
      frame_tile(gamma, current, rows, o);
      wgmma_wait<0>();
      wgmma_pin(current.p);  // read by the wgmma until the wait
      release(shared, tile % kStages);
#pragma unroll
      for (int chunk = 0; chunk < kChunks; ++chunk) {
        wgmma_pin(acc[chunk]);
        fold_into_output(o, acc[chunk], chunk, gamma, nullptr, coordinates);
      }
      sum_tile(rows, gamma, current);
    };

    {
      float y[1][kScoreTiles][4];
      Multipliers c_tile;
      tile_scores(y, c_tile, current.reference, 0);
      round_p(pairs, y, c_tile, current.reference);
    }
    gather_p(current, pairs);
    for (int tile = 1; tile < visible_tiles; ++tile) {
      float y[1][kScoreTiles][4];
      Multipliers c_tile;
      float reference[2];
      tile_scores(y, c_tile, reference, tile);
      Accumulators acc;
      issue_values(acc, tile - 1);
      round_p(pairs, y, c_tile, reference);
      fold_values(acc, tile - 1);
      gather_p(current, pairs);
      current.reference[0] = reference[0];
      current.reference[1] = reference[1];
    }
    // The last P V.
    Accumulators acc;
    issue_values(acc, visible_tiles - 1);
    fold_values(acc, visible_tiles - 1);
  }

  // Per tile: S = Q K^T, P, then P V folded into the output. With per-block V, each 64-token
  // block of a tile has its own scale per channel, so its part of P.V folds on its own.
  // (Issuing the next tile's Q K^T ahead, to overlap its softmax with this tile's P.V, measured
  // slower on the H100: ptxas serialises the warpgroup around the registers in flight.)
  __device__ __forceinline__ static void main_loop(float (&o)[kOutputTiles][4], RowState& rows,
                                                   const AttentionParams& attention,
                                                   const SharedLayout& shared,
                                                   const BlockWork& work, int group,
                                                   int warp_first_row, int visible_tiles,
                                                   LaneCoordinates coordinates) {
    const int v_blocks = attention.v_padded_seq / kVTokenBlock;
    const float* head_v_scales =
        Config::kPerBlockV
            ? attention.v_scale +
                  (static_cast<i64>(work.batch) * attention.heads_kv + work.head_kv) * v_blocks *
                      Config::kHeadDim
            : nullptr;
    for (int tile = 0; tile < visible_tiles; ++tile) {
      const int slot = tile % kStages;
      wait_until_full(shared, tile);
      int s[kScoreTiles][4];
      issue_score_tile(s, shared, group, slot);
      wgmma_wait<0>();
      wgmma_pin(s);
      TileP current;
      quantize_tile(current, s, rows, shared.k_scales_generic(slot), tile * Config::kBlockN,
                    warp_first_row, work, coordinates);
      float gamma[2];
      frame_tile(gamma, current, rows, o);
      if constexpr (Config::kPvChunksTogether) {
        fold_tile_values_together(o, current, shared, slot, gamma, coordinates);
      } else {
#pragma unroll
        for (int chunk = 0; chunk < Config::kPvChunks; ++chunk) {
#pragma unroll
          for (int part = 0; part < Config::kPvSteps / Config::kStepsPerFold; ++part) {
            // A tile can reach past V's last block: P is zero there, and no scale exists.
            const int block = tile * Config::kBlockN / kVTokenBlock + part;
            if (block >= v_blocks) continue;
            int acc[Config::kPvColumns / 8][4];
            issue_pv(acc, current.p, shared, slot, chunk, part * Config::kStepsPerFold,
                     Config::kStepsPerFold);
            wgmma_wait<0>();
            wgmma_pin(acc);
            wgmma_pin(current.p);  // read by the wgmma until the wait
            fold_into_output(
                o, acc, chunk, gamma,
                Config::kPerBlockV ? head_v_scales + block * Config::kHeadDim : nullptr,
                coordinates);
          }
        }
      }
      sum_tile(rows, gamma, current);
      release(shared, slot);
    }
  }
};

}  // namespace kernels
}  // namespace intfa
