// Reading the members of a JSON document whose every failure names the member's path
// ("entries[3].config.block_m"): the checks the deployment manifest (cache/bundle.cpp) and the
// tuning database (tune/tuning_database.cpp) share. Each document keeps its own error type: the
// reader hands a failed check to the document's `fail`, which throws it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "common/json.hpp"

namespace intfa::json {

// One failed check: the member's path, the value as text (empty when missing), what was expected.
struct MemberProblem {
  std::string path;
  bool missing = false;
  std::string shown;
  std::string expectation;
};

class MemberReader {
 public:
  // Must throw (the document's error type); the reader throws InternalError if it returns.
  using Fail = void (*)(const MemberProblem& problem);

  explicit MemberReader(Fail fail) : fail_(fail) {}

  // object[name], where `where` is the object's path with its trailing dot ("entries[0].").
  const Value& member(const Value& object, const std::string& where, const char* name) const;
  // A string of at most `max_bytes` bytes (and at least one when `non_empty`).
  std::string string(const Value& object, const std::string& where, const char* name,
                     std::size_t max_bytes = std::numeric_limits<std::size_t>::max(),
                     bool non_empty = false) const;
  // An integer in [min_value, max_value]: compared as a double first, so that a huge or
  // fractional number is refused before any conversion.
  std::int64_t integer(const Value& object, const std::string& where, const char* name,
                       std::int64_t min_value, std::int64_t max_value) const;
  std::uint64_t unsigned_integer(const Value& object, const std::string& where, const char* name,
                                 std::uint64_t max_value) const;
  double non_negative(const Value& object, const std::string& where, const char* name) const;
  bool boolean(const Value& object, const std::string& where, const char* name) const;
  // Throws (through `fail`) unless `value` is an object; `path` is its own path.
  void require_object(const Value& value, const std::string& path) const;

  // `value` as text for a message, cut at 80 characters.
  static std::string shown(const Value& value);

  // Hands `path` = `shown`, expected `expectation`, to `fail`.
  [[noreturn]] void refuse(const std::string& path, const Value& value,
                           const std::string& expectation) const;

 private:
  [[noreturn]] void raise(const MemberProblem& problem) const;

  Fail fail_;
};

}  // namespace intfa::json
