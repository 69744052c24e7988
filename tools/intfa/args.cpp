#include "intfa/args.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "common/strings.hpp"

namespace intfa::cli {
namespace {

constexpr const char* kBoolWords = "1/0, true/false, on/off or yes/no";

bool listed(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

bool is_bool_list(const std::string& text) {
  for (const std::string& part : strings::split(text, ',')) {
    if (!parse_bool(strings::trim(part))) return false;
  }
  return true;
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// " (did you mean --causal?)" for a name two edits or fewer from a known one, else "".
std::string suggestion(const std::string& name, const Grammar& grammar) {
  std::string best;
  std::size_t best_distance = 3;
  for (const auto* names : {&grammar.values, &grammar.flags, &grammar.switch_lists}) {
    for (const std::string& known : *names) {
      const std::size_t distance = edit_distance(name, known);
      if (distance < best_distance) {
        best = known;
        best_distance = distance;
      }
    }
  }
  return best.empty() ? "" : " (did you mean --" + best + "?)";
}

}  // namespace

std::optional<long> parse_count(const std::string& text) {
  std::string digits = strings::trim(text);
  long multiplier = 1;
  if (!digits.empty() && (digits.back() == 'k' || digits.back() == 'K')) {
    multiplier = 1024;
    digits.pop_back();
  }
  const auto value = strings::parse_int(digits);
  long scaled = 0;
  if (!value || __builtin_mul_overflow(*value, multiplier, &scaled)) return std::nullopt;
  return scaled;
}

std::optional<bool> parse_bool(const std::string& text) {
  const std::string word = strings::to_lower(text);
  if (word == "1" || word == "true" || word == "on" || word == "yes") return true;
  if (word == "0" || word == "false" || word == "off" || word == "no") return false;
  return std::nullopt;
}

Args::Args(const std::vector<std::string>& arguments, const Grammar& grammar) {
  bool options_ended = false;
  for (std::size_t i = 0; i < arguments.size(); ++i) {
    const std::string& argument = arguments[i];
    if (argument == "--" && !options_ended) {
      options_ended = true;
      continue;
    }
    if (options_ended || argument.size() < 2 || argument[0] != '-') {
      if (positional_.size() == grammar.max_positional) {
        throw UsageError("unexpected argument '" + argument + "'");
      }
      positional_.push_back(argument);
      continue;
    }
    if (argument[1] != '-') throw UsageError("unknown option " + argument);
    std::string name = argument.substr(2);
    std::optional<std::string> value;
    if (const std::size_t equals = name.find('='); equals != std::string::npos) {
      value = name.substr(equals + 1);
      name.resize(equals);
    }
    const bool takes_list = listed(grammar.switch_lists, name);
    const bool takes_auto = listed(grammar.auto_flags, name);
    const bool is_flag = takes_list || takes_auto || listed(grammar.flags, name);
    if (!is_flag && !listed(grammar.values, name)) {
      throw UsageError("unknown option --" + name + suggestion(name, grammar));
    }
    if (!is_flag) {
      if (!value) {
        if (i + 1 >= arguments.size() || strings::starts_with(arguments[i + 1], "--")) {
          throw UsageError("option --" + name + " needs a value");
        }
        value = arguments[++i];
      }
      if (value->empty()) throw UsageError("option --" + name + " needs a value, not an empty one");
      options_[name] = *value;
      continue;
    }
    // A list may follow a switch list as its own argument (`--causal off,on`), where it cannot be
    // taken for an argument of the verb.
    if (!value && takes_list && i + 1 < arguments.size() && arguments[i + 1][0] != '-' &&
        (grammar.max_positional == 0 || is_bool_list(arguments[i + 1]))) {
      value = arguments[++i];
    }
    // "--rotate auto": an auto flag takes a following "auto" as its value.
    if (!value && takes_auto && i + 1 < arguments.size() && arguments[i + 1] == "auto") {
      value = arguments[++i];
    }
    if (value && !(takes_list ? is_bool_list(*value) : parse_bool(*value).has_value()) &&
        !(takes_auto && *value == "auto")) {
      throw UsageError("--" + name + "=" + *value + ": expected no value, or " + kBoolWords +
                       (takes_list ? " (or a comma-separated list of them)" : "") +
                       (takes_auto ? " (or auto)" : ""));
    }
    options_[name] = value.value_or("1");
  }
}

bool Args::has(const std::string& name) const { return options_.count(name) != 0; }

std::optional<std::string> Args::get(const std::string& name) const {
  const auto it = options_.find(name);
  if (it == options_.end()) return std::nullopt;
  return it->second;
}

std::string Args::get_or(const std::string& name, const std::string& fallback) const {
  return get(name).value_or(fallback);
}

long Args::get_int(const std::string& name, long fallback, long min_value, long max_value) const {
  const auto text = get(name);
  if (!text) return fallback;
  const auto value = parse_count(*text);
  if (!value || *value < min_value || *value > max_value) {
    throw UsageError("--" + name + " " + *text + ": expected an integer in [" +
                     std::to_string(min_value) + ", " + std::to_string(max_value) + "]");
  }
  return *value;
}

double Args::get_double(const std::string& name, double fallback) const {
  const auto text = get(name);
  if (!text) return fallback;
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text->c_str(), &end);
  if (end == text->c_str() || *end != '\0' || !std::isfinite(value)) {
    throw UsageError("--" + name + " " + *text + ": expected a finite number");
  }
  if (errno == ERANGE) {
    throw UsageError("--" + name + " " + *text + ": out of the range of a double");
  }
  return value;
}

std::vector<long> Args::get_int_list(const std::string& name, const std::vector<long>& fallback,
                                     long min_value, long max_value) const {
  const auto text = get(name);
  if (!text) return fallback;
  std::vector<long> values;
  for (const std::string& part : strings::split(*text, ',')) {
    const auto value = parse_count(part);
    if (!value || *value < min_value || *value > max_value) {
      throw UsageError("--" + name + " " + *text + ": '" + part + "' is not an integer in [" +
                       std::to_string(min_value) + ", " + std::to_string(max_value) + "]");
    }
    values.push_back(*value);
  }
  return values;
}

std::vector<std::string> Args::get_list(const std::string& name,
                                        const std::vector<std::string>& fallback) const {
  const auto text = get(name);
  if (!text) return fallback;
  std::vector<std::string> values;
  for (const std::string& part : strings::split(*text, ',')) values.push_back(strings::trim(part));
  return values;
}

std::vector<std::string> Args::get_entries(const std::string& name) const {
  const auto text = get(name);
  if (!text) return {};
  std::vector<std::string> entries = strings::split(*text, ';');
  for (std::size_t i = 0; i < entries.size(); ++i) {
    entries[i] = strings::trim(entries[i]);
    if (entries[i].empty()) {
      throw UsageError("--" + name + " " + *text + ": entry " + std::to_string(i + 1) + " of " +
                       std::to_string(entries.size()) + " is empty (entries are separated by ';')");
    }
  }
  return entries;
}

bool Args::flag(const std::string& name) const {
  const auto text = get(name);
  return text && parse_bool(*text).value_or(false);  // checked when parsed
}

bool Args::flag_or(const std::string& name, bool fallback) const {
  return has(name) ? flag(name) : fallback;
}

std::optional<bool> Args::flag_or_auto(const std::string& name,
                                       std::optional<bool> fallback) const {
  const auto text = get(name);
  if (!text) return fallback;
  if (*text == "auto") return std::nullopt;
  return flag(name);
}

std::vector<bool> Args::switch_list(const std::string& name,
                                    const std::vector<bool>& fallback) const {
  const auto text = get(name);
  if (!text) return fallback;
  std::vector<bool> values;
  for (const std::string& part : strings::split(*text, ',')) {
    values.push_back(parse_bool(strings::trim(part)).value_or(false));  // checked when parsed
  }
  return values;
}

void Args::reject_unknown(const std::vector<std::string>& known) const {
  for (const auto& [name, value] : options_) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      throw UsageError("unknown option --" + name);
    }
  }
}

bool mode_flag(const std::vector<std::string>& arguments, const std::string& name) {
  const std::string flag = "--" + name;
  for (const std::string& argument : arguments) {
    if (argument == flag) return true;
    if (argument.rfind(flag + "=", 0) == 0) {
      return parse_bool(argument.substr(flag.size() + 1)).value_or(false);
    }
  }
  return false;
}

}  // namespace intfa::cli
