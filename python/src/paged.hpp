// The paged KV cache's part of the extension module (paged.cpp).
#pragma once

#include <pybind11/pybind11.h>

namespace intfa::python {

// Adds paged_cache_bytes, paged_append, paged_decode_workspace_bytes, paged_decode, merge_states
// and precompile_paged to the module.
void register_paged(pybind11::module_& module);

}  // namespace intfa::python
