// Small string helpers shared by the stages and the CLI.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace intfa::strings {

std::string trim(std::string_view text);
std::string to_lower(std::string_view text);
std::vector<std::string> split(std::string_view text, char separator);
std::string join(const std::vector<std::string>& parts, std::string_view separator);
bool starts_with(std::string_view text, std::string_view prefix);
bool ends_with(std::string_view text, std::string_view suffix);
// Whole-string base-10 integer (optional sign); nullopt on anything else or overflow.
std::optional<long> parse_int(std::string_view text);
std::string to_hex(const unsigned char* bytes, std::size_t count);
// "1.5 KiB", "3.2 MiB": for human-facing sizes.
std::string human_bytes(std::uint64_t bytes);
// `text` safe to print on a terminal: C0 controls and DEL as \xNN (newlines kept when asked), C1
// controls (U+0080..U+009F) as \u00NN, and bytes that are not UTF-8 as \xNN. Text from files
// (sidecars, manifests) can otherwise clear the screen or set the window title.
std::string printable(std::string_view text, bool keep_newlines = false);

}  // namespace intfa::strings
