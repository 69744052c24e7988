// The kernel template sources NVRTC sees: the copy embedded at build time, or a source tree named
// by INTFA_TEMPLATE_DIR (for kernel development without rebuilding the library).
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace intfa::render {

// One #include line of a template, or one __has_include (`probe`): "target", <target>, or
// neither (a macro).
struct IncludeDirective {
  std::string target;
  bool quoted = false;
  bool angled = false;
  bool probe = false;
};

class TemplateSet {
 public:
  static TemplateSet embedded();
  // Every *.cuh and *.h below `root`; throws InvalidArgument naming INTFA_TEMPLATE_DIR when the
  // directory cannot be read or holds no templates.
  static TemplateSet from_directory(const std::filesystem::path& root);
  // INTFA_TEMPLATE_DIR's tree when set, else the embedded set; read once per process.
  static const TemplateSet& active();

  const std::string* find(std::string_view path) const;
  const std::map<std::string, std::string, std::less<>>& files() const { return files_; }
  const std::string& origin() const { return origin_; }  // "embedded" or the directory

  // `path` and every template it reaches through #include "..." (paths relative to templates/),
  // sorted. Every #include of each must name a template ("...") or a CUDA header (<...>, a relative
  // path without ".."): a template never makes NVRTC read another file. Throws InvalidArgument
  // naming INTFA_TEMPLATE_DIR when a directory's templates break that, or lack one of them
  // (InternalError for the embedded set).
  std::vector<std::string> include_closure(const std::string& path) const;

 private:
  // Each file's include_directives, read once when the set is made: every render asks for the
  // closure of its kernel's header, and reading them took 2.5 ms per render of the Hopper kernel.
  void index_includes();
  [[noreturn]] void fail(const std::string& problem) const;
  // Why `include` may not be followed, or "".
  std::string include_problem(const IncludeDirective& include) const;

  std::map<std::string, std::string, std::less<>> files_;
  std::map<std::string, std::vector<IncludeDirective>, std::less<>> includes_;  // per file
  std::string origin_;
};

// `source` as the preprocessor reads its directives: line splices joined, each comment one space
// (a block comment's newlines with it), the digraph %: and the trigraph ?\?= as '#'; literals kept.
std::string preprocessor_view(std::string_view source);
// Every #include directive of one source text as the preprocessor sees it (preprocessor_view), in
// order of appearance, then every __has_include.
std::vector<IncludeDirective> include_directives(std::string_view source);
// The quoted #include targets of one source text, in order of appearance.
std::vector<std::string> quoted_includes(std::string_view source);

}  // namespace intfa::render
