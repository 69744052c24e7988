// What a call that should be refused did, for EXPECT_EQ against the field it should name: the
// field of the InvalidArgument it threw, else what happened instead.
#pragma once

#include <exception>
#include <string>

#include "intfa/errors.hpp"

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

}  // namespace intfa::testing
