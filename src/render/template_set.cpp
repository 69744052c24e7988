#include "render/template_set.hpp"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "common/env.hpp"
#include "common/strings.hpp"
#include "intfa/errors.hpp"
#include "render/embedded_templates.hpp"

namespace intfa::render {

TemplateSet TemplateSet::embedded() {
  TemplateSet set;
  set.origin_ = "embedded";
  for (const EmbeddedFile& file : embedded_template_files()) {
    set.files_.emplace(file.path, std::string(file.data, file.size));
  }
  return set;
}

TemplateSet TemplateSet::from_directory(const std::filesystem::path& root) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (!fs::is_directory(root, error)) {
    throw InvalidArgument("INTFA_TEMPLATE_DIR", "'" + root.string() + "'",
                          "expected a directory holding intfa's kernel templates");
  }
  TemplateSet set;
  set.origin_ = root.string();
  for (fs::recursive_directory_iterator it(root, error), end; !error && it != end;
       it.increment(error)) {
    const fs::path& path = it->path();
    if (!it->is_regular_file() || (path.extension() != ".cuh" && path.extension() != ".h")) {
      continue;
    }
    std::ifstream in(path, std::ios::binary);
    std::ostringstream contents;
    contents << in.rdbuf();
    set.files_.emplace(fs::relative(path, root).generic_string(), contents.str());
  }
  if (error || set.files_.empty()) {
    throw InvalidArgument("INTFA_TEMPLATE_DIR", "'" + root.string() + "'",
                          "expected a readable directory of *.cuh kernel templates");
  }
  return set;
}

const TemplateSet& TemplateSet::active() {
  static const TemplateSet set = [] {
    const auto directory = env::get("INTFA_TEMPLATE_DIR");
    return directory ? from_directory(*directory) : embedded();
  }();
  return set;
}

const std::string* TemplateSet::find(std::string_view path) const {
  const auto it = files_.find(path);
  return it == files_.end() ? nullptr : &it->second;
}

void TemplateSet::fail(const std::string& problem) const {
  if (origin_ == "embedded") throw InternalError("embedded kernel templates: " + problem);
  throw InvalidArgument("INTFA_TEMPLATE_DIR", "'" + origin_ + "'",
                        "expected intfa's kernel templates, but " + problem);
}

std::vector<std::string> TemplateSet::include_closure(const std::string& path) const {
  std::set<std::string> reached;
  std::vector<std::string> pending = {path};
  while (!pending.empty()) {
    const std::string current = pending.back();
    pending.pop_back();
    if (!reached.insert(current).second) continue;
    const std::string* source = find(current);
    if (source == nullptr) fail("there is no template '" + current + "'");
    for (IncludeDirective& include : include_directives(*source)) {
      if (const std::string problem = include_problem(include); !problem.empty()) {
        fail("'" + current + "' " + problem);
      }
      if (include.quoted) pending.push_back(std::move(include.target));
    }
  }
  return {reached.begin(), reached.end()};
}

std::string TemplateSet::include_problem(const IncludeDirective& include) const {
  const std::string shown =
      include.quoted ? "\"" + include.target + "\"" : "<" + include.target + ">";
  if (!include.quoted && !include.angled) {
    return "has an #include intfa cannot check (" + include.target + ")";
  }
  // NVRTC opens an absolute path as it is, and ".." climbs out of the include directories: a
  // template may reach only the other templates and the CUDA headers.
  const std::filesystem::path target(include.target);
  const bool escapes = target.is_absolute() ||
                       std::any_of(target.begin(), target.end(),
                                   [](const std::filesystem::path& part) { return part == ".."; });
  if (escapes) return "includes " + shown + ", outside the templates and the CUDA headers";
  if (include.quoted && find(include.target) == nullptr) {
    return "includes " + shown + ", which is not a template";
  }
  return "";
}

std::vector<IncludeDirective> include_directives(std::string_view source) {
  std::vector<IncludeDirective> includes;
  for (const std::string& raw_line : strings::split(source, '\n')) {
    std::string line = strings::trim(raw_line);
    if (!strings::starts_with(line, "#")) continue;
    line = strings::trim(std::string_view(line).substr(1));
    if (!strings::starts_with(line, "include")) continue;  // #include and #include_next
    const std::size_t name_end = line.find_first_of(" \t\"<");
    std::string rest = strings::trim(
        std::string_view(line).substr(name_end == std::string::npos ? line.size() : name_end));
    IncludeDirective include;
    const char close = rest.empty() ? '\0' : rest[0] == '"' ? '"' : rest[0] == '<' ? '>' : '\0';
    const std::size_t end = close == '\0' ? std::string::npos : rest.find(close, 1);
    if (end != std::string::npos) {
      include.quoted = close == '"';
      include.angled = close == '>';
      include.target = rest.substr(1, end - 1);
    } else {
      include.target = rest;  // a macro, or malformed
    }
    includes.push_back(std::move(include));
  }
  return includes;
}

std::vector<std::string> quoted_includes(std::string_view source) {
  std::vector<std::string> includes;
  for (IncludeDirective& include : include_directives(source)) {
    if (include.quoted) includes.push_back(std::move(include.target));
  }
  return includes;
}

}  // namespace intfa::render
