// A small JSON value, parser and writer for intfa's own files: spec sidecars in the cache,
// deployment manifests and the tuning database. Objects keep insertion order so written files are
// stable and diffable. The parser is strict (RFC 8259), bounded in depth, members and values, and
// never trusts input: it is fuzzed (tests/fuzz) and timed (JsonParseCost.*).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace intfa::json {

class ParseError : public std::runtime_error {
 public:
  ParseError(const std::string& message, std::size_t offset);
  std::size_t offset() const noexcept { return offset_; }

 private:
  std::size_t offset_;
};

// Asking a value for the wrong type (as_string on a number, a missing member through at()).
class TypeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Value {
 public:
  using Array = std::vector<Value>;
  using Object = std::vector<std::pair<std::string, Value>>;
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };

  Value() = default;
  Value(std::nullptr_t) {}
  Value(bool value) : data_(value) {}
  Value(int value) : data_(static_cast<double>(value)) {}
  Value(long value) : data_(static_cast<double>(value)) {}
  Value(long long value) : data_(static_cast<double>(value)) {}
  Value(unsigned value) : data_(static_cast<double>(value)) {}
  Value(unsigned long value) : data_(static_cast<double>(value)) {}
  Value(unsigned long long value) : data_(static_cast<double>(value)) {}
  Value(double value) : data_(value) {}
  Value(const char* value) : data_(std::string(value)) {}
  Value(std::string value) : data_(std::move(value)) {}
  Value(Array value) : data_(std::move(value)) {}
  Value(Object value) : data_(std::move(value)) {}

  static Value array() { return Value(Array{}); }
  static Value object() { return Value(Object{}); }

  Type type() const { return static_cast<Type>(data_.index()); }
  bool is_null() const { return type() == Type::kNull; }
  bool is_bool() const { return type() == Type::kBool; }
  bool is_number() const { return type() == Type::kNumber; }
  bool is_string() const { return type() == Type::kString; }
  bool is_array() const { return type() == Type::kArray; }
  bool is_object() const { return type() == Type::kObject; }

  bool as_bool() const;
  double as_number() const;
  // The number as an integer; throws TypeError unless it is integral and in range.
  std::int64_t as_int() const;
  const std::string& as_string() const;
  const Array& as_array() const;
  Array& as_array();
  const Object& as_object() const;

  // Object access. find() returns nullptr when absent; at() throws TypeError naming the key.
  const Value* find(std::string_view key) const;
  const Value& at(std::string_view key) const;
  // Insert-or-replace, keeping the first position of an existing key.
  Value& set(const std::string& key, Value value);
  void push_back(Value value);

  // Compact when indent < 0, else pretty-printed with `indent` spaces.
  std::string dump(int indent = 2) const;

  friend bool operator==(const Value& a, const Value& b) { return a.data_ == b.data_; }
  friend bool operator!=(const Value& a, const Value& b) { return !(a == b); }

 private:
  std::variant<std::nullptr_t, bool, double, std::string, Array, Object> data_{nullptr};
};

// Bounds on a document parse() accepts, far above what intfa's own files hold (a manifest of every
// kernel of `intfa precompile --configs all` has about 40,000 values, an object 20 members): a
// document beyond one is a ParseError naming the bound. Time and memory then stay proportional to
// what the bounds allow, whatever the input (tests/common/json_test.cpp, JsonParseCost.*).
struct ParseLimits {
  int max_depth = 64;
  std::size_t max_members = 65536;                // in one object
  std::size_t max_values = std::size_t{1} << 20;  // in the whole document
};

// Parses one JSON document (surrounding whitespace allowed) in time proportional to its size.
// Duplicate member names are refused.
Value parse(std::string_view text, const ParseLimits& limits = {});

// Writes `value` pretty-printed to `path` (tool output; not atomic). Throws Error.
void write_file(const std::string& path, const Value& value);

}  // namespace intfa::json
