// PLACEHOLDER: replaced by the demo.
#include "intfa/commands.hpp"
namespace intfa::cli {
const char* const kRunUsage = "usage: intfa run\n";
int run_demo(const Arguments&) { return 1; }
}  // namespace intfa::cli
