// What the JIT core (nvrtc, cache, launch) is given for one kernel: a rendered unit, the arch to
// compile it for, and how to describe it. The core reads no family's fields: a family renders its
// spec into a KernelSource (DeepGEMM's build(name, code) shape) and the core compiles, caches and
// loads it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/json.hpp"
#include "device/arch.hpp"
#include "render/template_set.hpp"

namespace intfa::render {

struct RenderedUnit {
  std::string file_name;             // the name NVRTC reports in diagnostics
  std::string source;                // the unit's text
  std::string name_expression;       // the kernel, for nvrtcGetLoweredName
  std::vector<std::string> headers;  // every template the unit reaches, sorted

  friend bool operator==(const RenderedUnit& a, const RenderedUnit& b) {
    return a.file_name == b.file_name && a.source == b.source &&
           a.name_expression == b.name_expression && a.headers == b.headers;
  }
  std::string to_string() const { return file_name + ": " + name_expression; }
};

struct KernelSource {
  RenderedUnit unit;
  device::Arch arch = device::Arch::kSm80;
  // The description: never part of the cache key (the unit, its headers, the options and the
  // versions are). `text` names the kernel in errors and logs; `json` is written beside the cache
  // entry and into a bundle's manifest.
  std::string text;
  json::Value json;
};

// A kernel's identity as its family packs its spec: two specs get equal ids exactly when they are
// equal, and the first word holds the family, so that no two families' ids meet. The runtime's
// memory is keyed by it, so that a call whose kernels are loaded renders nothing. (No member
// initializers: launch::CallKernels holds requests that stay uninitialized past its count.)
struct KernelId {
  std::array<std::uint64_t, 5> words;

  friend bool operator==(const KernelId& a, const KernelId& b) { return a.words == b.words; }
  friend bool operator!=(const KernelId& a, const KernelId& b) { return !(a == b); }
};

struct KernelIdHash {
  std::size_t operator()(const KernelId& id) const noexcept {
    std::uint64_t hash = 1469598103934665603ull;
    for (std::uint64_t word : id.words) {
      hash ^= word + 0x9e3779b97f4a7c15ull + (hash << 6) + (hash >> 2);
    }
    return static_cast<std::size_t>(hash);
  }
};

// A family's spec as the JIT core takes it: its id, and how to render its source when the kernel
// is not in memory yet. Made from any spec type for which kernel_id(spec) and
// kernel_source(spec, templates) are found beside it (argument-dependent lookup), so the core
// names no family. Holds a pointer to the spec, which must outlive the recipe.
class KernelRecipe {
 public:
  KernelRecipe() = default;
  template <typename Spec, typename = std::enable_if_t<!std::is_same_v<Spec, KernelRecipe>>,
            typename = decltype(kernel_id(std::declval<const Spec&>()))>
  KernelRecipe(const Spec& spec)  // NOLINT(google-explicit-constructor): a spec is a recipe
      : id_(kernel_id(spec)), spec_(&spec), render_(&render_spec<Spec>) {}

  const KernelId& id() const { return id_; }
  KernelSource source(const TemplateSet& templates) const { return render_(spec_, templates); }

 private:
  template <typename Spec>
  static KernelSource render_spec(const void* spec, const TemplateSet& templates) {
    return kernel_source(*static_cast<const Spec*>(spec), templates);
  }

  KernelId id_;
  const void* spec_;
  KernelSource (*render_)(const void* spec, const TemplateSet& templates);
};

}  // namespace intfa::render
