#include "common/json_members.hpp"

#include <cmath>

#include "intfa/errors.hpp"

namespace intfa::json {
namespace {

constexpr std::size_t kMaxShownChars = 80;

}  // namespace

std::string MemberReader::shown(const Value& value) {
  std::string text = value.dump(-1);
  if (text.size() > kMaxShownChars) text = text.substr(0, kMaxShownChars) + "...";
  return text;
}

void MemberReader::raise(const MemberProblem& problem) const {
  fail_(problem);
  throw InternalError("a JSON member check did not throw: " + problem.path);
}

void MemberReader::refuse(const std::string& path, const Value& value,
                          const std::string& expectation) const {
  raise(MemberProblem{path, false, shown(value), expectation});
}

const Value& MemberReader::member(const Value& object, const std::string& where,
                                  const char* name) const {
  const Value* value = object.is_object() ? object.find(name) : nullptr;
  if (value == nullptr) raise(MemberProblem{where + name, true, "", "a required member"});
  return *value;
}

std::string MemberReader::string(const Value& object, const std::string& where, const char* name,
                                 std::size_t max_bytes, bool non_empty) const {
  const Value& value = member(object, where, name);
  const bool bounded = max_bytes != std::numeric_limits<std::size_t>::max();
  if (!value.is_string() || (non_empty && value.as_string().empty()) ||
      value.as_string().size() > max_bytes) {
    refuse(where + name, value,
           bounded ? "expected a string of " + std::string(non_empty ? "1" : "0") + " to " +
                         std::to_string(max_bytes) + " bytes"
                   : std::string("expected a string"));
  }
  return value.as_string();
}

std::int64_t MemberReader::integer(const Value& object, const std::string& where,
                                   const char* name, std::int64_t min_value,
                                   std::int64_t max_value) const {
  const Value& value = member(object, where, name);
  const std::string expectation = "expected an integer in [" + std::to_string(min_value) + ", " +
                                  std::to_string(max_value) + "]";
  if (!value.is_number()) refuse(where + name, value, expectation);
  const double number = value.as_number();
  // 2^63 first: a bound near INT64_MAX rounds up to it as a double, and the cast of 2^63 is UB.
  constexpr double kTwoTo63 = 9223372036854775808.0;
  if (!(number >= -kTwoTo63 && number < kTwoTo63) ||
      !(number >= static_cast<double>(min_value) && number <= static_cast<double>(max_value)) ||
      number != std::floor(number)) {
    refuse(where + name, value, expectation);
  }
  return static_cast<std::int64_t>(number);
}

std::uint64_t MemberReader::unsigned_integer(const Value& object, const std::string& where,
                                             const char* name, std::uint64_t max_value) const {
  const Value& value = member(object, where, name);
  const std::string expectation =
      "expected an integer in [0, " + std::to_string(max_value) + "]";
  if (!value.is_number()) refuse(where + name, value, expectation);
  const double number = value.as_number();
  // 2^64 first: a bound near UINT64_MAX rounds up to it as a double, and the cast of 2^64 is UB.
  constexpr double kTwoTo64 = 18446744073709551616.0;
  if (!(number >= 0 && number < kTwoTo64) || number > static_cast<double>(max_value) ||
      number != std::floor(number)) {
    refuse(where + name, value, expectation);
  }
  return static_cast<std::uint64_t>(number);
}

double MemberReader::non_negative(const Value& object, const std::string& where,
                                  const char* name) const {
  const Value& value = member(object, where, name);
  if (!value.is_number() || !std::isfinite(value.as_number()) || value.as_number() < 0) {
    refuse(where + name, value, "expected a finite number >= 0");
  }
  return value.as_number();
}

bool MemberReader::boolean(const Value& object, const std::string& where, const char* name) const {
  const Value& value = member(object, where, name);
  if (!value.is_bool()) refuse(where + name, value, "expected true or false");
  return value.as_bool();
}

void MemberReader::require_object(const Value& value, const std::string& path) const {
  if (!value.is_object()) refuse(path, value, "expected an object");
}

}  // namespace intfa::json
