// What a call that should be refused did, for EXPECT_EQ against the field it should name: the
// field of the InvalidArgument it threw, else what happened instead.
#pragma once

#include <exception>
#include <string>

#include "intfa/errors.hpp"
#include "intfa/intfa.h"

namespace intfa::testing {

template <typename Call>
std::string invalid_field(Call&& call) {
  try {
    call();
  } catch (const InvalidArgument& error) {
    return error.field();
  } catch (const std::exception& error) {
    return std::string("not an InvalidArgument: ") + error.what();
  }
  return "(no error)";
}

// The same for a C API call: the field its INTFA_INVALID_ARGUMENT names ("invalid <field> =
// <value>: ..."), else what it returned.
inline std::string c_invalid_field(intfa_status_t status) {
  if (status != INTFA_INVALID_ARGUMENT) return "status " + std::to_string(status);
  const std::string message = intfa_last_error();
  const std::string prefix = "invalid ";
  const std::size_t end = message.find(" = ");
  if (message.rfind(prefix, 0) != 0 || end == std::string::npos) return "message " + message;
  return message.substr(prefix.size(), end - prefix.size());
}

}  // namespace intfa::testing
