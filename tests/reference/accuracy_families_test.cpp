// The accuracy intfa.attention's defaults keep on the inputs real models produce (issue 25), from
// the CPU model of the kernels (pipeline_model.hpp: the kernels match it to 1e-3 relative L2 on
// the GPU, so its error against float64 is theirs). Fresh inputs each run (the seed is printed;
// INTFA_TEST_SEED replays one). Two checks per family:
//  - an absolute bound, about 1.2x the largest error of 120 to 240 seeded runs of this very
//    problem (2026-11-25; the spreads are in the comments below): an error above it is a change
//    of the numerics, not a seed;
//  - for a family that needs a transform (K smoothing, the rotation, per-channel V scales), the
//    error on the same inputs without it, which must be clearly larger. Errors over seeds overlap
//    between the two (one seed's outliers are another's easy case); on one seed's inputs they do
//    not, so this is what fails when the transform is turned off or broken.
// bench/RESULTS.md, "Accuracy on the inputs real models produce", has the summary;
// bench/history/2026-11-24.md, "Accuracy on the inputs real models produce: the full tables", all
// of them.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "intfa/attention.hpp"
#include "reference/input_families.hpp"
#include "reference/pipeline_model.hpp"
#include "support/seed.hpp"

namespace intfa::reference {
namespace {

using testing::announced_seed;

// What attention_forward_16bit does under `options` (AttentionOptions{}: the defaults), with the
// Hopper kernels' key tile of 128 keys.
PipelineOptions pipeline_of(const AttentionOptions& options, intfa::Variant variant) {
  return PipelineOptions::of(variant, options, 128);
}

struct Errors {
  double relative_l2 = 0;
  double lse_max_abs_error = 0;  // nats, against the LSE of the original scores
};

// One family's inputs and their float64 attention: 256 query rows of 2 heads against 2048 keys.
// Rows are independent (non-causal), so this has the statistics of a 2048-row problem at an eighth
// of the cost.
struct Problem {
  Shape shape;
  AttentionInputValues inputs;
  std::vector<double> exact, exact_lse;

  Problem(InputFamily family, int head_dim, std::uint64_t seed)
      : shape(make_shape(1, 2, 2, 256, 2048, head_dim, false)),
        inputs(make_inputs(family, shape, seed)),
        exact(shape.q_elements()),
        exact_lse(shape.q_elements() / head_dim) {
    attention_f64(shape, inputs.q.data(), inputs.k.data(), inputs.v.data(), exact.data(),
                  exact_lse.data());
  }

