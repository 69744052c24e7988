#include "errors.hpp"

#include <exception>

#include "intfa/errors.hpp"

namespace py = pybind11;

namespace intfa::python {
namespace {

// The classes live in Python (intfa/_errors.py) so that the torch layer raises the same types
// for what it rejects itself; they are looked up at translation time, which keeps no Python
// object in C++ static storage (destroying one after the interpreter finalizes would crash).
void raise(const char* class_name, const Error& error, const py::dict& attributes) {
  const py::object type = py::module_::import("intfa._errors").attr(class_name);
  const py::object instance = type(error.what(), status_name(error.status()), **attributes);
  PyErr_SetObject(type.ptr(), instance.ptr());
}

// Most derived first: a CompileError is also an Error.
void translate(std::exception_ptr pending) {  // by value: pybind11::ExceptionTranslator
  try {
    std::rethrow_exception(pending);
  } catch (const InvalidArgument& error) {
    raise("InvalidArgument", error,
          py::dict(py::arg("field") = error.field(), py::arg("value") = error.value()));
  } catch (const CompileError& error) {
    raise("CompileError", error,
          py::dict(py::arg("spec") = error.spec(), py::arg("log") = error.log()));
  } catch (const DriverError& error) {
    raise("DriverError", error,
          py::dict(py::arg("call") = error.call(), py::arg("result") = error.result(),
                   py::arg("result_name") = error.result_name()));
  } catch (const Unsupported& error) {
    raise("Unsupported", error, py::dict());
  } catch (const NoDevice& error) {
    raise("NoDevice", error, py::dict());
  } catch (const CacheError& error) {
    raise("CacheError", error, py::dict());
  } catch (const InternalError& error) {
    raise("InternalError", error, py::dict());
  } catch (const Error& error) {
    raise("Error", error, py::dict());
  }
  // Anything else (std::bad_alloc, py::error_already_set, ...) is left to pybind11's own
  // translators, which rethrow it to the next one in line.
}

}  // namespace

void register_error_translator() {
  py::register_exception_translator(translate);
}

}  // namespace intfa::python
