#include "render/render.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <type_traits>
#include <vector>

#include "families/any_spec.hpp"
#include "intfa/errors.hpp"
#include "numerics/option_names.hpp"
#include "render/template_set.hpp"
#include "support/temp_dir.hpp"

namespace intfa::render {
namespace {

using attention::AttentionSpec;
using families::AnySpec;
using families::render;
using quantize::QuantizeKernel;
using quantize::QuantizeSpec;

AttentionSpec attention_spec() {
  AttentionSpec spec;
  spec.path = KernelPath::kMmaSync;
  spec.arch = device::Arch::kSm90a;
  spec.head_dim = 128;
  spec.block_m = 128;
  spec.block_n = 64;
  spec.warps = 8;
  spec.stages = 2;
  spec.causal = true;
  spec.numerics.p_encoding = kernels::PEncoding::kUnsigned255;
  return spec;
}

TEST(Render, UnitIncludesTheTemplateAndInstantiatesTheSpecValues) {
  const RenderedUnit unit = render(attention_spec(), TemplateSet::embedded());
  EXPECT_NE(unit.source.find("#include \"attention/attention_forward.cuh\""), std::string::npos);
  EXPECT_NE(unit.source.find("template __global__ void " + unit.name_expression), std::string::npos);
  EXPECT_NE(unit.name_expression.find("AttentionConfig<intfa_spec_128_128_64_8_2_"),
            std::string::npos)
      << unit.name_expression;
  for (const char* member : {"int head_dim = 128;", "int block_m = 128;", "int block_n = 64;",
                             "int warps = 8;", "int stages = 2;", "bool causal = true;"}) {
    EXPECT_NE(unit.source.find(std::string("static constexpr ") + member), std::string::npos)
        << member << "\n"
        << unit.source;
  }
}

// The kernels' Numerics type has a member per option of the list (include/intfa/numerics.hpp),
// by the option's name: a new option reaches both attention kernels with no rendering code.
TEST(Render, EveryNumericsOptionIsAMemberOfTheKernelsNumericsType) {
  for (KernelPath path : {KernelPath::kMmaSync, KernelPath::kWgmma}) {
    AttentionSpec spec = attention_spec();
    spec.path = path;
    spec.warps = path == KernelPath::kWgmma ? 12 : 8;
    spec.numerics.p_encoding = kernels::PEncoding::kSigned127;
    const RenderedUnit unit = render(spec, TemplateSet::embedded());
    for_each_numerics_field(spec.numerics, [&](const auto& field, const auto& value) {
      using Enum = std::decay_t<decltype(value)>;
      const std::string member = std::string("static constexpr ") + OptionTable<Enum>::kernel_enum +
                                 " " + field.name + " = " + option_kernel_argument(value) + ";";
      EXPECT_NE(unit.source.find(member), std::string::npos) << member << "\n" << unit.source;
    });
    EXPECT_NE(unit.name_expression.find(", intfa_numerics_kSigned127_"), std::string::npos)
        << unit.name_expression;
  }
}

TEST(Render, EqualSpecsRenderEqualUnitsAndEveryFieldChangesTheUnit) {
  const TemplateSet templates = TemplateSet::embedded();
  const AttentionSpec base = attention_spec();
  EXPECT_EQ(render(base, templates), render(base, templates));
  std::vector<AttentionSpec> variants;
  auto with = [&](auto change) {
    AttentionSpec spec = base;
    change(spec);
    variants.push_back(spec);
  };
  with([](AttentionSpec& s) { s.head_dim = 64; });
  with([](AttentionSpec& s) { s.block_m = 64; });
  with([](AttentionSpec& s) { s.block_n = 32; });
  with([](AttentionSpec& s) { s.warps = 4; });
  with([](AttentionSpec& s) { s.stages = 3; });
  with([](AttentionSpec& s) { s.qk_bits = 4; });
  with([](AttentionSpec& s) { s.variant = kernels::AttentionVariant::kHalfInt8; });
  with([](AttentionSpec& s) { s.input_type = kernels::ElementType::kBF16; });
  with([](AttentionSpec& s) { s.output_type = kernels::ElementType::kBF16; });
  with([](AttentionSpec& s) { s.causal = false; });
  with([](AttentionSpec& s) { s.numerics.p_encoding = kernels::PEncoding::kSigned127; });
  with([](AttentionSpec& s) { s.numerics.p_scale = kernels::PScaleReference::kTileMax; });
  with([](AttentionSpec& s) { s.numerics.v_granularity = kernels::VScaleGranularity::kPerBlock; });
  with([](AttentionSpec& s) { s.numerics.k_granularity = kernels::KScaleGranularity::kPerBlock; });
  with([](AttentionSpec& s) {
    s.path = KernelPath::kWgmma;
    s.numerics.k_granularity = kernels::KScaleGranularity::kPerBlock;
  });
  for (const AttentionSpec& spec : variants) {
    EXPECT_NE(spec, base);
    EXPECT_NE(render(spec, templates).source, render(base, templates).source) << spec.to_string();
  }
}

TEST(Render, IncludeClosureHoldsEveryTemplateTheUnitReaches) {
  QuantizeSpec spec;
  spec.kernel = QuantizeKernel::kRows;
  spec.head_dim = 128;
  const RenderedUnit unit = render(spec, TemplateSet::embedded());
  const std::vector<std::string> expected = {
      "common/grid_dependency.cuh", "common/kernel_enums.h",
      "common/numeric.cuh",         "common/types.h",
      "quantize/quantize_params.h", "quantize/quantize_rows.cuh",
      "quantize/rotate_row.cuh",    "quantize/rotation.h"};
  EXPECT_EQ(unit.headers, expected);
}

TEST(Render, EveryQuotedIncludeOfEveryTemplateIsATemplate) {
  const TemplateSet templates = TemplateSet::embedded();
  ASSERT_FALSE(templates.files().empty());
  for (const auto& [path, source] : templates.files()) {
    for (const std::string& include : quoted_includes(source)) {
      EXPECT_NE(templates.find(include), nullptr) << path << " includes missing " << include;
    }
  }
}

TEST(Render, EmbeddedTemplatesAreTheSourceTreesBytes) {
  const TemplateSet embedded = TemplateSet::embedded();
  const TemplateSet tree = TemplateSet::from_directory(INTFA_TEST_TEMPLATE_DIR);
  EXPECT_EQ(embedded.files(), tree.files());
}

TEST(Render, QuotedIncludesFindsOnlyQuotedDirectives) {
  const auto includes = quoted_includes(
      "#include \"a/b.cuh\"\n  #  include \"c.h\" // why\n#include <cstdio>\n// #include "
      "\"commented.h\"\nint x;\n");
  EXPECT_EQ(includes, (std::vector<std::string>{"a/b.cuh", "c.h"}));
}

TEST(Render, TemplateDirectoryThatDoesNotExistNamesTheVariable) {
  try {
    TemplateSet::from_directory("/nonexistent/intfa/templates");
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& error) {
    EXPECT_EQ(error.field(), "INTFA_TEMPLATE_DIR");
  }
}

// The error of a template tree whose quantize_rows.cuh is `source`, from rendering that kernel.
std::string template_dir_error(const std::string& source) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir.path() / "quantize");
  std::ofstream(dir.path() / "quantize" / "quantize_rows.cuh") << source;
  const TemplateSet templates = TemplateSet::from_directory(dir.path());
  QuantizeSpec spec;
  spec.kernel = QuantizeKernel::kRows;
  spec.head_dim = 64;
  try {
    render(spec, templates);
  } catch (const InvalidArgument& error) {
    EXPECT_EQ(error.field(), "INTFA_TEMPLATE_DIR") << error.what();
    return error.what();
  }
  ADD_FAILURE() << "rendered from a template tree that is not intfa's:\n" << source;
  return "";
}

