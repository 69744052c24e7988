// PLACEHOLDER: replaced by the cache implementation.
#include "intfa/commands.hpp"
namespace intfa::cli {
const char* const kCacheUsage = "usage: intfa cache ls|verify|clear\n";
int run_cache(const Arguments&) { return 1; }
}  // namespace intfa::cli
