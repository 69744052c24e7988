// The cache key is a function of exactly what determines a cubin's bytes: stable for equal inputs
// (in this process and in another), different when any input changes, blind to templates the unit
// does not include.
#include "cache/cache_key.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>
#include <string>
#include <vector>

#include "cache/cache_test_support.hpp"
#include "families/any_spec.hpp"
#include "render/render.hpp"
#include "render/template_set.hpp"

namespace intfa::cache {
namespace {

using intfa::testing::quantize_rows_spec;
using intfa::testing::TempDirectory;
namespace fs = std::filesystem;

// Fixed rather than nvrtc::compile_options(), whose -lineinfo depends on the environment.
const std::vector<std::string> kOptions = {"-std=c++17", "--gpu-architecture=sm_80", "--fmad=true",
                                           "--ftz=true"};
const nvrtc::Version kNvrtc{13, 0};

// The key's inputs for a spec of one family (quantize_rows unless a test says otherwise).
template <typename Spec>
struct SpecKeyRecipe {
  Spec spec;
  std::vector<std::string> options = kOptions;
  nvrtc::Version nvrtc_version = kNvrtc;
  std::uint32_t format_version = kFormatVersion;
};

struct KeyRecipe : SpecKeyRecipe<quantize::QuantizeSpec> {
  KeyRecipe() { spec = quantize_rows_spec(); }
};

template <typename Spec>
CacheKey key_for(const SpecKeyRecipe<Spec>& recipe, const render::TemplateSet& templates) {
  const render::RenderedUnit unit = families::render(recipe.spec, templates);
  return make_key({unit, templates, recipe.options, recipe.nvrtc_version, recipe.spec.arch,
                   recipe.format_version});
}

template <typename Spec>
CacheKey key_for(const SpecKeyRecipe<Spec>& recipe) {
  static const render::TemplateSet templates = render::TemplateSet::embedded();
  return key_for(recipe, templates);
}

// A copy of the source templates, so tests can edit single bytes of it.
class TemplateCopy {
 public:
  TemplateCopy() { fs::copy(INTFA_TEST_TEMPLATE_DIR, root(), fs::copy_options::recursive); }
  fs::path root() const { return directory_.path() / "templates"; }
  render::TemplateSet load() const { return render::TemplateSet::from_directory(root()); }

  // Flips the lowest bit of the file's last byte (a newline becomes a vertical tab), which
  // changes its bytes without changing what it includes.
  void change_one_byte(const std::string& template_path) const {
    const fs::path path = root() / template_path;
    std::vector<char> bytes = intfa::testing::read_bytes(path);
    ASSERT_FALSE(bytes.empty()) << path;
    bytes.back() = static_cast<char>(bytes.back() ^ 0x01);
    intfa::testing::write_bytes(path, bytes);
  }

