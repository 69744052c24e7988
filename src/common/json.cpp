#include "common/json.hpp"

#include <xxhash.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <random>

#include "intfa/errors.hpp"

namespace intfa::json {

ParseError::ParseError(const std::string& message, std::size_t offset)
    : std::runtime_error("JSON parse error at byte " + std::to_string(offset) + ": " + message),
      offset_(offset) {}

namespace {

const char* type_name(Value::Type type) {
  switch (type) {
    case Value::Type::kNull: return "null";
    case Value::Type::kBool: return "bool";
    case Value::Type::kNumber: return "number";
    case Value::Type::kString: return "string";
    case Value::Type::kArray: return "array";
    case Value::Type::kObject: return "object";
  }
  return "?";
}

[[noreturn]] void wrong_type(Value::Type expected, Value::Type actual) {
  throw TypeError(std::string("expected a JSON ") + type_name(expected) + ", found " +
                  type_name(actual));
}

std::size_t seeded_hash(const std::string& text) {
  static const std::uint64_t seed = std::random_device{}() ^ std::uint64_t{0x9e3779b97f4a7c15};
  return static_cast<std::size_t>(XXH3_64bits_withSeed(text.data(), text.size(), seed));
}

// Every step reads input bytes it has not read before, and each member name is looked up once in a
// hash table: parsing costs O(n) in the input's size, never O(n^2), whatever the input holds
// (tests/common/json_test.cpp times it).
class Parser {
 public:
  Parser(std::string_view text, const ParseLimits& limits) : text_(text), limits_(limits) {}

  Value document() {
    skip_space();
    Value value = parse_value(0);
    skip_space();
    if (at_ != text_.size()) fail("trailing characters after the document");
    return value;
  }

 private:
  [[noreturn]] void fail(const std::string& message) const { throw ParseError(message, at_); }

  void skip_space() {
    while (at_ < text_.size() &&
           (text_[at_] == ' ' || text_[at_] == '\t' || text_[at_] == '\n' || text_[at_] == '\r')) {
      ++at_;
    }
  }

  bool consume(std::string_view literal) {
    if (text_.substr(at_, literal.size()) != literal) return false;
    at_ += literal.size();
    return true;
  }

  Value parse_value(int depth) {
    if (depth > limits_.max_depth) {
      fail("nesting deeper than " + std::to_string(limits_.max_depth));
    }
    if (++values_ > limits_.max_values) {
      fail("more than " + std::to_string(limits_.max_values) + " values in the document");
    }
    if (at_ >= text_.size()) fail("unexpected end of input");
    const char c = text_[at_];
    if (c == '{') return parse_object(depth);
    if (c == '[') return parse_array(depth);
    if (c == '"') return Value(parse_string());
    if (c == '-' || (c >= '0' && c <= '9')) return Value(parse_number());
    if (consume("true")) return Value(true);
    if (consume("false")) return Value(false);
    if (consume("null")) return Value(nullptr);
    fail(std::string("unexpected character '") + c + "'");
  }

  Value parse_object(int depth) {
    ++at_;  // '{'
    Value::Object members;
    std::vector<std::size_t> name_offsets;  // of each member's name, for a duplicate's error
    skip_space();
    if (at_ < text_.size() && text_[at_] == '}') {
      ++at_;
      return Value(std::move(members));
    }
    while (true) {
      skip_space();
      if (at_ >= text_.size() || text_[at_] != '"') fail("expected a member name");
      if (members.size() == limits_.max_members) {
        fail("more than " + std::to_string(limits_.max_members) + " members in an object");
      }
      name_offsets.push_back(at_);
      std::string key = parse_string();
      skip_space();
      if (at_ >= text_.size() || text_[at_] != ':') fail("expected ':' after a member name");
      ++at_;
      skip_space();
      Value value = parse_value(depth + 1);
      members.emplace_back(std::move(key), std::move(value));
      skip_space();
      if (at_ < text_.size() && text_[at_] == ',') {
        ++at_;
        continue;
      }
      if (at_ < text_.size() && text_[at_] == '}') {
        ++at_;
        refuse_duplicate_names(members, name_offsets);
        return Value(std::move(members));
      }
      fail("expected ',' or '}' in an object");
    }
  }

