#include "intfa/args.hpp"

#include <algorithm>
#include <cstdlib>

#include "common/strings.hpp"

namespace intfa::cli {

Args::Args(const std::vector<std::string>& arguments, const std::vector<std::string>& flags) {
  for (std::size_t i = 0; i < arguments.size(); ++i) {
    const std::string& argument = arguments[i];
    if (!strings::starts_with(argument, "--") || argument == "--") {
      positional_.push_back(argument);
      continue;
    }
    std::string name = argument.substr(2);
    const std::size_t equals = name.find('=');
    if (equals != std::string::npos) {
      options_[name.substr(0, equals)] = name.substr(equals + 1);
      continue;
    }
    if (std::find(flags.begin(), flags.end(), name) != flags.end()) {
      options_[name] = "1";
      continue;
    }
    if (i + 1 >= arguments.size()) throw UsageError("option --" + name + " needs a value");
    options_[name] = arguments[++i];
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
  const auto value = strings::parse_int(*text);
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
  const double value = std::strtod(text->c_str(), &end);
  if (end == text->c_str() || *end != '\0') {
    throw UsageError("--" + name + " " + *text + ": expected a number");
  }
  return value;
}

std::vector<long> Args::get_int_list(const std::string& name, const std::vector<long>& fallback,
                                     long min_value, long max_value) const {
  const auto text = get(name);
  if (!text) return fallback;
  std::vector<long> values;
  for (const std::string& part : strings::split(*text, ',')) {
    std::string item = strings::trim(part);
    long multiplier = 1;
    if (!item.empty() && (item.back() == 'k' || item.back() == 'K')) {
      multiplier = 1024;
      item.pop_back();
    }
    const auto value = strings::parse_int(item);
    if (!value || *value * multiplier < min_value || *value * multiplier > max_value) {
      throw UsageError("--" + name + " " + *text + ": '" + part + "' is not an integer in [" +
                       std::to_string(min_value) + ", " + std::to_string(max_value) + "]");
    }
    values.push_back(*value * multiplier);
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

void Args::reject_unknown(const std::vector<std::string>& known) const {
  for (const auto& [name, value] : options_) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      throw UsageError("unknown option --" + name);
    }
  }
}

}  // namespace intfa::cli
