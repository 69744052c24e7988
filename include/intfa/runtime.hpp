// The runtime behind every call: versions, the device in use, cache location and counters.
#pragma once

#include <cstdint>
#include <string>

namespace intfa {

struct RuntimeInfo {
  std::string version;        // intfa's
  std::string nvrtc_version;  // "13.0"
  bool gpu_available = false;
  std::string gpu;            // name and facts, or why there is none
  std::string target_arch;    // "sm_90a", or "" when neither a GPU nor INTFA_ARCH names one
  std::string cache_directory;  // "" when INTFA_CACHE_DISABLE=1
};

RuntimeInfo runtime_info();

struct RuntimeCounters {
  std::uint64_t nvrtc_compiles = 0;
  std::uint64_t disk_hits = 0;
  std::uint64_t memory_hits = 0;
};

RuntimeCounters runtime_counters();

}  // namespace intfa
