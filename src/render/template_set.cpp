#include "render/template_set.hpp"

#include <algorithm>
#include <cctype>
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
  set.index_includes();
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
  set.index_includes();
  return set;
}

void TemplateSet::index_includes() {
  for (const auto& [path, source] : files_) includes_.emplace(path, include_directives(source));
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
    const auto includes = includes_.find(current);
    if (includes == includes_.end()) fail("there is no template '" + current + "'");
    for (const IncludeDirective& include : includes->second) {
      if (const std::string problem = include_problem(include); !problem.empty()) {
        fail("'" + current + "' " + problem);
      }
      if (include.quoted && !include.probe) pending.push_back(include.target);
    }
  }
  return {reached.begin(), reached.end()};
}

std::string TemplateSet::include_problem(const IncludeDirective& include) const {
  const std::string shown =
      include.quoted ? "\"" + include.target + "\"" : "<" + include.target + ">";
  if (!include.quoted && !include.angled) {
    return std::string(include.probe ? "has a __has_include" : "has an #include") +
           " intfa cannot check (" + include.target + ")";
  }
  // NVRTC opens an absolute path as it is, and ".." climbs out of the include directories: a
  // template may reach only the other templates and the CUDA headers.
  const std::filesystem::path target(include.target);
  const bool escapes = target.is_absolute() ||
                       std::any_of(target.begin(), target.end(),
                                   [](const std::filesystem::path& part) { return part == ".."; });
  const std::string verb = include.probe ? "asks __has_include about " : "includes ";
  if (escapes) return verb + shown + ", outside the templates and the CUDA headers";
  if (include.quoted && find(include.target) == nullptr) {
    return verb + shown + ", which is not a template";
  }
  return "";
}

namespace {

// Line splices (a backslash, or the trigraph ??/, at the end of a line) joined: what the
// preprocessor does first, so that "#\<newline>include" is seen as the #include it is.
std::string joined_lines(std::string_view source) {
  std::string text;
  text.reserve(source.size());
  for (std::size_t at = 0; at < source.size(); ++at) {
    std::size_t splice = 0;
    if (source[at] == '\\') splice = 1;
    if (source.compare(at, 3, "?\?/") == 0) splice = 3;
    if (splice > 0) {
      std::size_t next = at + splice;
      if (next < source.size() && source[next] == '\r') ++next;
      if (next < source.size() && source[next] == '\n') {
        at = next;
        continue;
      }
    }
    text += source[at];
  }
  return text;
}

bool identifier_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}

}  // namespace

std::string preprocessor_view(std::string_view source) {
  const std::string text = joined_lines(source);
  std::string view;
  view.reserve(text.size());
  std::size_t at = 0;
  while (at < text.size()) {
    const char c = text[at];
    if (text.compare(at, 2, "//") == 0) {  // to the end of the line
      while (at < text.size() && text[at] != '\n') ++at;
      view += ' ';
    } else if (text.compare(at, 2, "/*") == 0) {  // one space, its newlines gone with it
      const std::size_t end = text.find("*/", at + 2);
      at = end == std::string::npos ? text.size() : end + 2;
      view += ' ';
    } else if (text.compare(at, 2, "%:") == 0 || text.compare(at, 3, "?\?=") == 0) {
      at += text[at] == '%' ? 2 : 3;  // the digraph and the trigraph of '#'
      view += '#';
    } else if (c == 'R' && at + 1 < text.size() && text[at + 1] == '"' &&
               (at == 0 || !identifier_char(text[at - 1]) || text[at - 1] == '8' ||
                text[at - 1] == 'u' || text[at - 1] == 'U' || text[at - 1] == 'L')) {
      // A raw string, kept as it is up to its )delimiter".
      const std::size_t open = text.find('(', at + 2);
      const std::string close =
          open == std::string::npos ? "" : ")" + text.substr(at + 2, open - at - 2) + "\"";
      const std::size_t end = open == std::string::npos ? text.npos : text.find(close, open);
      const std::size_t stop = end == std::string::npos ? text.size() : end + close.size();
      view.append(text, at, stop - at);
      at = stop;
    } else if (c == '"' || c == '\'') {  // a literal, kept; it ends at its quote or the line
      view += c;
      for (++at; at < text.size() && text[at] != '\n'; ++at) {
        view += text[at];
        if (text[at] == '\\' && at + 1 < text.size() && text[at + 1] != '\n') {
          view += text[++at];
        } else if (text[at] == c) {
          ++at;
          break;
        }
      }
    } else {
      view += c;
      ++at;
    }
  }
  return view;
}

namespace {

// The header `text` begins with (an #include's rest, or what follows __has_include's parenthesis):
// "target", <target>, or neither (a macro: its text up to the end of the line).
IncludeDirective header_name(std::string_view text) {
  const std::string rest = strings::trim(text);
  IncludeDirective include;
  const char close = rest.empty() ? '\0' : rest[0] == '"' ? '"' : rest[0] == '<' ? '>' : '\0';
  const std::size_t end = close == '\0' ? std::string::npos : rest.find(close, 1);
  if (end != std::string::npos) {
    include.quoted = close == '"';
    include.angled = close == '>';
    include.target = rest.substr(1, end - 1);
  } else {
    include.target = rest.substr(0, rest.find('\n'));
  }
  return include;
}

}  // namespace

std::vector<IncludeDirective> include_directives(std::string_view source) {
  const std::string view = preprocessor_view(source);
  std::vector<IncludeDirective> includes;
  for (const std::string& raw_line : strings::split(view, '\n')) {
    std::string line = strings::trim(raw_line);
    if (!strings::starts_with(line, "#")) continue;
    line = strings::trim(std::string_view(line).substr(1));
    // #include, #include_next, and #import (which some preprocessors take as an include).
    if (!strings::starts_with(line, "include") && !strings::starts_with(line, "import")) continue;
    std::size_t name_end = 0;
    while (name_end < line.size() && identifier_char(line[name_end])) ++name_end;
    includes.push_back(header_name(std::string_view(line).substr(name_end)));
  }
  // __has_include(<path>) opens the file to answer: it is checked as an #include is.
  constexpr std::string_view kProbe = "__has_include";
  for (std::size_t at = view.find(kProbe); at != std::string::npos;
       at = view.find(kProbe, at + 1)) {
    std::size_t after = at + kProbe.size();
    while (after < view.size() && identifier_char(view[after])) ++after;  // _next
    while (after < view.size() && (view[after] == ' ' || view[after] == '\t')) ++after;
    if (after < view.size() && view[after] == '(') ++after;
    IncludeDirective probe = header_name(std::string_view(view).substr(after));
    probe.probe = true;
    includes.push_back(std::move(probe));
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