 private:
  TempDirectory directory_;
};

TEST(CacheKey, IsTheSameForTheSameInputs) {
  EXPECT_EQ(key_for(KeyRecipe()), key_for(KeyRecipe()));
  EXPECT_EQ(key_for(KeyRecipe()).hex().size(), 32u);
}

TEST(CacheKey, IsTheSameInAnotherProcess) {
  int pipe_ends[2];
  ASSERT_EQ(::pipe(pipe_ends), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(pipe_ends[0]);
    const std::string hex = key_for(KeyRecipe(), render::TemplateSet::embedded()).hex();
    const bool written =
        ::write(pipe_ends[1], hex.data(), hex.size()) == static_cast<ssize_t>(hex.size());
    ::_exit(written ? 0 : 1);
  }
  ::close(pipe_ends[1]);
  std::string from_child;
  char buffer[64];
  for (ssize_t got; (got = ::read(pipe_ends[0], buffer, sizeof buffer)) > 0;) {
    from_child.append(buffer, static_cast<std::size_t>(got));
  }
  ::close(pipe_ends[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(from_child, key_for(KeyRecipe()).hex());
}

TEST(CacheKey, ChangesWithEachSpecFieldTheRenderedUnitUses) {
  std::vector<KeyRecipe> recipes(9);
  recipes[1].spec.head_dim = 64;
  recipes[2].spec.input_type = kernels::ElementType::kBF16;
  recipes[3].spec.qk_bits = 4;
  recipes[4].spec.smooth_k = true;
  recipes[5].spec.arch = device::Arch::kSm86;
  recipes[6].spec.rotate = QKRotation::kOn;
  recipes[7].spec.q_dot_k_mean = true;
  recipes[8].spec.rotate = QKRotation::kAuto;
  std::set<std::string> sources;
  std::set<CacheKey> keys;
  for (const KeyRecipe& recipe : recipes) {
    if (recipe.spec.arch == recipes[0].spec.arch) {
      sources.insert(families::render(recipe.spec, render::TemplateSet::embedded()).source);
    }
    keys.insert(key_for(recipe));
  }
  ASSERT_EQ(sources.size(), recipes.size() - 1) << "each field but the arch must change the unit";
  // The arch is not in the unit's text: the compile options carry it into the key.
  EXPECT_EQ(families::render(recipes[5].spec, render::TemplateSet::embedded()).source,
            families::render(recipes[0].spec, render::TemplateSet::embedded()).source);
  EXPECT_EQ(keys.size(), recipes.size());
}

TEST(CacheKey, ChangesWithVarlen) {
  SpecKeyRecipe<attention::AttentionSpec> dense;
  dense.spec.path = KernelPath::kMmaSync;
  dense.spec.head_dim = 128;
  dense.spec.block_m = 64;
  dense.spec.block_n = 64;
  dense.spec.warps = 4;
  dense.spec.stages = 2;
  SpecKeyRecipe<attention::AttentionSpec> varlen = dense;
  varlen.spec.varlen = true;
  const std::string dense_source =
      families::render(dense.spec, render::TemplateSet::embedded()).source;
  const std::string varlen_source =
      families::render(varlen.spec, render::TemplateSet::embedded()).source;
  EXPECT_NE(dense_source.find("static constexpr bool varlen = false;"), std::string::npos)
      << dense_source;
  EXPECT_NE(varlen_source.find("static constexpr bool varlen = true;"), std::string::npos)
      << varlen_source;
  EXPECT_NE(key_for(dense), key_for(varlen));
}

TEST(CacheKey, IgnoresSpecFieldsThatLeaveTheRenderedUnitAlone) {
  KeyRecipe tiled;
  // V's scales: quantize_rows does not render them (and a quantize spec has no attention tiling
  // to leave alone).
  tiled.spec.v_granularity = kernels::VScaleGranularity::kPerChannel;
  EXPECT_NE(tiled.spec, KeyRecipe().spec);
  EXPECT_EQ(key_for(tiled), key_for(KeyRecipe()));
}

TEST(CacheKey, ChangesWhenAnOptionIsAddedRemovedOrChanged) {
  KeyRecipe added, removed, changed, reordered;
  added.options.push_back("-lineinfo");
  removed.options.pop_back();
  changed.options[2] = "--fmad=false";
  std::swap(reordered.options[2], reordered.options[3]);
  const std::set<CacheKey> keys = {key_for(KeyRecipe()), key_for(added), key_for(removed),
                                   key_for(changed), key_for(reordered)};
  EXPECT_EQ(keys.size(), 5u);
}

TEST(CacheKey, ChangesWithTheNvrtcVersion) {
  KeyRecipe newer_minor, older_major;
  newer_minor.nvrtc_version = {13, 1};
  older_major.nvrtc_version = {12, 9};
  const std::set<CacheKey> keys = {key_for(KeyRecipe()), key_for(newer_minor),
                                   key_for(older_major)};
  EXPECT_EQ(keys.size(), 3u);
}

TEST(CacheKey, ChangesWithTheArchAlone) {
  const render::TemplateSet templates = render::TemplateSet::embedded();
  const render::RenderedUnit unit = families::render(quantize_rows_spec(), templates);
  const CacheKey sm80 = make_key({unit, templates, kOptions, kNvrtc, device::Arch::kSm80});
  const CacheKey sm86 = make_key({unit, templates, kOptions, kNvrtc, device::Arch::kSm86});
  EXPECT_NE(sm80, sm86);
}

TEST(CacheKey, ChangesWithTheFormatVersion) {
  KeyRecipe next_format;
  next_format.format_version = kFormatVersion + 1;
  EXPECT_NE(key_for(next_format), key_for(KeyRecipe()));
}

TEST(CacheKey, ChangesWithOneByteOfAnyIncludedTemplate) {
  const TemplateCopy original;
  const render::TemplateSet original_set = original.load();
  const render::RenderedUnit unit = families::render(KeyRecipe{}.spec, original_set);
  ASSERT_GE(unit.headers.size(), 2u) << "quantize_rows.cuh includes other templates";
  const CacheKey original_key = key_for(KeyRecipe(), original_set);
  for (const std::string& header : unit.headers) {
    const TemplateCopy edited;
    edited.change_one_byte(header);
    const render::TemplateSet edited_set = edited.load();
    ASSERT_EQ(families::render(KeyRecipe{}.spec, edited_set), unit) << header;
    EXPECT_NE(key_for(KeyRecipe(), edited_set), original_key) << "edited " << header;
  }
}

TEST(CacheKey, IgnoresTemplatesOutsideTheUnitsIncludeClosure) {
  const TemplateCopy original;
  const render::TemplateSet original_set = original.load();
  const render::RenderedUnit unit = families::render(KeyRecipe{}.spec, original_set);
  std::vector<std::string> unrelated;
  for (const auto& [path, contents] : original_set.files()) {
    if (std::find(unit.headers.begin(), unit.headers.end(), path) == unit.headers.end()) {
      unrelated.push_back(path);
    }
  }
  ASSERT_FALSE(unrelated.empty()) << "the attention templates are outside quantize_rows' closure";
  const TemplateCopy edited;
  for (const std::string& path : unrelated) edited.change_one_byte(path);
  EXPECT_EQ(key_for(KeyRecipe(), edited.load()), key_for(KeyRecipe(), original_set));
}

TEST(CacheKey, HexRoundTripsAndRejectsMalformedText) {
  const CacheKey key = key_for(KeyRecipe());
  EXPECT_EQ(CacheKey::from_hex(key.hex()), key);
  EXPECT_FALSE(CacheKey::from_hex(key.hex().substr(1)));
  EXPECT_FALSE(CacheKey::from_hex(std::string(31, '0') + "g"));
  EXPECT_FALSE(CacheKey::from_hex(std::string(30, '0') + "/."));
}

}  // namespace
}  // namespace intfa::cache