  Errors errors(const PipelineOptions& options) const {
    std::vector<double> out(exact.size()), lse(exact_lse.size());
    attention_pipeline_model(shape, inputs.q.data(), inputs.k.data(), inputs.v.data(), options,
                             out.data(), lse.data());
    Errors result;
    result.relative_l2 = compare(exact.data(), out.data(), out.size()).relative_l2;
    for (std::size_t i = 0; i < lse.size(); ++i) {
      result.lse_max_abs_error =
          std::max(result.lse_max_abs_error, std::fabs(lse[i] - exact_lse[i]));
    }
    return result;
  }
};

// The transform a family needs, which the paired check turns off.
enum class Needs { kNothing, kSmoothing, kRotation, kPerChannelV };

// A family, the options it is held to (the defaults, or with the rotation), the relative L2
// bounds (%) for full and half INT8 at d = 64 and 128, and the LSE's bound.
struct FamilyCase {
  InputFamily family;
  bool rotate;  // rotated explicitly (QKRotation::kOn), else the default (automatic)
  double full_bound, half_bound;
  // The LSE's max |error| (nats) over the problem's 512 rows: its largest scores' INT8 error.
  // Without K smoothing's term added back it would be several nats on keys with offsets.
  double lse_bound;
  Needs needs = Needs::kNothing;
  // The error with the options over the error without what the family needs, on the same inputs
  // (each variant and head dim), at most this.
  double needed_ratio = 0;
};

void PrintTo(const FamilyCase& c, std::ostream* stream) {
  *stream << family_name(c.family) << (c.rotate ? " rotated" : "");
}

// `options` without what the family needs.
PipelineOptions without_what_it_needs(PipelineOptions options, Needs needs) {
  switch (needs) {
    case Needs::kNothing:
      break;
    case Needs::kSmoothing:
      options.smooth_k = false;
      break;
    case Needs::kRotation:
      options.rotate = QKRotation::kOff;
      break;
    case Needs::kPerChannelV:
      options.model.numerics.v_granularity = VGranularity::kPerTensor;
      break;
  }
  return options;
}

class AccuracyOnRealInputs : public ::testing::TestWithParam<FamilyCase> {};

TEST_P(AccuracyOnRealInputs, StaysWithinItsBound) {
  const FamilyCase c = GetParam();
  const std::uint64_t seed = announced_seed();
  AttentionOptions options;
  if (c.rotate) options.rotate_qk = QKRotation::kOn;
  for (int head_dim : {64, 128}) {
    const Problem problem(c.family, head_dim, seed + static_cast<std::uint64_t>(head_dim));
    for (intfa::Variant variant : {intfa::Variant::kFullInt8, intfa::Variant::kHalfInt8}) {
      const bool full = variant == intfa::Variant::kFullInt8;
      const std::string what =
          family_name(c.family) + (full ? " full" : " half") + " d" + std::to_string(head_dim);
      const PipelineOptions pipeline = pipeline_of(options, variant);
      const Errors errors = problem.errors(pipeline);
      // Half INT8 keeps V in 16 bits: V's scales do not apply.
      const bool paired = c.needs != Needs::kNothing && (c.needs != Needs::kPerChannelV || full);
      const double without =
          paired ? problem.errors(without_what_it_needs(pipeline, c.needs)).relative_l2 : 0.0;
      std::cout << "  " << what << ": relative L2 " << 100 * errors.relative_l2 << "%, LSE error "
                << errors.lse_max_abs_error;
      if (paired) std::cout << "; without what it needs " << 100 * without << "%";
      std::cout << "\n";
      EXPECT_LE(100 * errors.relative_l2, full ? c.full_bound : c.half_bound) << what;
      // The LSE is that of the original scores (K smoothing's term added back).
      EXPECT_LE(errors.lse_max_abs_error, c.lse_bound) << what;
      if (paired) {
        EXPECT_LE(errors.relative_l2, c.needed_ratio * without) << what;
      }
    }
  }
}

// The spreads: relative L2 (%) of full / half INT8 over the seeded runs, min to max (d=64 and
// d=128 together), and the paired ratio's largest value.
INSTANTIATE_TEST_SUITE_P(
    Defaults, AccuracyOnRealInputs,
    ::testing::Values(
        // 1.25-1.50 / 0.78-0.97 (112 runs); LSE <= 0.005.
        FamilyCase{InputFamily::kNormal, false, 1.8, 1.15, 0.03},
        // 0.35-0.51 / 0.044-0.060 (120 runs); LSE <= 0.0002.
        FamilyCase{InputFamily::kUniform, false, 0.6, 0.072, 0.03},
        // Smoothed (the default) 1.25-1.49 / 0.78-0.96; not smoothed 2.3-3.7 / 2.0-3.5; with
        // over without at most 0.60 (120 runs). LSE <= 0.005.
        FamilyCase{InputFamily::kKeyOffsets, false, 1.8, 1.15, 0.03, Needs::kSmoothing, 0.8},
        // 2.04-2.58 / 1.60-2.10 (120 runs): Q.K's INT8 error, which none of the options
        // reduces. LSE <= 0.101: scores 2.9x wider.
        FamilyCase{InputFamily::kSharp, false, 3.1, 2.5, 0.2},
        // 1.02-1.70 / 0.65-1.09; per-tensor V 2.5-5.4 (full INT8), with over without at most
        // 0.44 (120 runs): per-channel V scales absorb V's outlier channels. LSE <= 0.006.
        FamilyCase{InputFamily::kValueOutliers, false, 2.05, 1.3, 0.03, Needs::kPerChannelV, 0.6},
        // Automatic rotation (the default) rotates these families' heads, and only theirs: the
        // bounds and the pairs of the explicit rotation below.
        FamilyCase{InputFamily::kOutlierChannels, false, 2.4, 2.15, 1.0, Needs::kRotation, 0.8},
        FamilyCase{InputFamily::kOffsetsAndOutliers, false, 2.4, 2.15, 1.0, Needs::kRotation, 0.8}),
    [](const ::testing::TestParamInfo<FamilyCase>& param_info) {
      return family_name(param_info.param.family);
    });

INSTANTIATE_TEST_SUITE_P(
    Rotated, AccuracyOnRealInputs,
    ::testing::Values(
        // Rotated 1.18-1.98 / 0.84-1.79; not rotated 2.6-4.2 / 2.4-4.1; with over without at
        // most 0.62 (150 runs). LSE <= 0.56 (0.65 seen once in CI): 10x outlier channels make
        // the largest scores tens of nats wide.
        FamilyCase{InputFamily::kOutlierChannels, true, 2.4, 2.15, 1.0, Needs::kRotation, 0.8},
        // Smoothed and rotated 1.19-1.97 / 0.84-1.80; smoothed only 2.6-4.4 / 2.4-4.3; with over
        // without at most 0.61 (242 runs; rotated only: 1.4-2.8, ratio up to 0.91, which
        // k_offset's case checks on its own). LSE <= 0.58.
        FamilyCase{InputFamily::kOffsetsAndOutliers, true, 2.4, 2.15, 1.0, Needs::kRotation, 0.8}),
    [](const ::testing::TestParamInfo<FamilyCase>& param_info) {
      return family_name(param_info.param.family);
    });

// The defaults' K smoothing takes its mean over at most 256 sampled keys: as accurate as the mean
// of all keys (softmax ignores whatever vector is subtracted; only K's range depends on it). Over
// 1000 seeded runs (d=64 and d=128) sampled over exact was 0.956-1.048, mean 1.0006, standard
// deviation 0.0094: the bound 1.10 sits ten deviations out (1.03, three, failed in CI). Without
// smoothing the ratio is about 3 (2.9 and 3.0 when broken on purpose).
TEST(AccuracyOnRealInputsSmoothing, TheSampledMeanIsAsAccurateAsTheExactOne) {
  const std::uint64_t seed = announced_seed();
  for (int head_dim : {64, 128}) {
    PipelineOptions sampled = pipeline_of(AttentionOptions{}, intfa::Variant::kHalfInt8);
    PipelineOptions exact = sampled;
    exact.exact_mean = true;
    const Problem problem(InputFamily::kKeyOffsets, head_dim, seed);
    const double sampled_error = problem.errors(sampled).relative_l2;
    const double exact_error = problem.errors(exact).relative_l2;
    std::cout << "  d" << head_dim << ": sampled mean " << 100 * sampled_error << "%, exact mean "
              << 100 * exact_error << "%\n";
    EXPECT_LE(sampled_error, exact_error * 1.10) << "d" << head_dim;
  }
}

// The model of a more precise Q.K that no kernel has yet (QuantizedRows::low_terms): on sharp
// heads, whose error is Q.K's INT8 rounding, Q in two INT8 terms takes Q's share of it away and Q
// and K in two terms nearly all of it (bench/history/2026-11-25.md, "Q and K in two INT8 terms:
// what more precise Q.K would buy"; issue 25). Over 380 seeded runs, with Q
// in two terms over one: 0.78-0.89 (full INT8), 0.67-0.77 (half); Q and K in two: 0.54-0.64
// (full: P's and V's error remains), 0.0067-0.0081 (half); standard deviations 0.02 or less.
TEST(AccuracyOfTwoTermQueryKey, TakesAwayTheErrorOfSharpHeads) {
  const std::uint64_t seed = announced_seed();
  for (int head_dim : {64, 128}) {
    const Problem problem(InputFamily::kSharp, head_dim, seed);
    for (intfa::Variant variant : {intfa::Variant::kFullInt8, intfa::Variant::kHalfInt8}) {
      const PipelineOptions one_term = pipeline_of(AttentionOptions{}, variant);
      PipelineOptions two_term_q = one_term;
      two_term_q.q_low_terms = true;
      PipelineOptions two_terms = two_term_q;
      two_terms.k_low_terms = true;
      const double error = problem.errors(one_term).relative_l2;
      const double error_q = problem.errors(two_term_q).relative_l2;
      const double error_qk = problem.errors(two_terms).relative_l2;
      const bool full = variant == intfa::Variant::kFullInt8;
      std::cout << "  d" << head_dim << (full ? " full" : " half") << ": one term " << 100 * error
                << "%, Q in two " << 100 * error_q << "%, Q and K in two " << 100 * error_qk
                << "%\n";
      const std::string what = "d" + std::to_string(head_dim) + (full ? " full" : " half");
      EXPECT_LE(error_q, 0.95 * error) << what;
      EXPECT_LE(error_qk, (full ? 0.75 : 0.02) * error) << what;
    }
  }
}

// Without the term K smoothing's LSE would be off by softmax_scale * q . mean: several nats on
// keys with 4-sigma offsets. The model adds it back as the kernels do.
TEST(AccuracyOnRealInputsSmoothing, TheLseTermIsWhatMakesTheLseThatOfTheOriginalScores) {
  const std::uint64_t seed = announced_seed();
  const Shape shape = make_shape(1, 2, 1, 64, 512, 128, true);
  const AttentionInputValues inputs = make_inputs(InputFamily::kKeyOffsets, shape, seed);
  std::vector<double> exact(shape.q_elements()), exact_lse(shape.q_elements() / 128);
  attention_f64(shape, inputs.q.data(), inputs.k.data(), inputs.v.data(), exact.data(),
                exact_lse.data());
  PipelineOptions options = pipeline_of(AttentionOptions{}, intfa::Variant::kFullInt8);
  ASSERT_TRUE(options.smooth_k);
  std::vector<double> out(exact.size()), lse(exact_lse.size());
  attention_pipeline_model(shape, inputs.q.data(), inputs.k.data(), inputs.v.data(), options,
                           out.data(), lse.data());
  // The same without the term: the LSE of the smoothed scores.
  const int kv_heads = shape.batch * shape.heads_kv;
  const std::vector<double> means64 =
      sampled_channel_means(inputs.k.data(), kv_heads, shape.seq_kv, shape.head_dim);
  const std::vector<float> means(means64.begin(), means64.end());
  const QuantizedRows k8 = quantize_rows_smoothed(inputs.k.data(), kv_heads, shape.seq_kv,
                                                  shape.head_dim, 8, means.data());
  const QuantizedRows q8 =
      quantize_rows(inputs.q.data(), shape.heads_q * shape.seq_q, shape.head_dim, 8);
  const QuantizedV v8 = quantize_v(inputs.v.data(), 1, shape.heads_kv, shape.seq_kv, shape.head_dim,
                                   options.model.numerics.v_granularity);
  std::vector<double> smoothed_out(exact.size()), smoothed_lse(exact_lse.size());
  attention_quantized_model(shape, q8, k8, &v8, nullptr, options.model, smoothed_out.data(),
                            smoothed_lse.data());
  double with_term = 0, without_term = 0;
  for (std::size_t i = 0; i < lse.size(); ++i) {
    ASSERT_EQ(std::isinf(lse[i]), std::isinf(exact_lse[i])) << "row " << i;
    if (std::isinf(lse[i])) continue;
    with_term = std::max(with_term, std::fabs(lse[i] - exact_lse[i]));
    without_term = std::max(without_term, std::fabs(smoothed_lse[i] - exact_lse[i]));
  }
  EXPECT_LE(with_term, 0.05);
  EXPECT_GE(without_term, 1.0);
  // The outputs agree: the term changes only the LSE.
  EXPECT_EQ(out, smoothed_out);
}

}  // namespace
}  // namespace intfa::reference
