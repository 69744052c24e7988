// Command-line parsing for the intfa tool: "--name value", "--name=value" and boolean "--flag".
#pragma once

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace intfa::cli {

// Thrown for bad command lines; main() prints it with the verb's usage and exits 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Args {
 public:
  // `flags` take no value; every other option takes one.
  Args(const std::vector<std::string>& arguments, const std::vector<std::string>& flags);

  bool has(const std::string& name) const;
  std::optional<std::string> get(const std::string& name) const;
  std::string get_or(const std::string& name, const std::string& fallback) const;
  long get_int(const std::string& name, long fallback, long min_value, long max_value) const;
  double get_double(const std::string& name, double fallback) const;
  // "64,128" -> {64, 128}; each value checked against [min_value, max_value].
  std::vector<long> get_int_list(const std::string& name, const std::vector<long>& fallback,
                                 long min_value, long max_value) const;
  std::vector<std::string> get_list(const std::string& name,
                                    const std::vector<std::string>& fallback) const;
  const std::vector<std::string>& positional() const { return positional_; }
  // Throws UsageError naming any option not in `known`.
  void reject_unknown(const std::vector<std::string>& known) const;

 private:
  std::map<std::string, std::string> options_;
  std::vector<std::string> positional_;
};

}  // namespace intfa::cli
