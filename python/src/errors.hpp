// intfa::Error and its subclasses as the Python exceptions of intfa/_errors.py (intfa.Error,
// intfa.InvalidArgument, ...), carrying the C++ message and the fields each type adds.
#pragma once

#include <pybind11/pybind11.h>

namespace intfa::python {

// Registers the translator with pybind11; every binding that can throw relies on it.
void register_error_translator();

}  // namespace intfa::python
