// intfa cache ls|verify|clear: the disk cache seen from the shell (format: cache/README.md).
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "cache/bundle.hpp"
#include "cache/disk_cache.hpp"
#include "common/locations.hpp"
#include "common/strings.hpp"
#include "intfa/args.hpp"
#include "intfa/commands.hpp"
#include "intfa/errors.hpp"

namespace intfa::cli {

const char* const kCacheUsage =
    "usage: intfa cache <verb> [options] [DIR]\n\n"
    "  ls     [--dir DIR]            every entry: key, size, date, kernel spec; then the total\n"
    "  verify [--dir DIR]            check every entry byte by byte; exit 1 if any is bad. In a\n"
    "                                deployment bundle (DIR/manifest.json) check it against the\n"
    "                                manifest: each listed entry present with its recorded size\n"
    "                                and checksum, and no entry the manifest does not list\n"
    "  clear  [--stale] [--dir DIR]  remove every entry, or with --stale only what this build\n"
    "                                cannot use: corrupt entries, entries of another NVRTC or\n"
    "                                format version, orphan sidecars, temp files over an hour "
    "old\n\n"
    "DIR (--dir DIR, or as the last argument) defaults to $INTFA_CACHE_DIR, else\n"
    "$XDG_CACHE_HOME/intfa, else ~/.cache/intfa. A DIR given that does not exist, or is not a\n"
    "directory, is an error.\n"
    "clear removes only intfa's own files (entries, sidecars, temp files, in their key folders)\n"
    "and refuses a directory that does not look like an intfa cache, and a deployment bundle;\n"
    "it lists each file it could not remove and then exits 1.\n";

namespace {

struct CacheDirectory {
  std::filesystem::path path;
  bool given = false;  // by --dir or DIR, not the default location
};

// --dir or the argument after the verb, else the directory the library would use; nullopt when
// the cache is disabled. A directory given must exist: a mistyped path must not pass a check.
std::optional<CacheDirectory> cache_directory(const Args& args) {
  const auto option = args.get("dir");
  const bool positional = args.positional().size() == 2;
  if (option && positional) throw UsageError("give the directory once: --dir DIR or DIR");
  if (!option && !positional) {
    const auto location = locations::default_cache_directory();
    if (!location) return std::nullopt;
    return CacheDirectory{*location, false};
  }
  const std::filesystem::path given =
      std::filesystem::absolute(option ? *option : args.positional()[1]);
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(given, error);
  if (status.type() == std::filesystem::file_type::not_found) {
    throw CacheError(given.string() + " does not exist");
  }
  if (!error && status.type() != std::filesystem::file_type::directory) {
    throw CacheError(given.string() + " is not a directory");
  }
  return CacheDirectory{given, true};
}

std::string local_date(std::time_t when) {
  std::tm parts{};
  localtime_r(&when, &parts);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M", &parts);
  return text;
}

int list_entries(const cache::DiskCache& disk) {
  const auto entries = disk.list();
  std::uint64_t total_bytes = 0;
  // The spec, of any length, is the last column, so the fixed-width ones stay aligned.
  if (!entries.empty()) {
    std::printf("%-32s  %10s  %-16s  %s\n", "KEY", "SIZE", "DATE", "SPEC");
  }
  for (const cache::EntryInfo& entry : entries) {
    total_bytes += entry.size_bytes;
    // The sidecar is text from a file: its control characters never reach the terminal.
    const std::string spec = entry.spec.empty() ? "(no sidecar)" : strings::printable(entry.spec);
    std::printf("%-32s  %10s  %-16s  %s\n", entry.key.hex().c_str(),
                strings::human_bytes(entry.size_bytes).c_str(), local_date(entry.modified).c_str(),
                spec.c_str());
  }
  std::printf("%zu entries, %s in %s\n", entries.size(), strings::human_bytes(total_bytes).c_str(),
              disk.directory().c_str());
  return 0;
}

int print_report(const cache::VerifyReport& report, const char* what) {
  for (const auto& [path, problem] : report.bad) {
    std::printf("bad  %s: %s\n", strings::printable(path.string()).c_str(),
                strings::printable(problem).c_str());
  }
  std::printf("%zu %s verified, %zu bad\n", report.checked, what, report.bad.size());
  return report.ok() ? 0 : 1;
}

int verify_entries(const cache::DiskCache& disk) {
  return print_report(disk.verify(), "entries");
}

// A deployment bundle, against its manifest; the runtime's verdict on it is printed too, since a
// bundle that verifies may still be ignored here (another NVRTC).
int verify_bundle(const std::filesystem::path& directory) {
  cache::Manifest manifest;
  try {
    manifest = cache::read_manifest(directory);
  } catch (const cache::ManifestError& error) {
    std::printf("bad  %s\n", strings::printable(error.what()).c_str());  // names the manifest
    return 1;
  }
  std::printf("bundle %s: intfa %s, NVRTC %s, cache format %u, %zu entries\n", directory.c_str(),
              strings::printable(manifest.library_version).c_str(),
              manifest.nvrtc_version.to_string().c_str(),
              static_cast<unsigned>(manifest.format_version), manifest.entries.size());
  const std::string incompatibility = cache::incompatibility(manifest);
  if (!incompatibility.empty()) {
    std::printf("note: this build's runtime ignores the bundle: %s\n", incompatibility.c_str());
  }
  return print_report(cache::verify_bundle(directory, manifest), "manifest entries");
}

int clear_entries(cache::DiskCache& disk, bool stale_only) {
  const cache::ClearReport report = disk.clear(stale_only);
  for (const auto& [path, reason] : report.kept) {
    std::printf("kept %s: it %s\n", strings::printable(path.string()).c_str(),
                strings::printable(reason).c_str());
  }
  for (const auto& [path, reason] : report.failed) {
    std::printf("could not remove %s: %s\n", strings::printable(path.string()).c_str(),
                strings::printable(reason).c_str());
  }
  std::printf("removed %zu %sfiles, freed %s (%llu bytes) in %s\n", report.removed_files,
              stale_only ? "stale " : "", strings::human_bytes(report.freed_bytes).c_str(),
              static_cast<unsigned long long>(report.freed_bytes), disk.directory().c_str());
  if (report.failed.empty()) return 0;
  std::printf("%zu %s could not be removed\n", report.failed.size(),
              report.failed.size() == 1 ? "file" : "files");
  return 1;
}

}  // namespace

int run_cache(const Arguments& arguments) {
  Grammar grammar;
  grammar.values = {"dir"};
  grammar.flags = {"stale"};
  grammar.max_positional = 2;  // the verb and DIR
  const Args args(arguments, grammar);
  if (args.positional().empty()) throw UsageError("missing verb: ls, verify or clear");
  const std::string& verb = args.positional().front();
  if (verb != "ls" && verb != "verify" && verb != "clear") {
    throw UsageError("unknown verb '" + verb + "': expected ls, verify or clear");
  }
  args.reject_unknown(verb == "clear" ? std::vector<std::string>{"dir", "stale"}
                                      : std::vector<std::string>{"dir"});
  const auto directory = cache_directory(args);
  if (!directory) {
    std::printf("the kernel cache is disabled (INTFA_CACHE_DISABLE=1, or no HOME to put it in)\n");
    return 0;
  }
  if (verb == "verify" && cache::holds_manifest(directory->path)) {
    return verify_bundle(directory->path);
  }
  if (verb == "clear" && cache::is_bundle_directory(directory->path)) {
    // Its entries gone, a manifest would still name them: the runtime would use the bundle and
    // compile every kernel it lists (and a precompile writing it would fail midway).
    throw CacheError(
        directory->path.string() + " is a deployment bundle (it holds " + cache::kManifestFileName +
        " or " + cache::kBundleLockFileName +
        "): remove it whole, or rebuild it with intfa precompile; nothing was removed");
  }
  cache::DiskCache disk(directory->path);
  if (verb == "ls") return list_entries(disk);
  if (verb == "verify") return verify_entries(disk);
  return clear_entries(disk, args.flag("stale"));
}

}  // namespace intfa::cli
