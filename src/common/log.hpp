// Diagnostics on stderr: warnings always, informational lines when INTFA_LOG=1.
// warn_once() keeps a process-wide set of keys so a persistent condition (read-only cache dir,
// stale deployment bundle) is reported once, not per call.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace intfa::log {

enum class Level { kInfo, kWarning };

void warn(const std::string& message);
void warn_once(const std::string& key, const std::string& message);
void info(const std::string& message);  // printed only when verbose()
// info() of a message not printed before: a choice a hot path makes on every call, said once.
void info_once(const std::string& message);
bool verbose();                         // INTFA_LOG=1
// Whether info() prints or a test captures it: a caller may skip building a message otherwise.
bool info_wanted();

// Routes messages to a test's vector instead of stderr while alive; warn_once keys reset too.
class ScopedCapture {
 public:
  ScopedCapture();
  ~ScopedCapture();
  ScopedCapture(const ScopedCapture&) = delete;
  ScopedCapture& operator=(const ScopedCapture&) = delete;
  std::vector<std::string> warnings() const;
  std::vector<std::string> infos() const;

 struct State;  // defined in log.cpp

 private:
  std::unique_ptr<State> state_;
};

}  // namespace intfa::log
