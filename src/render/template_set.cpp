#include "render/template_set.hpp"

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

std::vector<std::string> TemplateSet::include_closure(const std::string& path) const {
  std::set<std::string> reached;
  std::vector<std::string> pending = {path};
  while (!pending.empty()) {
    const std::string current = pending.back();
    pending.pop_back();
    if (!reached.insert(current).second) continue;
    const std::string* source = find(current);
    if (source == nullptr) {
      throw InternalError("kernel template '" + current + "' is not in the template set (" +
                          origin_ + ")");
    }
    for (std::string& included : quoted_includes(*source)) pending.push_back(std::move(included));
  }
  return {reached.begin(), reached.end()};
}

std::vector<std::string> quoted_includes(std::string_view source) {
  std::vector<std::string> includes;
  for (const std::string& raw_line : strings::split(source, '\n')) {
    std::string line = strings::trim(raw_line);
    if (!strings::starts_with(line, "#")) continue;
    line = strings::trim(std::string_view(line).substr(1));
    if (!strings::starts_with(line, "include")) continue;
    const std::size_t open = line.find('"');
    const std::size_t close = open == std::string::npos ? open : line.find('"', open + 1);
    if (close != std::string::npos) includes.push_back(line.substr(open + 1, close - open - 1));
  }
  return includes;
}

}  // namespace intfa::render
