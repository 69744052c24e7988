#include "common/log.hpp"

#include <cstdio>
#include <mutex>
#include <set>

#include "common/env.hpp"
#include "common/strings.hpp"

namespace intfa::log {

struct ScopedCapture::State {
  std::vector<std::string> warnings;
  std::vector<std::string> infos;
};

namespace {

struct Sink {
  std::mutex mutex;
  std::set<std::string> warned_keys;
  ScopedCapture::State* capture = nullptr;
};

Sink& sink() {
  static Sink instance;
  return instance;
}

void emit(Level level, const std::string& message) {
  // Messages quote files (a manifest's member names, a database's values): their control
  // characters never reach the terminal.
  std::string text = strings::printable(message, /*keep_newlines=*/true);
  Sink& s = sink();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.capture != nullptr) {
    (level == Level::kWarning ? s.capture->warnings : s.capture->infos).push_back(std::move(text));
    return;
  }
  std::fprintf(stderr, "intfa: %s%s\n", level == Level::kWarning ? "warning: " : "", text.c_str());
}

}  // namespace

void warn(const std::string& message) { emit(Level::kWarning, message); }

void warn_once(const std::string& key, const std::string& message) {
  {
    Sink& s = sink();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!s.warned_keys.insert(key).second) return;
  }
  emit(Level::kWarning, message);
}

bool verbose() {
  try {
    return env::flag("INTFA_LOG");
  } catch (const std::exception& error) {
    // The flag's own message, which states the one rule of every flag (this said "0 or 1" while
    // yes was read as 1).
    warn_once("env:INTFA_LOG", std::string(error.what()) + "; informational logging stays off");
    return false;
  }
}

bool info_wanted() {
  return verbose() || sink().capture != nullptr;
}

void info(const std::string& message) {
  if (info_wanted()) emit(Level::kInfo, message);
}

void info_once(const std::string& message) {
  if (!info_wanted()) return;
  {
    Sink& s = sink();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!s.warned_keys.insert("info: " + message).second) return;
  }
  emit(Level::kInfo, message);
}

ScopedCapture::ScopedCapture() : state_(std::make_unique<State>()) {
  Sink& s = sink();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.capture = state_.get();
  s.warned_keys.clear();
}

ScopedCapture::~ScopedCapture() {
  {
    Sink& s = sink();
    std::lock_guard<std::mutex> lock(s.mutex);
    s.capture = nullptr;
    s.warned_keys.clear();
  }
}

std::vector<std::string> ScopedCapture::warnings() const {
  std::lock_guard<std::mutex> lock(sink().mutex);
  return state_->warnings;
}

std::vector<std::string> ScopedCapture::infos() const {
  std::lock_guard<std::mutex> lock(sink().mutex);
  return state_->infos;
}

}  // namespace intfa::log
