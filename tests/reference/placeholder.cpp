// PLACEHOLDER: replaced by the reference implementation.
#include "reference/reference.hpp"