// A template directory is the user's input: what is wrong with it names the variable, not an
// internal error.
TEST(Render, AMissingIncludedTemplateNamesTheTemplateDirectory) {
  EXPECT_NE(template_dir_error("#include \"common/missing.cuh\"\n").find("common/missing.cuh"),
            std::string::npos);
}

// NVRTC would open an absolute path, or climb out of its include directories: no template may make
// it read another file.
TEST(Render, ATemplateMayIncludeOnlyTemplatesAndCudaHeaders) {
  for (const char* include :
       {"#include </etc/passwd>", "#include \"/etc/passwd\"", "#include \"../../secret.h\"",
        "  #  include <cuda/../../../etc/passwd>", "#include_next </etc/hostname>",
        "#include SOME_MACRO", "#import </etc/passwd>",
        // Spellings the preprocessor reads as the same directive: line splices, comments, the
        // digraph and trigraph of '#', a block comment that ends on the directive's line.
        "#\\\ninclude </etc/passwd>", "#inc\\\nlude </etc/passwd>", "/**/#include </etc/passwd>",
        "#/**/include </etc/passwd>", "%:include </etc/passwd>", "?\?=include </etc/passwd>",
        "/* a comment\n*/ #include </etc/passwd>", "# include<cuda/../../etc/passwd>",
        // __has_include opens the file to answer.
        "#if __has_include(</etc/passwd>)\n#endif", "#if __has_include ( \"/etc/passwd\" )\n#endif",
        "#if __has_include_next(</etc/passwd>)\n#endif"}) {
    EXPECT_NE(template_dir_error(std::string(include) + "\n").find("quantize_rows.cuh"),
              std::string::npos)
        << include;
  }
}

