// The Hopper attention kernel (KernelPath::kWgmma) without a GPU: when the runtime picks it, the
// rules of its configs, its shared memory, what TMA can describe, the four-number config form,
// and how its configs travel through the tuning database.
#include <gtest/gtest.h>

#include <string>

#include "api/kernel_lists.hpp"
#include "attention/attention_test_support.hpp"
#include "attention/wgmma_params.h"
#include "families/any_spec.hpp"
#include "families/attention_wgmma_family.hpp"
#include "intfa/errors.hpp"
#include "render/render.hpp"
#include "spec/attention_spec.hpp"
#include "support/temp_dir.hpp"
#include "tune/tune_test_support.hpp"
#include "tune/tuning_database.hpp"

namespace intfa::attention {
namespace {

using testing::sm90a_request;

TEST(WgmmaSpec, TheHeuristicPicksTheHopperKernelExactlyWhereItServes) {
  for (int head_dim : {64, 128, 256}) {
    const SpecRequest hopper = sm90a_request(head_dim);
    EXPECT_EQ(heuristic_config(hopper).path, KernelPath::kWgmma) << head_dim;
    EXPECT_EQ(make_spec(hopper, heuristic_config(hopper)).path, KernelPath::kWgmma);
    EXPECT_EQ(portable_heuristic_config(hopper).path, KernelPath::kMmaSync);
    for (device::Arch arch : {device::Arch::kSm80, device::Arch::kSm86, device::Arch::kSm89}) {
      SpecRequest other = hopper;
      other.arch = arch;
      EXPECT_EQ(heuristic_config(other).path, KernelPath::kMmaSync);
    }
    SpecRequest half = hopper;
    half.variant = Variant::kHalfInt8;
    EXPECT_TRUE(wgmma_serves(half)) << head_dim;
    EXPECT_EQ(heuristic_config(half).path, KernelPath::kWgmma) << head_dim;
    SpecRequest packed = hopper;
    packed.varlen = true;
    EXPECT_TRUE(wgmma_serves(packed)) << head_dim;
    EXPECT_EQ(heuristic_config(packed).path, KernelPath::kWgmma) << head_dim;
    SpecRequest int4 = hopper;
    int4.qk_bits = 4;
    EXPECT_FALSE(wgmma_serves(int4));
    EXPECT_EQ(heuristic_config(int4).path, KernelPath::kMmaSync);
  }
}

// The field an invalid spec is refused for ("(accepted)" when it is valid).
std::string refused_field_of(const AttentionSpec& spec) {
  try {
    validate_config(spec, 227 * 1024);
  } catch (const InvalidArgument& error) {
    return error.field();
  }
  return "(accepted)";
}

// The field an invalid Hopper config is refused for ("(accepted)" when it is valid).
std::string refused_field(const SpecRequest& request, const KernelConfig& config) {
  try {
    validate_config(make_spec(request, config), 227 * 1024);
  } catch (const InvalidArgument& error) {
    return error.field();
  } catch (const Unsupported&) {
    return "(unsupported)";
  }
  return "(accepted)";
}

TEST(WgmmaSpec, ConfigRulesNameTheBadField) {
  constexpr KernelPath kWgmma = KernelPath::kWgmma;
  const SpecRequest d128 = sm90a_request(128);
  EXPECT_EQ(refused_field(d128, {128, 128, 12, 2, kWgmma}), "(accepted)");
  EXPECT_EQ(refused_field(d128, {128, 64, 12, 3, kWgmma}), "(accepted)");
  EXPECT_EQ(refused_field(d128, {64, 128, 8, 2, kWgmma}), "(accepted)");
  EXPECT_EQ(refused_field(sm90a_request(64), {64, 128, 8, 2, kWgmma}), "(accepted)");
  EXPECT_EQ(refused_field(d128, {128, 128, 8, 2, kWgmma}), "config.block_m");
  EXPECT_EQ(refused_field(d128, {64, 128, 4, 2, kWgmma}), "config.warps");
  EXPECT_EQ(refused_field(sm90a_request(256), {64, 64, 8, 2, kWgmma}),
            "config.warps");  // two blocks per SM
  EXPECT_EQ(refused_field(d128, {128, 128, 14, 2, kWgmma}), "config.warps");
  EXPECT_EQ(refused_field(d128, {192, 128, 16, 2, kWgmma}), "(accepted)");
  EXPECT_EQ(refused_field(sm90a_request(256), {192, 64, 16, 2, kWgmma}),
            "config.warps");  // registers
  EXPECT_EQ(refused_field(d128, {64, 128, 12, 2, kWgmma}), "config.block_m");
  EXPECT_EQ(refused_field(d128, {128, 32, 12, 2, kWgmma}), "config.block_n");
  EXPECT_EQ(refused_field(d128, {128, 128, 12, 5, kWgmma}), "config.stages");
  EXPECT_EQ(refused_field(sm90a_request(64), {192, 128, 16, 2, kWgmma}), "(accepted)");
  EXPECT_EQ(refused_field(sm90a_request(256), {128, 128, 12, 2, kWgmma}), "config.block_n");

  // Half INT8: one or two consumer warpgroups; three at d=64, and at d=128 with 64-key tiles
  // only (registers).
  SpecRequest half = d128;
  half.variant = Variant::kHalfInt8;
  EXPECT_EQ(refused_field(half, {128, 128, 12, 2, kWgmma}), "(accepted)");
  EXPECT_EQ(refused_field(half, {64, 128, 8, 2, kWgmma}), "(accepted)");
  EXPECT_EQ(refused_field(half, {192, 128, 16, 2, kWgmma}), "config.warps");
  EXPECT_EQ(refused_field(half, {192, 64, 16, 3, kWgmma}), "(accepted)");
  try {
    validate_config(make_spec(half, {192, 128, 16, 3, kWgmma}), 227 * 1024);
    ADD_FAILURE() << "three half-INT8 warpgroups with 128-key tiles at d=128 were accepted";
  } catch (const InvalidArgument& error) {
    EXPECT_NE(std::string(error.what()).find("block_n = 64"), std::string::npos) << error.what();
  }
  SpecRequest half64 = sm90a_request(64);
  half64.variant = Variant::kHalfInt8;
  EXPECT_EQ(refused_field(half64, {192, 128, 16, 2, kWgmma}), "(accepted)");
  SpecRequest int4 = d128;
  int4.qk_bits = 4;
  EXPECT_EQ(refused_field(int4, {128, 128, 12, 2, kWgmma}), "problem.qk_bits");
  SpecRequest packed = d128;
  packed.varlen = true;
  EXPECT_EQ(refused_field(packed, {128, 128, 12, 2, kWgmma}), "(accepted)");
  AttentionSpec packed_q_pass = make_spec(packed, {128, 128, 12, 2, kWgmma});
  packed_q_pass.quantizes_q = true;
  packed_q_pass.input_type = kernels::ElementType::kF16;
  EXPECT_EQ(refused_field_of(packed_q_pass), "(accepted)");
  SpecRequest ampere = d128;
  ampere.arch = device::Arch::kSm80;
  EXPECT_EQ(refused_field(ampere, {128, 128, 12, 2, kWgmma}), "(unsupported)");
}

TEST(WgmmaSpec, SharedBytesAreQThenKVAndScalesPerStageThenTheOutput) {
  const AttentionSpec spec =
      make_spec(sm90a_request(128), KernelConfig{128, 128, 12, 3, KernelPath::kWgmma});
  // 1024 alignment slack + Q 128 x 128 + 3 x (K 128 x 128 + V 128 x 128 + 512 B of scales
  // padded to 1024) + the output 128 x 128 x 2 + V's 128 channel scales + barriers.
  EXPECT_EQ(shared_bytes(spec), 1024 + 128 * 128 + 3 * (2 * 128 * 128 + 1024) +
                                    128 * 128 * 2 + 128 * 4 + kernels::kWgmmaBarrierBytes);
  // d=64 stores its output from the registers: no staging.
  const AttentionSpec d64 =
      make_spec(sm90a_request(64), KernelConfig{128, 128, 12, 2, KernelPath::kWgmma});
  EXPECT_EQ(shared_bytes(d64), 1024 + 128 * 64 + 2 * (2 * 128 * 64 + 1024) +
                                   kernels::kWgmmaBarrierBytes);
}

TEST(WgmmaSpec, RendersTheWarpSpecialisedKernelWithAGridConstantParameter) {
  const AttentionSpec spec =
      make_spec(sm90a_request(64), KernelConfig{192, 128, 16, 2, KernelPath::kWgmma});
  const render::RenderedUnit unit = families::render(spec, render::TemplateSet::embedded());
  EXPECT_NE(unit.source.find("attention_forward_wgmma<"), std::string::npos) << unit.source;
  EXPECT_NE(unit.source.find("WgmmaAttentionConfig<intfa_spec_64_128_16_2_"), std::string::npos)
      << unit.source;
  EXPECT_NE(unit.source.find("const __grid_constant__ intfa::kernels::WgmmaAttentionParams"),
            std::string::npos)
      << unit.source;
  EXPECT_EQ(AttentionSpec::from_json(spec.to_json()), spec);
  EXPECT_EQ(families::AnySpec::from_json(spec.to_json()), families::AnySpec(spec));
}

// attention_forward_16bit's request (with_q_in_kernel): the Hopper kernel quantizes Q itself, in
// Q's type, with K smoothing's LSE term when K is smoothed and rotated when Q and K are; not on
// the portable kernel, not with INT4 Q.K or packed sequences, and not with
// INTFA_QUANTIZE_Q_IN_KERNEL=0.
TEST(WgmmaSpec, TheHopperKernelQuantizesQItselfWhereItServesTheSixteenBitCall) {
  testing::ScopedEnv unset("INTFA_QUANTIZE_Q_IN_KERNEL", nullptr);
  AttentionOptions smoothed;  // K smoothing is the default
  const SpecRequest hopper = with_q_in_kernel(sm90a_request(128), smoothed, DType::kBF16);
  const AttentionSpec spec = make_spec(hopper, heuristic_config(hopper));
  EXPECT_TRUE(spec.quantizes_q);
  EXPECT_TRUE(spec.q_dot_k_mean);
  EXPECT_EQ(spec.input_type, kernels::ElementType::kBF16);
  const render::RenderedUnit unit = families::render(spec, render::TemplateSet::embedded());
  for (const char* member :
       {"bool quantizes_q = true;", "bool q_dot_k_mean = true;",
        "intfa::kernels::ElementType input_type = intfa::kernels::ElementType::kBF16;"}) {
    EXPECT_NE(unit.source.find(std::string("static constexpr ") + member), std::string::npos)
        << member << "\n"
        << unit.source;
  }
  EXPECT_NE(spec.to_string().find(" q=in_kernel+q_dot_k_mean"), std::string::npos);
  // Automatic rotation is the default: the kernel reads the decisions K's pass made.
  EXPECT_EQ(spec.rotate, QKRotation::kAuto);
  EXPECT_NE(unit.source.find("static constexpr intfa::kernels::QKRotation rotate_q = "
                             "intfa::kernels::QKRotation::kAuto;"),
            std::string::npos);
  EXPECT_NE(spec.to_string().find("+rotate=auto"), std::string::npos) << spec.to_string();
  EXPECT_EQ(spec.to_json().at("rotate").as_string(), "auto");
  EXPECT_EQ(AttentionSpec::from_json(spec.to_json()), spec);
  EXPECT_EQ(families::AnySpec::from_json(spec.to_json()), families::AnySpec(spec));
  EXPECT_NO_THROW(validate_config(spec, 227 * 1024));

  AttentionOptions plain;
  plain.smooth_k = false;
  plain.rotate_qk = QKRotation::kOff;
  const AttentionSpec unsmoothed = make_spec(
      with_q_in_kernel(sm90a_request(64), plain, DType::kF16), heuristic_config(sm90a_request(64)));
  EXPECT_TRUE(unsmoothed.quantizes_q);
  EXPECT_FALSE(unsmoothed.q_dot_k_mean);
  EXPECT_EQ(unsmoothed.rotate, QKRotation::kOff);
  EXPECT_NE(families::render(unsmoothed, render::TemplateSet::embedded())
                .source.find("static constexpr intfa::kernels::QKRotation rotate_q = "
                             "intfa::kernels::QKRotation::kOff;"),
            std::string::npos);
  // Off and on are written as the booleans every build wrote.
  EXPECT_FALSE(unsmoothed.to_json().at("rotate").as_bool());

  // Rotated Q and K: the kernel rotates Q's rows in its own pass, and says so.
  AttentionOptions rotated;
  rotated.rotate_qk = QKRotation::kOn;
  const SpecRequest rotating = with_q_in_kernel(sm90a_request(128), rotated, DType::kF16);
  const AttentionSpec rotating_spec = make_spec(rotating, heuristic_config(rotating));
  EXPECT_TRUE(rotating_spec.quantizes_q);
  EXPECT_EQ(rotating_spec.rotate, QKRotation::kOn);
  EXPECT_NE(families::render(rotating_spec, render::TemplateSet::embedded())
                .source.find("static constexpr intfa::kernels::QKRotation rotate_q = "
                             "intfa::kernels::QKRotation::kOn;"),
            std::string::npos);
  EXPECT_TRUE(rotating_spec.to_json().at("rotate").as_bool());
  EXPECT_NE(rotating_spec.to_string().find(" q=in_kernel+q_dot_k_mean+rotate"), std::string::npos)
      << rotating_spec.to_string();
  EXPECT_EQ(AttentionSpec::from_json(rotating_spec.to_json()), rotating_spec);
  EXPECT_NO_THROW(validate_config(rotating_spec, 227 * 1024));

  // Where Q keeps its own pass.
  EXPECT_FALSE(make_spec(hopper, portable_heuristic_config(hopper)).quantizes_q);
  EXPECT_EQ(make_spec(rotating, portable_heuristic_config(rotating)).rotate, QKRotation::kOff);
  SpecRequest int4 = sm90a_request(128);
  int4.qk_bits = 4;
  const SpecRequest int4_request = with_q_in_kernel(int4, smoothed, DType::kF16);
  EXPECT_FALSE(int4_request.quantize_q_in_kernel);
  EXPECT_FALSE(
      make_spec(int4_request, KernelConfig{128, 128, 12, 2, KernelPath::kWgmma}).quantizes_q);
  // Packed sequences too: the Q pass finds each sequence's rows from the offsets.
  SpecRequest packed = sm90a_request(128);
  packed.varlen = true;
  const SpecRequest packed_request = with_q_in_kernel(packed, smoothed, DType::kF16);
  EXPECT_TRUE(packed_request.quantize_q_in_kernel);
  EXPECT_TRUE(
      make_spec(packed_request, KernelConfig{128, 128, 12, 2, KernelPath::kWgmma}).quantizes_q);
  {
    testing::ScopedEnv off("INTFA_QUANTIZE_Q_IN_KERNEL", "0");
    EXPECT_FALSE(with_q_in_kernel(sm90a_request(128), smoothed, DType::kF16).quantize_q_in_kernel);
  }
  {
    testing::ScopedEnv bad("INTFA_QUANTIZE_Q_IN_KERNEL", "sometimes");
    try {
      with_q_in_kernel(sm90a_request(128), smoothed, DType::kF16);
      ADD_FAILURE() << "a malformed INTFA_QUANTIZE_Q_IN_KERNEL was accepted";
    } catch (const InvalidArgument& error) {
      EXPECT_EQ(error.field(), "INTFA_QUANTIZE_Q_IN_KERNEL");
    }
  }

  // The portable kernel refuses a spec that asks it to quantize Q; the LSE term needs the pass.
  AttentionSpec portable = make_spec(sm90a_request(128), portable_heuristic_config(hopper));
  portable.quantizes_q = true;
  EXPECT_EQ(refused_field_of(portable), "spec.quantizes_q");
  AttentionSpec term_alone = make_spec(sm90a_request(128), heuristic_config(hopper));
  term_alone.q_dot_k_mean = true;
  EXPECT_EQ(refused_field_of(term_alone), "spec.q_dot_k_mean");
  AttentionSpec rotation_alone = make_spec(sm90a_request(128), heuristic_config(hopper));
  for (QKRotation rotation : {QKRotation::kOn, QKRotation::kAuto}) {
    rotation_alone.rotate = rotation;
    EXPECT_EQ(refused_field_of(rotation_alone), "spec.rotate");
  }
}

// What a deployment bundle lists for one 16-bit call: Q's rows kernel only where some listed
// config's kernel does not quantize Q itself (a portable config beside the Hopper one, or the
// variable set to 0 while the bundle is built).
TEST(WgmmaSpec, TheCallListsLeaveQsPassOutOnlyWhereEveryKernelQuantizesQ) {
  testing::ScopedEnv unset("INTFA_QUANTIZE_Q_IN_KERNEL", nullptr);
  const SpecRequest request = sm90a_request(128);
  const AttentionOptions numerics;  // K smoothed: Q's pass would write the LSE term
  auto q_rows_listed = [&](const std::vector<KernelConfig>& configs) {
    int q_rows = 0, attention_in_kernel = 0;
    for (const families::AnySpec& spec :
         aot::attention_call_specs(request, DType::kF16, numerics, configs)) {
      const auto* rows = spec.get_if<quantize::QuantizeSpec>();
      q_rows +=
          rows != nullptr && rows->kernel == quantize::QuantizeKernel::kRows && rows->q_dot_k_mean;
      const auto* attention = spec.get_if<AttentionSpec>();
      attention_in_kernel += attention != nullptr && attention->quantizes_q;
    }
    return std::pair{q_rows, attention_in_kernel};
  };
  const KernelConfig hopper = heuristic_config(request);
  const KernelConfig portable = portable_heuristic_config(request);
  EXPECT_EQ(q_rows_listed({hopper}), (std::pair{0, 1}));
  EXPECT_EQ(q_rows_listed({hopper, portable}), (std::pair{1, 1}));
  EXPECT_EQ(q_rows_listed({portable}), (std::pair{1, 0}));
  testing::ScopedEnv off("INTFA_QUANTIZE_Q_IN_KERNEL", "0");
  EXPECT_EQ(q_rows_listed({hopper}), (std::pair{1, 0}));
}

TEST(WgmmaSpec, FourNumberConfigsWithAProducerWarpgroupAreHopperConfigs) {
  EXPECT_EQ(path_for_config(128, 12), KernelPath::kWgmma);
  EXPECT_EQ(path_for_config(192, 16), KernelPath::kWgmma);
  EXPECT_EQ(path_for_config(64, 8), KernelPath::kWgmma);
  // The portable kernel's 8 warps have 16 or 32 rows each.
  for (int block_m : {128, 256}) EXPECT_EQ(path_for_config(block_m, 8), KernelPath::kMmaSync);
  for (int warps : {2, 4}) EXPECT_EQ(path_for_config(64, warps), KernelPath::kMmaSync);
  EXPECT_NE(KernelConfig({128, 128, 12, 2, KernelPath::kWgmma}).to_string().find("path=wgmma"),
            std::string::npos);
}

// Dense BHND INT8 tensors at 16-byte aligned (never dereferenced) addresses.
struct FakeTensors {
  AttentionProblem problem{2, 4, 2, 1000, 1000, 128, false};
  AttentionTensors tensors;
  FakeTensors() {
    const TensorShape q_shape{2, 4, 1000, 128};
    const TensorShape kv_shape{2, 2, 1000, 128};
    tensors.q = TensorView::dense(reinterpret_cast<void*>(0x10000), DType::kI8, Layout::kBHND,
                                  q_shape);
    tensors.k = TensorView::dense(reinterpret_cast<void*>(0x20000), DType::kI8, Layout::kBHND,
                                  kv_shape);
    tensors.v = v_int8_view(reinterpret_cast<void*>(0x30000), 2, 2, 1000, 128);
    tensors.k_scale = reinterpret_cast<const float*>(0x40004);  // need not be aligned
  }
};

TEST(WgmmaSpec, TmaIncompatibleTensorsAreNamed) {
  FakeTensors ok;
  EXPECT_EQ(tma_incompatibility(ok.problem, ok.tensors), std::nullopt);

  FakeTensors misaligned;
  misaligned.tensors.q.data = reinterpret_cast<void*>(0x10008);
  const auto q_reason = tma_incompatibility(misaligned.problem, misaligned.tensors);
  ASSERT_TRUE(q_reason.has_value());
  EXPECT_NE(q_reason->find("tensors.q.data"), std::string::npos) << *q_reason;

  FakeTensors strided;
  strided.tensors.k.strides[2] = 136 + 4;  // rows 140 bytes apart
  const auto k_reason = tma_incompatibility(strided.problem, strided.tensors);
  ASSERT_TRUE(k_reason.has_value());
  EXPECT_NE(k_reason->find("tensors.k.strides[2]"), std::string::npos) << *k_reason;

  FakeTensors padded_v;
  padded_v.tensors.v.strides[3] += 8;  // channels 8 bytes further apart than 16-byte steps
  const auto v_reason = tma_incompatibility(padded_v.problem, padded_v.tensors);
  ASSERT_TRUE(v_reason.has_value());
  EXPECT_NE(v_reason->find("tensors.v.strides[3]"), std::string::npos) << *v_reason;

  // A dimension of extent 1 is never stepped: its stride does not matter.
  FakeTensors single_batch;
  single_batch.problem.batch = 1;
  single_batch.tensors.q.strides[0] = 3;
  EXPECT_EQ(tma_incompatibility(single_batch.problem, single_batch.tensors), std::nullopt);
}

TEST(WgmmaSpec, TheTuningDatabaseKeepsTheKernelPath) {
  tune::TuningDatabase database;
  const KernelConfig hopper{128, 128, 12, 2, KernelPath::kWgmma};
  database.merge(tune::testing::entry_for(tune::testing::d128_request(), 4096, hopper));
  const std::string text = database.dump();
  EXPECT_NE(text.find("\"wgmma\""), std::string::npos) << text;
  const tune::TuningDatabase parsed = tune::TuningDatabase::parse(text);
  const tune::TuningEntry* entry = parsed.lookup(
      tune::testing::h100(), tune::ProblemBucket{tune::testing::d128_request(), 4096});
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry->best.config, hopper);

  std::string bad = text;
  bad.replace(bad.find("\"wgmma\""), 7, "\"tma\"");
  try {
    tune::TuningDatabase::parse(bad);
    ADD_FAILURE() << "accepted path \"tma\"";
  } catch (const tune::DatabaseError& error) {
    EXPECT_NE(std::string(error.what()).find("path"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace intfa::attention
