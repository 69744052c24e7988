// Command-line parsing for the intfa tool. One grammar for every verb:
//
//   --name VALUE, --name=VALUE   an option that takes a value (never empty, never "--...")
//   --name, --name=BOOL          a flag: on alone; BOOL is 1/0, true/false, on/off or yes/no
//   --causal[=LIST]              a flag that also takes a list of BOOLs (a verb that sweeps it
//                                runs each); the list may follow as the next argument too
//   integers                     base 10, with an optional k suffix (4k = 4096)
//
// An unknown option, a missing or empty value, a flag value that is not a BOOL and an argument the
// verb does not take are UsageErrors, found before anything else runs.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace intfa::cli {

// Thrown for bad command lines; main() prints it with a pointer to the verb's --help and exits 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The options one verb takes.
struct Grammar {
  std::vector<std::string> values;        // --name VALUE
  std::vector<std::string> flags;         // --name, --name=BOOL
  std::vector<std::string> auto_flags;    // flags that also take --name=auto (flag_or_auto)
  std::vector<std::string> switch_lists;  // flags that also take a list of BOOLs (--causal)
  std::size_t max_positional = 0;         // arguments that are not options
};

class Args {
 public:
  Args(const std::vector<std::string>& arguments, const Grammar& grammar);

  bool has(const std::string& name) const;
  std::optional<std::string> get(const std::string& name) const;
  std::string get_or(const std::string& name, const std::string& fallback) const;
  long get_int(const std::string& name, long fallback, long min_value, long max_value) const;
  // A finite number that a double holds (1e400 is refused, not read as infinity).
  double get_double(const std::string& name, double fallback) const;
  // "64,128" -> {64, 128}; each value checked against [min_value, max_value].
  std::vector<long> get_int_list(const std::string& name, const std::vector<long>& fallback,
                                 long min_value, long max_value) const;
  std::vector<std::string> get_list(const std::string& name,
                                    const std::vector<std::string>& fallback) const;
  // "64,64,4,2;128,64,8,2" -> its ';'-separated entries, each trimmed; none when absent. An empty
  // entry is a UsageError naming its place ("8,64,2;" once said "--configs : expected ...").
  std::vector<std::string> get_entries(const std::string& name) const;
  // A flag's value: false when absent, true alone, else its BOOL.
  bool flag(const std::string& name) const;
  // The same with `fallback` when absent (a flag on by default: --smooth-k=0 turns it off).
  bool flag_or(const std::string& name, bool fallback) const;
  // An auto flag's value: nullopt for --name=auto, else as flag_or.
  std::optional<bool> flag_or_auto(const std::string& name, std::optional<bool> fallback) const;
  // A switch list's values, in order ({true} for the flag alone); `fallback` when absent.
  std::vector<bool> switch_list(const std::string& name, const std::vector<bool>& fallback) const;
  const std::vector<std::string>& positional() const { return positional_; }
  // Throws UsageError naming any option given that is not in `known` (for a verb whose options
  // depend on its first argument).
  void reject_unknown(const std::vector<std::string>& known) const;

 private:
  std::map<std::string, std::string> options_;
  std::vector<std::string> positional_;
};

// Whether the flag --NAME (or --NAME=BOOL, true) is among `arguments`: a mode of a verb that takes
// its own options (`intfa tune --decode`), looked for before the verb's grammar parses them.
bool mode_flag(const std::vector<std::string>& arguments, const std::string& name);

// A base-10 integer with an optional k suffix (x1024), or nullopt (overflow included).
std::optional<long> parse_count(const std::string& text);
// 1/0, true/false, on/off, yes/no (any case), or nullopt.
std::optional<bool> parse_bool(const std::string& text);

}  // namespace intfa::cli