// What is no directive stays none: commented out, or text in a literal.
TEST(Render, IncludesInCommentsAndLiteralsAreNoDirectives) {
  EXPECT_TRUE(include_directives("// #include </etc/passwd>\n/* #include </etc/passwd> */\n"
                                 "const char* text = \"#include </etc/passwd>\";\n"
                                 "const char* raw = R\"x(\n// )\" */ x)x\";\n")
                  .empty());
}

TEST(Render, IncludeDirectivesTellQuotedAngledAndMacroIncludesApart) {
  const auto includes = include_directives(
      "#include \"a.cuh\"\n#include <cuda_fp16.h>\n#include_next <b.h>\n#include NAME\n");
  ASSERT_EQ(includes.size(), 4u);
  EXPECT_TRUE(includes[0].quoted && includes[0].target == "a.cuh");
  EXPECT_TRUE(includes[1].angled && includes[1].target == "cuda_fp16.h");
  EXPECT_TRUE(includes[2].angled && includes[2].target == "b.h");
  EXPECT_TRUE(!includes[3].quoted && !includes[3].angled && includes[3].target == "NAME");
}

QuantizeSpec rows_spec() {
  QuantizeSpec spec;
  spec.kernel = QuantizeKernel::kRows;
  spec.arch = device::Arch::kSm90a;
  spec.head_dim = 128;
  return spec;
}

paged::PagedSpec decode_spec() {
  return paged::decode_spec(device::Arch::kSm90a, 128, 8, kernels::ElementType::kF16,
                            kernels::ElementType::kF16, PagedDecodeConfig{16, 64, 2});
}

// Each family's reader, and AnySpec's (which dispatches on "family" to it), give back the spec.
template <typename Spec>
void expect_round_trip(const Spec& spec) {
  const json::Value read = json::parse(spec.to_json().dump());
  EXPECT_EQ(Spec::from_json(read), spec) << spec.to_string();
  EXPECT_EQ(AnySpec::from_json(read), AnySpec(spec)) << spec.to_string();
}

TEST(KernelSpecJson, RoundTripsEveryField) {
  AttentionSpec attention = attention_spec();
  attention.path = KernelPath::kWgmma;
  attention.qk_bits = 4;
  attention.variant = kernels::AttentionVariant::kHalfInt8;
  attention.input_type = kernels::ElementType::kBF16;
  attention.output_type = kernels::ElementType::kBF16;
  attention.numerics.p_scale = kernels::PScaleReference::kTileMax;
  attention.numerics.v_granularity = kernels::VScaleGranularity::kPerChannel;
  attention.varlen = true;
  attention.q_dot_k_mean = true;
  attention.rotate = QKRotation::kAuto;
  attention.quantizes_q = true;
  attention.numerics.k_granularity = kernels::KScaleGranularity::kPerBlock;
  expect_round_trip(attention);
  QuantizeSpec rows = rows_spec();
  rows.kernel = QuantizeKernel::kKV;
  rows.qk_bits = 4;
  rows.input_type = kernels::ElementType::kBF16;
  rows.smooth_k = true;
  rows.q_dot_k_mean = true;
  rows.rotate = QKRotation::kAuto;
  rows.v_granularity = kernels::VScaleGranularity::kPerChannel;
  rows.k_granularity = kernels::KScaleGranularity::kPerBlock;
  expect_round_trip(rows);
  paged::PagedSpec decode = decode_spec();
  decode.bits = 4;
  decode.input_type = kernels::ElementType::kBF16;
  decode.output_type = kernels::ElementType::kF32;
  decode.config = PagedDecodeConfig{32, 128, 3};
  expect_round_trip(decode);
}