  // One lookup per name in an open-addressing table of member indices: O(n), where comparing each
  // name with every earlier one was O(n^2) (a 1 MiB object took 12 s). The hash is seeded per
  // process, so no file can be made of names that all collide.
  void refuse_duplicate_names(const Value::Object& members,
                              const std::vector<std::size_t>& name_offsets) {
    if (members.size() < 2) return;
    std::size_t capacity = 4;
    while (capacity < 2 * members.size()) capacity *= 2;
    const std::size_t mask = capacity - 1;
    std::vector<std::size_t> slots(capacity, 0);  // a member's index + 1; 0 is empty
    for (std::size_t i = 0; i < members.size(); ++i) {
      const std::string& name = members[i].first;
      std::size_t slot = seeded_hash(name) & mask;
      for (; slots[slot] != 0; slot = (slot + 1) & mask) {
        if (members[slots[slot] - 1].first == name) {
          at_ = name_offsets[i];  // the second occurrence
          fail("duplicate member '" + name + "'");
        }
      }
      slots[slot] = i + 1;
    }
  }

  Value parse_array(int depth) {
    ++at_;  // '['
    Value::Array items;
    skip_space();
    if (at_ < text_.size() && text_[at_] == ']') {
      ++at_;
      return Value(std::move(items));
    }
    while (true) {
      skip_space();
      items.push_back(parse_value(depth + 1));
      skip_space();
      if (at_ < text_.size() && text_[at_] == ',') {
        ++at_;
        continue;
      }
      if (at_ < text_.size() && text_[at_] == ']') {
        ++at_;
        return Value(std::move(items));
      }
      fail("expected ',' or ']' in an array");
    }
  }

  unsigned parse_hex4() {
    if (at_ + 4 > text_.size()) fail("truncated \\u escape");
    unsigned code = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = text_[at_++];
      code <<= 4;
      if (h >= '0' && h <= '9') code |= static_cast<unsigned>(h - '0');
      else if (h >= 'a' && h <= 'f') code |= static_cast<unsigned>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') code |= static_cast<unsigned>(h - 'A' + 10);
      else fail("bad hex digit in \\u escape");
    }
    return code;
  }

  static void append_utf8(std::string& out, unsigned code) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xC0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      out += static_cast<char>(0xE0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (code >> 18));
      out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }

  std::string parse_string() {
    ++at_;  // '"'
    std::string out;
    while (true) {
      if (at_ >= text_.size()) fail("unterminated string");
      const char c = text_[at_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at_ >= text_.size()) fail("unterminated escape");
      const char e = text_[at_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned code = parse_hex4();
          if (code >= 0xD800 && code <= 0xDBFF) {
            if (!consume("\\u")) fail("unpaired high surrogate");
            const unsigned low = parse_hex4();
            if (low < 0xDC00 || low > 0xDFFF) fail("bad low surrogate");
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
          } else if (code >= 0xDC00 && code <= 0xDFFF) {
            fail("unpaired low surrogate");
          }
          append_utf8(out, code);
          break;
        }
        default: fail(std::string("bad escape '\\") + e + "'");
      }
    }
  }

  double parse_number() {
    const std::size_t start = at_;
    if (text_[at_] == '-') ++at_;
    auto digits = [&] {
      const std::size_t from = at_;
      while (at_ < text_.size() && text_[at_] >= '0' && text_[at_] <= '9') ++at_;
      return at_ - from;
    };
    if (at_ < text_.size() && text_[at_] == '0') {
      ++at_;
    } else if (digits() == 0) {
      fail("bad number");
    }
    if (at_ < text_.size() && text_[at_] == '.') {
      ++at_;
      if (digits() == 0) fail("bad number: no digits after '.'");
    }
    if (at_ < text_.size() && (text_[at_] == 'e' || text_[at_] == 'E')) {
      ++at_;
      if (at_ < text_.size() && (text_[at_] == '+' || text_[at_] == '-')) ++at_;
      if (digits() == 0) fail("bad number: no exponent digits");
    }
    const std::string literal(text_.substr(start, at_ - start));
    const double value = std::strtod(literal.c_str(), nullptr);
    if (!std::isfinite(value)) fail("number out of range");
    return value;
  }

  std::string_view text_;
  ParseLimits limits_;
  std::size_t at_ = 0;
  std::size_t values_ = 0;
};

