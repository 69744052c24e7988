#include "intfa/errors.hpp"

namespace intfa {

const char* status_name(Status status) noexcept {
  switch (status) {
    case Status::kOk: return "ok";
    case Status::kInvalidArgument: return "invalid_argument";
    case Status::kUnsupported: return "unsupported";
    case Status::kCompileError: return "compile_error";
    case Status::kDriverError: return "driver_error";
    case Status::kNoDevice: return "no_device";
    case Status::kCacheError: return "cache_error";
    case Status::kInternal: return "internal";
  }
  return "unknown";
}

InvalidArgument::InvalidArgument(std::string field, std::string value,
                                 const std::string& expectation)
    : Error(Status::kInvalidArgument,
            "invalid " + field + " = " + value + ": " + expectation),
      field_(std::move(field)),
      value_(std::move(value)) {}

CompileError::CompileError(std::string spec, std::string log, const std::string& summary)
    : Error(Status::kCompileError,
            summary + "\n  spec: " + spec + "\n  NVRTC log:\n" + log),
      spec_(std::move(spec)),
      log_(std::move(log)) {}

DriverError::DriverError(std::string call, int result, std::string result_name,
                         const std::string& detail)
    : Error(Status::kDriverError, call + " failed with " + result_name + " (" +
                                      std::to_string(result) + ")" +
                                      (detail.empty() ? "" : ": " + detail)),
      call_(std::move(call)),
      result_(result),
      result_name_(std::move(result_name)) {}

}  // namespace intfa
