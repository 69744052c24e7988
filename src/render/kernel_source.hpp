// What the JIT core (nvrtc, cache, launch) is given for one kernel: a rendered unit, the arch to
// compile it for, and how to describe it. The core reads no family's fields: a family renders its
// spec into a KernelSource (DeepGEMM's build(name, code) shape) and the core compiles, caches and
// loads it.
#pragma once

#include <string>
#include <vector>

#include "common/json.hpp"
#include "device/arch.hpp"

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

}  // namespace intfa::render
