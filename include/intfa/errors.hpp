// intfa's error hierarchy. Every failure the library reports is one of these; the C API maps each
// to an intfa_status_t. Messages say what was expected and what was given.
#pragma once

#include <stdexcept>
#include <string>

namespace intfa {

// Stable numeric codes, shared with the C API (include/intfa/intfa.h).
enum class Status : int {
  kOk = 0,
  kInvalidArgument = 1,  // a caller-supplied value is wrong; the field is named
  kUnsupported = 2,      // valid request this build/device cannot serve (arch, head dim, ...)
  kCompileError = 3,     // NVRTC rejected a rendered kernel; the log and spec are attached
  kDriverError = 4,      // a CUDA driver call failed; the CUresult name is attached
  kNoDevice = 5,         // no CUDA driver or GPU where one is needed to launch
  kCacheError = 6,       // the kernel cache could not be used in a way that must fail the call
  kInternal = 7,         // a broken invariant inside intfa (a bug: please report it)
};

const char* status_name(Status status) noexcept;

class Error : public std::runtime_error {
 public:
  Error(Status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  Status status() const noexcept { return status_; }

 private:
  Status status_;
};

// A caller-supplied value is wrong. field() names it ("problem.head_dim", "INTFA_ARCH", ...).
class InvalidArgument : public Error {
 public:
  InvalidArgument(std::string field, std::string value, const std::string& expectation);
  const std::string& field() const noexcept { return field_; }
  const std::string& value() const noexcept { return value_; }

 private:
  std::string field_;
  std::string value_;
};

class Unsupported : public Error {
 public:
  explicit Unsupported(const std::string& message) : Error(Status::kUnsupported, message) {}
};

// NVRTC failed. spec() is the readable kernel spec, log() the whole NVRTC program log.
class CompileError : public Error {
 public:
  CompileError(std::string spec, std::string log, const std::string& summary);
  const std::string& spec() const noexcept { return spec_; }
  const std::string& log() const noexcept { return log_; }

 private:
  std::string spec_;
  std::string log_;
};

// A CUDA driver call failed. result() is the CUresult value, result_name() its name.
class DriverError : public Error {
 public:
  DriverError(std::string call, int result, std::string result_name, const std::string& detail = {});
  int result() const noexcept { return result_; }
  const std::string& result_name() const noexcept { return result_name_; }
  const std::string& call() const noexcept { return call_; }

 private:
  std::string call_;
  int result_;
  std::string result_name_;
};

class NoDevice : public Error {
 public:
  explicit NoDevice(const std::string& message) : Error(Status::kNoDevice, message) {}
};

class CacheError : public Error {
 public:
  explicit CacheError(const std::string& message) : Error(Status::kCacheError, message) {}
};

class InternalError : public Error {
 public:
  explicit InternalError(const std::string& message) : Error(Status::kInternal, message) {}
};

}  // namespace intfa