// The runtime's memory is keyed by kernel_id: a field it left out would give two kernels one slot.
template <typename Spec>
void expect_each_edit_changes_the_id(const Spec& base,
                                     const std::vector<std::function<void(Spec&)>>& edits) {
  for (std::size_t i = 0; i < edits.size(); ++i) {
    Spec edited = base;
    edits[i](edited);
    ASSERT_NE(edited, base) << "edit " << i;
    EXPECT_NE(kernel_id(edited), kernel_id(base)) << "edit " << i << ": " << edited.to_string();
  }
}

TEST(KernelId, DiffersExactlyWhenTheSpecsDiffer) {
  const AttentionSpec base = attention_spec();
  EXPECT_EQ(kernel_id(base), kernel_id(attention_spec()));
  expect_each_edit_changes_the_id<AttentionSpec>(
      base, {
                [](AttentionSpec& s) { s.path = KernelPath::kWgmma; },
                [](AttentionSpec& s) { s.arch = device::Arch::kSm89; },
                [](AttentionSpec& s) { s.head_dim = 64; },
                [](AttentionSpec& s) { s.block_m = 64; },
                [](AttentionSpec& s) { s.block_n = 128; },
                [](AttentionSpec& s) { s.warps = 4; },
                [](AttentionSpec& s) { s.stages = 3; },
                [](AttentionSpec& s) { s.qk_bits = 4; },
                [](AttentionSpec& s) { s.variant = kernels::AttentionVariant::kHalfInt8; },
                [](AttentionSpec& s) { s.input_type = kernels::ElementType::kBF16; },
                [](AttentionSpec& s) { s.output_type = kernels::ElementType::kBF16; },
                [](AttentionSpec& s) { s.causal = false; },
                [](AttentionSpec& s) { s.numerics.p_encoding = kernels::PEncoding::kSigned127; },
                [](AttentionSpec& s) { s.numerics.p_scale = kernels::PScaleReference::kTileMax; },
                [](AttentionSpec& s) {
                  s.numerics.v_granularity = kernels::VScaleGranularity::kPerBlock;
                },
                [](AttentionSpec& s) {
                  s.numerics.k_granularity = kernels::KScaleGranularity::kPerBlock;
                },
                [](AttentionSpec& s) { s.varlen = true; },
                [](AttentionSpec& s) { s.q_dot_k_mean = true; },
                [](AttentionSpec& s) { s.rotate = QKRotation::kOn; },
                [](AttentionSpec& s) { s.rotate = QKRotation::kAuto; },
                [](AttentionSpec& s) { s.quantizes_q = true; },
            });
  expect_each_edit_changes_the_id<QuantizeSpec>(
      rows_spec(),
      {
          [](QuantizeSpec& s) { s.kernel = QuantizeKernel::kChannelMean; },
          [](QuantizeSpec& s) { s.arch = device::Arch::kSm89; },
          [](QuantizeSpec& s) { s.head_dim = 64; },
          [](QuantizeSpec& s) { s.input_type = kernels::ElementType::kBF16; },
          [](QuantizeSpec& s) { s.qk_bits = 4; },
          [](QuantizeSpec& s) { s.smooth_k = true; },
          [](QuantizeSpec& s) { s.q_dot_k_mean = true; },
          [](QuantizeSpec& s) { s.rotate = QKRotation::kOn; },
          [](QuantizeSpec& s) { s.rotate = QKRotation::kAuto; },
          [](QuantizeSpec& s) { s.v_granularity = kernels::VScaleGranularity::kPerBlock; },
          [](QuantizeSpec& s) { s.k_granularity = kernels::KScaleGranularity::kPerBlock; },
      });
  expect_each_edit_changes_the_id<paged::PagedSpec>(
      decode_spec(), {
                         [](paged::PagedSpec& s) { s.kernel = paged::PagedKernel::kMergeStates; },
                         [](paged::PagedSpec& s) { s.arch = device::Arch::kSm89; },
                         [](paged::PagedSpec& s) { s.head_dim = 64; },
                         [](paged::PagedSpec& s) { s.bits = 4; },
                         [](paged::PagedSpec& s) { s.input_type = kernels::ElementType::kBF16; },
                         [](paged::PagedSpec& s) { s.output_type = kernels::ElementType::kF32; },
                         [](paged::PagedSpec& s) { s.config.block_rows = 32; },
                         [](paged::PagedSpec& s) { s.config.stage_tokens = 128; },
                         [](paged::PagedSpec& s) { s.config.stages = 3; },
                     });
}

