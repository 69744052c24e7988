// Compiles kernel specs with NVRTC on every core, as the compile tests need: a spec fails when it
// does not compile, compiles for another arch, or makes NVRTC warn (a warning is a template bug
// waiting for another instantiation, such as a division by zero in a branch dead for this one).
#pragma once

#include <string>
#include <vector>

#include "families/any_spec.hpp"
#include "render/template_set.hpp"

namespace intfa::testing {

struct CompileFailure {
  std::string spec;
  std::string message;
};

std::vector<CompileFailure> compile_all(const std::vector<families::AnySpec>& specs,
                                        const render::TemplateSet& templates);

}  // namespace intfa::testing
