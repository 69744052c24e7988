// What the two halves of DiskCache share: disk_cache.cpp (one entry: its paths, load, store) and
// cache_maintenance.cpp (the directory as a whole: its tag, scan, list, verify, clear). The names
// intfa gives things in a cache directory (cache/README.md, "Layout") and the check of one entry
// file, which a load and a verify must make alike. Not part of the cache's interface.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "cache/disk_cache.hpp"

namespace intfa::cache::detail {

// A cubin is at most tens of MiB; anything far larger at an entry's name is not ours, and reading
// it whole into memory is what a bad file must not make us do.
constexpr std::uint64_t kMaxEntryBytes = std::uint64_t{1} << 30;
constexpr std::string_view kEntrySuffix = ".cubin";
constexpr std::string_view kSidecarSuffix = ".json";
constexpr std::string_view kTempPrefix = ".tmp-";
constexpr std::size_t kKeyHexDigits = 32;
constexpr std::size_t kFolderHexDigits = 2;

inline bool is_lower_hex(std::string_view text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// What is at an entry's name: a verified cubin, nothing, a bad file, or one that cannot be read
// (an I/O error is no proof the entry is bad, so such a file is left in place). A directory there
// is bad too, but it is not intfa's to remove.
struct EntryCheck {
  enum class Outcome { kGood, kMissing, kBad, kUnreadable };
  Outcome outcome = Outcome::kMissing;
  std::optional<nvrtc::Cubin> cubin;
  std::string problem;
  bool is_directory = false;
};

// Reads and decodes the entry file at `path` as a load does; with `recorded`, it must also have
// the size and checksum recorded for it. Never throws for what is at `path`.
EntryCheck check_entry(const std::filesystem::path& path, const CacheKey& key,
                       const RecordedFile* recorded = nullptr);

// Removes the name `path` (a file, a link, a FIFO; never a directory, and never what a link
// points to). Only ever called on intfa's own names inside a <2 hex> folder.
std::error_code remove_file(const std::filesystem::path& path);

// "is a symbolic link, not a directory": what is wrong with a thing at a key folder's name.
std::string folder_problem(std::filesystem::file_type type);

}  // namespace intfa::cache::detail