void write_string(std::string& out, const std::string& text) {
  out += '"';
  for (const char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escape[8];
          std::snprintf(escape, sizeof escape, "\\u%04x", static_cast<unsigned>(c));
          out += escape;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

void write_number(std::string& out, double value) {
  char text[32];
  if (value == std::floor(value) && std::fabs(value) < 9.007199254740992e15) {
    std::snprintf(text, sizeof text, "%.0f", value);
  } else {
    std::snprintf(text, sizeof text, "%.17g", value);
  }
  out += text;
}

void write(std::string& out, const Value& value, int indent, int level) {
  const bool pretty = indent >= 0;
  auto newline = [&](int at_level) {
    if (!pretty) return;
    out += '\n';
    out.append(static_cast<std::size_t>(at_level * indent), ' ');
  };
  switch (value.type()) {
    case Value::Type::kNull: out += "null"; break;
    case Value::Type::kBool: out += value.as_bool() ? "true" : "false"; break;
    case Value::Type::kNumber: write_number(out, value.as_number()); break;
    case Value::Type::kString: write_string(out, value.as_string()); break;
    case Value::Type::kArray: {
      const auto& items = value.as_array();
      out += '[';
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (i) out += ',';
        newline(level + 1);
        write(out, items[i], indent, level + 1);
      }
      if (!items.empty()) newline(level);
      out += ']';
      break;
    }
    case Value::Type::kObject: {
      const auto& members = value.as_object();
      out += '{';
      for (std::size_t i = 0; i < members.size(); ++i) {
        if (i) out += ',';
        newline(level + 1);
        write_string(out, members[i].first);
        out += pretty ? ": " : ":";
        write(out, members[i].second, indent, level + 1);
      }
      if (!members.empty()) newline(level);
      out += '}';
      break;
    }
  }
}

}  // namespace

bool Value::as_bool() const {
  if (!is_bool()) wrong_type(Type::kBool, type());
  return std::get<bool>(data_);
}

double Value::as_number() const {
  if (!is_number()) wrong_type(Type::kNumber, type());
  return std::get<double>(data_);
}

std::int64_t Value::as_int() const {
  const double number = as_number();
  if (number != std::floor(number) || std::fabs(number) > 9.007199254740992e15) {
    throw TypeError("expected an integer, found " + std::to_string(number));
  }
  return static_cast<std::int64_t>(number);
}

const std::string& Value::as_string() const {
  if (!is_string()) wrong_type(Type::kString, type());
  return std::get<std::string>(data_);
}

const Value::Array& Value::as_array() const {
  if (!is_array()) wrong_type(Type::kArray, type());
  return std::get<Array>(data_);
}

Value::Array& Value::as_array() {
  if (!is_array()) wrong_type(Type::kArray, type());
  return std::get<Array>(data_);
}

const Value::Object& Value::as_object() const {
  if (!is_object()) wrong_type(Type::kObject, type());
  return std::get<Object>(data_);
}

const Value* Value::find(std::string_view key) const {
  for (const auto& [name, member] : as_object()) {
    if (name == key) return &member;
  }
  return nullptr;
}

const Value& Value::at(std::string_view key) const {
  const Value* member = find(key);
  if (member == nullptr) throw TypeError("missing JSON member '" + std::string(key) + "'");
  return *member;
}

Value& Value::set(const std::string& key, Value value) {
  if (!is_object()) wrong_type(Type::kObject, type());
  auto& members = std::get<Object>(data_);
  for (auto& [name, member] : members) {
    if (name == key) {
      member = std::move(value);
      return member;
    }
  }
  members.emplace_back(key, std::move(value));
  return members.back().second;
}

void Value::push_back(Value value) { as_array().push_back(std::move(value)); }

std::string Value::dump(int indent) const {
  std::string out;
  write(out, *this, indent, 0);
  return out;
}

Value parse(std::string_view text, const ParseLimits& limits) {
  return Parser(text, limits).document();
}

void write_file(const std::string& path, const Value& value) {
  std::ofstream out(path);
  out << value.dump() << "\n";
  out.flush();
  if (!out) throw Error(Status::kInternal, "could not write " + path);
}

}  // namespace intfa::json