// Each family numbers its kernels apart from the others' (families/spec_format.hpp): no two
// kernels of different families share an id, even with every other field alike.
TEST(KernelId, NoTwoFamiliesKernelsMeet) {
  std::vector<render::KernelId> ids;
  for (QuantizeKernel kernel :
       {QuantizeKernel::kRows, QuantizeKernel::kChannelMean, QuantizeKernel::kVScale,
        QuantizeKernel::kV, QuantizeKernel::kKVScale, QuantizeKernel::kKV}) {
    QuantizeSpec spec;
    spec.kernel = kernel;
    ids.push_back(kernel_id(spec));
  }
  for (KernelPath path : {KernelPath::kMmaSync, KernelPath::kWgmma}) {
    AttentionSpec spec;
    spec.path = path;
    ids.push_back(kernel_id(spec));
  }
  for (paged::PagedKernel kernel : {paged::PagedKernel::kAppend, paged::PagedKernel::kDecode,
                                    paged::PagedKernel::kMergeStates}) {
    paged::PagedSpec spec;
    spec.kernel = kernel;
    ids.push_back(kernel_id(spec));
  }
  for (std::size_t i = 0; i < ids.size(); ++i) {
    for (std::size_t j = i + 1; j < ids.size(); ++j) EXPECT_NE(ids[i], ids[j]) << i << ", " << j;
  }
}

// What the JIT core takes: the rendered unit, the arch, and the spec's text and JSON as its
// description (kept out of the unit, hence out of the cache key).
TEST(KernelSource, HoldsTheUnitTheArchAndTheSpecsDescription) {
  const AttentionSpec spec = attention_spec();
  const KernelSource source = kernel_source(spec, TemplateSet::embedded());
  EXPECT_EQ(source.unit, render(spec, TemplateSet::embedded()));
  EXPECT_EQ(source.arch, spec.arch);
  EXPECT_EQ(source.text, spec.to_string());
  EXPECT_EQ(source.json, spec.to_json());
  EXPECT_EQ(source.unit.source.find(source.text), std::string::npos);
  const KernelRecipe recipe(spec);
  EXPECT_EQ(recipe.id(), kernel_id(spec));
  EXPECT_EQ(recipe.source(TemplateSet::embedded()).unit, source.unit);
}

TEST(KernelSpecJson, ASpecWrittenBeforeTheRotationExistedHasNeitherItNorTheLseTerm) {
  QuantizeSpec rows;
  rows.kernel = QuantizeKernel::kRows;
  rows.head_dim = 128;
  rows.smooth_k = true;
  const json::Value value = rows.to_json();
  json::Value without = json::Value::object();
  for (const auto& [name, member] : value.as_object()) {
    if (name != "rotate" && name != "q_dot_k_mean") without.set(name, member);
  }
  EXPECT_EQ(QuantizeSpec::from_json(without), rows);
  EXPECT_EQ(AnySpec::from_json(without), AnySpec(rows));
}

TEST(Render, QuantizeRowsNamesItsSmoothingLseTermAndRotation) {
  QuantizeSpec spec;
  spec.kernel = QuantizeKernel::kRows;
  spec.head_dim = 64;
  spec.q_dot_k_mean = true;
  spec.rotate = QKRotation::kOn;
  const RenderedUnit unit = render(spec, TemplateSet::embedded());
  EXPECT_NE(unit.name_expression.find("quantize_rows<64, intfa::kernels::ElementType::kF16, 8, "
                                      "false, true, intfa::kernels::QKRotation::kOn>"),
            std::string::npos)
      << unit.name_expression;
  EXPECT_EQ(spec.to_string(), "quantize_rows sm_80 d64 f16->i8 q_dot_k_mean rotate");
  spec.rotate = QKRotation::kAuto;
  EXPECT_NE(render(spec, TemplateSet::embedded())
                .name_expression.find("intfa::kernels::QKRotation::kAuto>"),
            std::string::npos);
  EXPECT_EQ(spec.to_string(), "quantize_rows sm_80 d64 f16->i8 q_dot_k_mean rotate=auto");
  // "rotate": a boolean for off and on, as every build wrote it, "auto" for automatic rotation;
  // anything else names the member.
  EXPECT_EQ(spec.to_json().at("rotate").as_string(), "auto");
  json::Value sometimes = spec.to_json();
  sometimes.set("rotate", "sometimes");
  try {
    QuantizeSpec::from_json(sometimes);
    ADD_FAILURE() << "rotate \"sometimes\" was read";
  } catch (const InvalidArgument& error) {
    EXPECT_EQ(error.field(), "spec.rotate");
  }
}

