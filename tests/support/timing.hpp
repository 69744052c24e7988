// Time budgets for code that must stay linear in its input (the parsers of files intfa reads).
// Fuzzers look for crashes, not for slowness; these budgets are what catches a quadratic step.
#pragma once

#include <algorithm>
#include <chrono>
#include <string>

namespace intfa::testing {

// ASan + UBSan slow every step down (up to about 10x on the CI machine), not the growth with size:
// a budget is multiplied by this in the sanitize build.
#if defined(__SANITIZE_ADDRESS__)
constexpr double kSanitizerSlowdown = 10;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr double kSanitizerSlowdown = 10;
#else
constexpr double kSanitizerSlowdown = 1;
#endif
#else
constexpr double kSanitizerSlowdown = 1;
#endif

// The least of three runs of `body`, in milliseconds: a budget for the code under test, not for
// whatever else shares the machine.
template <typename Body>
double least_ms(Body&& body) {
  double least = 0;
  for (int run = 0; run < 3; ++run) {
    const auto start = std::chrono::steady_clock::now();
    body();
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (run == 0 || ms < least) least = ms;
  }
  return least;
}

// An object of `members` members "member_0000000": 0, ...: 19 bytes each, so 55,200 members make
// 1 MiB.
inline std::string wide_json_object(std::size_t members) {
  std::string text = "{";
  for (std::size_t i = 0; i < members; ++i) {
    std::string name = std::to_string(i);
    name.insert(0, 7 - std::min<std::size_t>(7, name.size()), '0');
    text += (i ? ",\"member_" : "\"member_") + name + "\":0";
  }
  return text + "}";
}

}  // namespace intfa::testing
