// The option tables (src/api/option_names.hpp) are the one place a numerics value is spelled: the
// spec JSON, the tuning database, the renderer and the CLI all go through them.
#include "numerics/option_names.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "families/any_spec.hpp"

namespace intfa {
namespace {

template <typename Enum>
void expect_a_table_that_round_trips() {
  std::set<std::string> spellings;
  for (const auto& row : OptionTable<Enum>::rows) {
    EXPECT_EQ(parse_option<Enum>(row.name), row.value) << row.name;
    EXPECT_STREQ(option_name(row.value), row.name);
    EXPECT_TRUE(spellings.insert(row.name).second) << "two values spelled " << row.name;
    if (row.old_name != nullptr) {
      EXPECT_EQ(parse_option<Enum>(row.old_name), row.value) << row.old_name;
      EXPECT_TRUE(spellings.insert(row.old_name).second) << "two values spelled " << row.old_name;
    }
    if (row.short_name != nullptr) {
      EXPECT_EQ(parse_option<Enum>(row.short_name), row.value) << "every surface reads it";
      EXPECT_TRUE(spellings.insert(row.short_name).second) << "two values spelled "
                                                            << row.short_name;
    }
  }
  EXPECT_FALSE(parse_option<Enum>("")) << "the empty string names nothing";
  EXPECT_FALSE(parse_option<Enum>("Tile")) << "names are case-sensitive";
}

TEST(OptionNames, EveryValueHasOneNameAndEverySpellingOneValue) {
  expect_a_table_that_round_trips<Variant>();
  expect_a_table_that_round_trips<PEncoding>();
  expect_a_table_that_round_trips<PScaleReference>();
  expect_a_table_that_round_trips<VScaleGranularity>();
  expect_a_table_that_round_trips<KScaleGranularity>();
}

TEST(OptionNames, TheOldSpellingsOfFilesStillRead) {
  EXPECT_EQ(parse_option<PScaleReference>("running_max"), PScaleReference::kRunningMax);
  EXPECT_EQ(parse_option<PScaleReference>("tile_max"), PScaleReference::kTileMax);
  EXPECT_EQ(parse_option<Variant>("half"), Variant::kHalfInt8);
}

TEST(OptionNames, MessagesListTheNames) {
  EXPECT_EQ(option_names_text<VScaleGranularity>(), "tensor, channel or block");
  EXPECT_EQ(option_names_text<PScaleReference>(" or ", "'"), "'running' or 'tile'");
}

// The renderer writes the kernel enumerators of the table: the kernel enum's own names.
TEST(OptionNames, KernelArgumentsAreTheKernelEnumerators) {
  EXPECT_EQ(option_kernel_argument(PScaleReference::kTileMax),
            "intfa::kernels::PScaleReference::kTileMax");
  EXPECT_EQ(option_kernel_argument(VScaleGranularity::kPerBlock),
            "intfa::kernels::VScaleGranularity::kPerBlock");
  EXPECT_EQ(option_kernel_argument(PEncoding::kUnsigned255),
            "intfa::kernels::PEncoding::kUnsigned255");
  EXPECT_EQ(option_kernel_argument(Variant::kHalfInt8),
            "intfa::kernels::AttentionVariant::kHalfInt8");
  EXPECT_EQ(option_kernel_argument(KScaleGranularity::kPerBlock),
            "intfa::kernels::KScaleGranularity::kPerBlock");
}

// A kernel spec's JSON writes the names and reads them back, and a spec written with the old
// p_scale spellings (bundle manifests before the tables) reads as the same spec.
TEST(OptionNames, SpecJsonUsesTheNamesAndReadsTheAliases) {
  attention::AttentionSpec spec;
  spec.path = KernelPath::kMmaSync;
  spec.head_dim = 128;
  spec.block_m = 64;
  spec.block_n = 128;
  spec.warps = 4;
  spec.stages = 2;
  spec.numerics.p_scale = PScaleReference::kTileMax;
  spec.numerics.v_granularity = VScaleGranularity::kPerBlock;
  const json::Value written = spec.to_json();
  EXPECT_EQ(written.at("p_scale").as_string(), "tile");
  EXPECT_EQ(written.at("v_granularity").as_string(), "block");
  EXPECT_EQ(attention::AttentionSpec::from_json(written), spec);
  EXPECT_EQ(families::AnySpec::from_json(written), families::AnySpec(spec));

  std::string text = written.dump(0);
  const std::string::size_type at = text.find("\"tile\"");
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, 6, "\"tile_max\"");
  EXPECT_EQ(attention::AttentionSpec::from_json(json::parse(text)), spec) << text;
}

}  // namespace
}  // namespace intfa