// Per-block K is a member of both attention kernels' Numerics type, and quantize_rows of K becomes
// quantize_row_blocks.
TEST(Render, PerBlockKNamesItsArgumentAndItsQuantizeKernel) {
  const TemplateSet templates = TemplateSet::embedded();
  AttentionSpec spec = attention_spec();
  const std::string per_block_member =
      "static constexpr intfa::kernels::KScaleGranularity k_granularity = "
      "intfa::kernels::KScaleGranularity::kPerBlock;";
  const std::string per_token = render(spec, templates).source;
  EXPECT_EQ(per_token.find(per_block_member), std::string::npos) << per_token;
  spec.numerics.k_granularity = kernels::KScaleGranularity::kPerBlock;
  const std::string per_block = render(spec, templates).source;
  EXPECT_NE(per_block.find(per_block_member), std::string::npos) << per_block;
  EXPECT_NE(spec.to_string().find(" k-scale=block"), std::string::npos);
  spec.path = KernelPath::kWgmma;
  const std::string wgmma = render(spec, templates).source;
  EXPECT_NE(wgmma.find(per_block_member), std::string::npos) << wgmma;
  QuantizeSpec rows;
  rows.kernel = QuantizeKernel::kRows;
  rows.head_dim = 128;
  rows.smooth_k = true;
  rows.k_granularity = kernels::KScaleGranularity::kPerBlock;
  EXPECT_NE(render(rows, templates)
                .name_expression.find("quantize_row_blocks<128, "
                                      "intfa::kernels::ElementType::kF16, true, "
                                      "intfa::kernels::QKRotation::kOff>"),
            std::string::npos);
  EXPECT_EQ(rows.to_string(), "quantize_rows sm_80 d128 f16->i8 smooth_k k-scale=block");
}

TEST(KernelSpecJson, ASpecWrittenBeforeVarlenExistedIsNotVarlen) {
  json::Value value = attention_spec().to_json();
  json::Value without = json::Value::object();
  for (const auto& [name, member] : value.as_object()) {
    if (name != "varlen" && name != "k_granularity" && name != "quantizes_q") {
      without.set(name, member);
    }
  }
  const AttentionSpec spec = AttentionSpec::from_json(without);
  EXPECT_FALSE(spec.varlen);
  EXPECT_FALSE(spec.quantizes_q);  // written before the Hopper kernel's own Q pass: INT8 Q
  EXPECT_EQ(spec, attention_spec());
  // And the member round-trips where it is set.
  AttentionSpec quantizes_q = attention_spec();
  quantizes_q.quantizes_q = true;
  EXPECT_TRUE(AttentionSpec::from_json(quantizes_q.to_json()).quantizes_q);
}

TEST(KernelSpecJson, BadMembersAreNamed) {
  json::Value value = attention_spec().to_json();
  value.set("variant", "quarter_int8");
  try {
    AnySpec::from_json(value);
    FAIL();
  } catch (const InvalidArgument& error) {
    EXPECT_EQ(error.field(), "spec.variant");
  }
  json::Value missing = json::Value::object();
  EXPECT_THROW(AnySpec::from_json(missing), InvalidArgument);
  // A family no build has: named as spec.family.
  value = attention_spec().to_json();
  value.set("family", "attention_fp8");
  try {
    AnySpec::from_json(value);
    FAIL();
  } catch (const InvalidArgument& error) {
    EXPECT_EQ(error.field(), "spec.family");
  }
}

}  // namespace
}  // namespace intfa::render
