// intfa._intfa: the C++ API over raw device pointers, for the torch layer in intfa/ (which owns
// the tensors, the stream and the checks that need shapes). Nothing here depends on PyTorch, so
// the extension builds wherever pybind11 and Python's headers are.
//
// Enumerations cross as the names of src/numerics/option_names.hpp ("full_int8", "u8", "running",
// "tensor"), the ones the `intfa` tool uses; an unknown string is an InvalidArgument naming the
// parameter. The attention numerics (include/intfa/numerics.hpp) cross as ONE argument, a dict of
// option name -> value name (numerics_from_dict), and numerics_fields() hands the list itself to
// the Python layer: no option is named here.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "attention/validation.hpp"
#include "cache/bundle.hpp"
#include "cache/disk_cache.hpp"
#include "device/arch.hpp"
#include "device/driver_api.hpp"
#include "errors.hpp"
#include "intfa/intfa.hpp"
#include "intfa/precompile.hpp"
#include "intfa_version.hpp"
#include "launch/kernel_runtime.hpp"
#include "numerics/option_names.hpp"
#include "nvrtc/compiler.hpp"
#include "paged.hpp"

namespace py = pybind11;
using namespace pybind11::literals;

namespace intfa::python {
namespace {

DType parse_dtype(const std::string& name, const std::string& field) {
  if (name == "f16") return DType::kF16;
  if (name == "bf16") return DType::kBF16;
  if (name == "i8") return DType::kI8;
  if (name == "i4x2") return DType::kI4x2;
  throw InvalidArgument(field, "'" + name + "'", "expected f16, bf16, i8 or i4x2");
}

// A numerics option by its table (numerics/option_names.hpp), naming the Python argument.
template <typename Enum>
Enum parse_option_argument(const std::string& name, const char* field) {
  if (const auto value = parse_option<Enum>(name)) return *value;
  throw InvalidArgument(field, "'" + name + "'", "expected " + option_names_text<Enum>(" or ", "'"));
}

Variant parse_variant(const std::string& name) {
  return parse_option_argument<Variant>(name, "variant");
}
// V's granularity as quantize_v and v_scale_count take it (how V is quantized, not an option of
// an attention call: that one comes in `numerics`).
VScaleGranularity parse_v_granularity(const std::string& name) {
  return parse_option_argument<VScaleGranularity>(name, "v_granularity");
}

// The rotation of Q and K by its name ("off", "on", "auto": intfa._checks.option spells True and
// False so).
QKRotation parse_rotation(const std::string& name) {
  return parse_option_argument<QKRotation>(name, "rotate");
}

// The names of an option's values, in the enum's order, for the Python layer's checks.
template <typename Enum>
py::tuple option_values() {
  py::list names;
  for (const auto& row : OptionTable<Enum>::rows) names.append(row.name);
  return py::tuple(names);
}

// THE list of numerics options as the Python layer reads it (intfa/_checks.py): per option, in the
// list's order, a dict of its "name" (the Python keyword), "default" (its value's name), "values"
// (the names of its values, in the enum's order) and "read_by" (the variants whose kernels read
// it).
py::tuple numerics_fields() {
  py::list fields;
  for_each_numerics_field(AttentionNumerics{}, [&](const auto& field, const auto& value) {
    using Enum = std::decay_t<decltype(value)>;
    py::list read_by;
    for (const auto& row : OptionTable<Variant>::rows) {
      if (field.read_by_variant(row.value)) read_by.append(row.name);
    }
    fields.append(py::dict("name"_a = field.name, "default"_a = option_name(field.default_value),
                           "values"_a = option_values<Enum>(), "read_by"_a = py::tuple(read_by)));
  });
  return py::tuple(fields);
}

// "p_encoding, p_scale, v_granularity or k_granularity": the options' names, for a message.
std::string numerics_names_text() {
  std::vector<std::string> names;
  for_each_numerics_field(AttentionNumerics{},
                          [&](const auto& field, const auto&) { names.push_back(field.name); });
  std::string text;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) text += i + 1 == names.size() ? " or " : ", ";
    text += names[i];
  }
  return text;
}

// A call's numerics as the Python layer passes them, option name -> value name: an option absent
// keeps its default; an unknown option is an InvalidArgument of field "numerics", a value its table
// does not spell one naming the option (as every surface reads them: name, old name, short name).
AttentionNumerics numerics_from_dict(const std::map<std::string, std::string>& names) {
  for (const auto& given : names) {
    bool known = false;
    for_each_numerics_field(AttentionNumerics{}, [&](const auto& field, const auto&) {
      known |= given.first == field.name;
    });
    if (!known) {
      throw InvalidArgument("numerics", "'" + given.first + "'",
                            "expected a numerics option: " + numerics_names_text());
    }
  }
  AttentionNumerics numerics;
  for_each_numerics_field(numerics, [&](const auto& field, auto& value) {
    using Enum = std::remove_reference_t<decltype(value)>;
    const auto given = names.find(field.name);
    if (given != names.end()) value = parse_option_argument<Enum>(given->second, field.name);
  });
  return numerics;
}

// `numerics` by name, every option: what a plan was made with (numerics_from_dict's inverse).
py::dict numerics_dict(const AttentionNumerics& numerics) {
  py::dict names;
  for_each_numerics_field(numerics, [&](const auto& field, const auto& value) {
    names[field.name] = option_name(value);
  });
  return names;
}

using NumericsNames = std::map<std::string, std::string>;

void* pointer(std::uintptr_t address) {
  return reinterpret_cast<void*>(address);
}

TensorView make_view(std::uintptr_t data, const std::string& dtype,
                     const std::array<std::int64_t, 4>& strides) {
  TensorView view;
  view.data = pointer(data);
  view.dtype = parse_dtype(dtype, "dtype");
  view.strides = strides;
  return view;
}

AttentionProblem make_problem(int batch, int heads_q, int heads_kv, int seq_q, int seq_kv,
                              int head_dim, bool causal, const std::string& variant) {
  AttentionProblem problem;
  problem.batch = batch;
  problem.heads_q = heads_q;
  problem.heads_kv = heads_kv;
  problem.seq_q = seq_q;
  problem.seq_kv = seq_kv;
  problem.head_dim = head_dim;
  problem.causal = causal;
  problem.variant = parse_variant(variant);
  return problem;
}

CUstream as_stream(std::uintptr_t handle) {
  return reinterpret_cast<CUstream>(handle);
}

py::dict runtime_dict() {
  const RuntimeInfo info = runtime_info();
  const launch::RuntimeStats stats = launch::KernelRuntime::instance().stats();
  py::dict result("version"_a = info.version, "nvrtc_version"_a = info.nvrtc_version,
                  "gpu_available"_a = info.gpu_available, "gpu"_a = info.gpu,
                  "target_arch"_a = info.target_arch, "nvrtc_compiles"_a = stats.nvrtc_compiles,
                  "disk_hits"_a = stats.disk_hits, "bundle_hits"_a = stats.bundle_hits,
                  "packaged_hits"_a = stats.packaged_hits, "disk_misses"_a = stats.disk_misses,
                  "memory_hits"_a = stats.memory_hits, "module_loads"_a = stats.module_loads);
  // The user cache as `intfa info` shows it: None when INTFA_CACHE_DISABLE=1.
  result["cache_directory"] = py::none();
  result["cache_entries"] = 0;
  result["cache_bytes"] = 0;
  if (!info.cache_directory.empty()) {
    std::uint64_t bytes = 0;
    const auto entries = cache::DiskCache(info.cache_directory).list();
    for (const cache::EntryInfo& entry : entries) bytes += entry.size_bytes;
    result["cache_directory"] = info.cache_directory;
    result["cache_entries"] = entries.size();
    result["cache_bytes"] = bytes;
  }
  // Where NVRTC and the CUDA headers were found, as `intfa info` prints them.
  const std::string nvrtc_library = nvrtc::library_path();
  result["nvrtc_library"] = nvrtc_library;
  result["nvrtc_source"] = nvrtc::library_origin(nvrtc_library);
  const auto include_dir = nvrtc::cuda_include_dir();
  result["cuda_include_dir"] = include_dir ? py::cast(*include_dir) : py::none();
  result["cuda_headers_source"] =
      include_dir ? py::cast(nvrtc::include_dir_origin(*include_dir)) : py::none();
  const auto bundle = cache::DeploymentBundle::directory_from_environment();
  result["deploy_cache"] = bundle ? py::cast(bundle->string()) : py::none();
  const auto packaged = launch::KernelRuntime::instance().packaged_kernels();
  result["packaged_kernels"] = packaged.empty() ? py::none() : py::cast(packaged.string());
  return result;
}

py::dict precompile_dict(const std::string& arch, const std::vector<int>& head_dims,
                         const std::vector<std::string>& variants,
                         const std::vector<std::string>& dtypes, const std::vector<bool>& causal,
                         const NumericsNames& numerics, bool smooth_k, unsigned jobs,
                         const std::string& rotate) {
  PrecompileRequest request;
  request.arch = arch;
  request.head_dims = head_dims;
  for (const std::string& variant : variants) request.variants.push_back(parse_variant(variant));
  for (const std::string& dtype : dtypes) request.dtypes.push_back(parse_dtype(dtype, "dtypes"));
  request.causal = causal;
  request.options.numerics = numerics_from_dict(numerics);
  request.options.smooth_k = smooth_k;
  request.options.rotate_qk = parse_rotation(rotate);
  request.jobs = jobs;
  PrecompileReport report;
  {
    py::gil_scoped_release unlocked;  // NVRTC takes seconds per kernel
    report = precompile(request);
  }
  return py::dict("arch"_a = report.arch, "kernels"_a = report.kernels,
                  "compiled_now"_a = report.compiled_now,
                  "already_present"_a = report.already_present, "specs"_a = report.specs);
}

}  // namespace
// One `intfa.attention` (or `attention_varlen`) signature (shapes, strides, dtypes, options),
// parsed once: run() takes only the addresses, so a repeated call costs one small pybind11 call
// (the Python side keeps a plan per signature). Everything is still validated by
// attention_forward_16bit on every run. k_granularity "block" is for dense plans only (no
// totals): packed sequences keep K's scales per token.
class AttentionPlan {
 public:
  AttentionPlan(const AttentionProblem& problem, const std::string& dtype,
                const std::array<std::int64_t, 4>& q_strides,
                const std::array<std::int64_t, 4>& k_strides,
                const std::array<std::int64_t, 4>& v_strides,
                const std::array<std::int64_t, 4>& out_strides, const AttentionOptions& options,
                int total_q, int total_kv)
      : problem_(problem), options_(options) {
    inputs_.q = make_view(0, dtype, q_strides);
    inputs_.k = make_view(0, dtype, k_strides);
    inputs_.v = make_view(0, dtype, v_strides);
    inputs_.out = make_view(0, dtype, out_strides);
    inputs_.varlen.total_q = total_q;
    inputs_.varlen.total_kv = total_kv;
    // The workspace depends on the totals only; the offsets' addresses come with each run.
    workspace_bytes_ = attention_workspace_bytes(problem_, inputs_.varlen);
  }

  std::size_t workspace_bytes() const { return workspace_bytes_; }
  const AttentionNumerics& numerics() const { return options_.numerics; }

  void run(std::uintptr_t q, std::uintptr_t k, std::uintptr_t v, std::uintptr_t out,
           std::uintptr_t lse, std::uintptr_t workspace, std::uintptr_t stream,
           std::uintptr_t cu_seqlens_q, std::uintptr_t cu_seqlens_kv) const {
    AttentionInputs inputs = inputs_;
    inputs.q.data = pointer(q);
    inputs.k.data = pointer(k);
    inputs.v.data = pointer(v);
    inputs.out.data = pointer(out);
    inputs.lse = static_cast<float*>(pointer(lse));
    inputs.varlen.cu_seqlens_q = static_cast<const int*>(pointer(cu_seqlens_q));
    inputs.varlen.cu_seqlens_kv = static_cast<const int*>(pointer(cu_seqlens_kv));
    py::gil_scoped_release unlocked;  // the first run of a signature compiles its kernels
    attention_forward_16bit(problem_, inputs, pointer(workspace), workspace_bytes_,
                            as_stream(stream), options_);
  }

 private:
  AttentionProblem problem_;
  AttentionInputs inputs_;
  AttentionOptions options_;
  std::size_t workspace_bytes_ = 0;
};

// One `intfa.attention_int8` signature: attention_forward over already quantized tensors,
// parsed once, launched with the addresses alone.
class Int8AttentionPlan {
 public:
  Int8AttentionPlan(const AttentionProblem& problem, const std::string& v_dtype,
                    const std::string& out_dtype, const std::array<std::int64_t, 4>& q_strides,
                    const std::array<std::int64_t, 4>& k_strides,
                    const std::array<std::int64_t, 4>& v_strides,
                    const std::array<std::int64_t, 4>& out_strides,
                    const AttentionOptions& options)
      : problem_(problem), options_(options) {
    tensors_.q = make_view(0, "i8", q_strides);
    tensors_.k = make_view(0, "i8", k_strides);
    tensors_.v = make_view(0, v_dtype, v_strides);
    tensors_.out = make_view(0, out_dtype, out_strides);
  }

  void run(std::uintptr_t q, std::uintptr_t k, std::uintptr_t v, std::uintptr_t q_scale,
           std::uintptr_t k_scale, std::uintptr_t v_scale, std::uintptr_t out, std::uintptr_t lse,
           std::uintptr_t stream, std::uintptr_t q_dot_k_mean) const {
    AttentionTensors tensors = tensors_;
    tensors.q.data = pointer(q);
    tensors.k.data = pointer(k);
    tensors.v.data = pointer(v);
    tensors.q_scale = static_cast<const float*>(pointer(q_scale));
    tensors.k_scale = static_cast<const float*>(pointer(k_scale));
    tensors.v_scale = static_cast<const float*>(pointer(v_scale));
    tensors.out.data = pointer(out);
    tensors.lse = static_cast<float*>(pointer(lse));
    tensors.q_dot_k_mean = static_cast<const float*>(pointer(q_dot_k_mean));
    py::gil_scoped_release unlocked;
    attention_forward(problem_, tensors, as_stream(stream), options_);
  }

  const AttentionNumerics& numerics() const { return options_.numerics; }

 private:
  AttentionProblem problem_;
  AttentionTensors tensors_;
  AttentionOptions options_;
};


}  // namespace intfa::python

PYBIND11_MODULE(_intfa, m) {
  using namespace intfa;
  using namespace intfa::python;
  m.doc() = "intfa's C++ runtime over raw device pointers (use the intfa package, not this)";
  register_error_translator();

  // Not runtime_info(): `import intfa` asks for the version, and must not depend on the cache
  // variables (a malformed INTFA_CACHE_DIR is the error of the first call that needs the cache).
  m.def("version", [] { return std::string(INTFA_VERSION_STRING); });
  m.def("runtime_info", &runtime_dict,
        "Versions, GPU, target arch, kernel cache and this process's runtime counters.");

  m.def(
      "target_archs",
      [] {
        std::vector<std::string> names;
        for (device::Arch arch : device::all_archs()) names.push_back(device::arch_name(arch));
        return names;
      },
      "The archs kernels can be compiled for (INTFA_ARCH, precompile's arch).");
  m.def("numerics_fields", &numerics_fields,
        "The attention numerics options (include/intfa/numerics.hpp, the one list), in its order: "
        "per option a dict of name, default, values and read_by (variants).");
  // option_values and default_options: the list's options by name, with the variant (values) and
  // the Q/K transforms (defaults), which are no numerics options.
  m.def(
      "option_values",
      [] {
        py::dict values("variant"_a = option_values<Variant>(),
                        "rotate"_a = option_values<QKRotation>());
        for (const py::handle field : numerics_fields()) values[field["name"]] = field["values"];
        return values;
      },
      "The names of the variant's and each numerics option's values "
      "(src/numerics/option_names.hpp, the one table).");
  m.def("default_options", [] {
    const AttentionOptions defaults;
    py::dict result = numerics_dict(defaults.numerics);
    result["smooth_k"] = defaults.smooth_k;
    result["rotate"] = option_name(defaults.rotate_qk);
    return result;
  });
  m.def(
      "numerics_from_dict",
      [](const NumericsNames& numerics) { return numerics_dict(numerics_from_dict(numerics)); },
      "A call's numerics (option name -> value name) as the plans read them: every option by its "
      "name, the absent ones at their default (an unknown option or value: InvalidArgument).",
      "numerics"_a);

  m.def(
      "auto_variant",
      [](int device_index, int head_dim, int seq_q, int seq_kv, bool causal) {
        AttentionProblem problem;
        problem.head_dim = head_dim;
        problem.seq_q = seq_q;
        problem.seq_kv = seq_kv;
        problem.causal = causal;
        CUdevice device = 0;
        INTFA_DRIVER(cuDeviceGet, &device, device_index);
        const AutoVariant choice = auto_variant(problem, device);
        return py::make_tuple(option_name(choice.variant), choice.reason);
      },
      "intfa::auto_variant: the variant of variant=\"auto\" for a problem on CUDA device "
      "`device_index`, as (name, reason).",
      py::kw_only(), "device_index"_a, "head_dim"_a, "seq_q"_a, "seq_kv"_a, "causal"_a);
  m.def("v_padded_seq", &v_padded_seq, "seq_kv"_a);
  m.def(
      "v_scale_count",
      [](const std::string& granularity, int batch, int heads_kv, int seq_kv, int head_dim) {
        return v_scale_count(parse_v_granularity(granularity), batch, heads_kv, seq_kv, head_dim);
      },
      "v_granularity"_a, "batch"_a, "heads_kv"_a, "seq_kv"_a, "head_dim"_a);

  m.def(
      "validate_problem",
      [](int batch, int heads_q, int heads_kv, int seq_q, int seq_kv, int head_dim, bool causal,
         const std::string& variant) {
        // "auto" validates as either variant would (the problem rules do not depend on it).
        attention::validate_problem(make_problem(batch, heads_q, heads_kv, seq_q, seq_kv, head_dim,
                                                 causal,
                                                 variant == "auto" ? "full_int8" : variant));
      },
      "The problem checks attention_forward makes before anything else (no GPU needed).",
      py::kw_only(), "batch"_a, "heads_q"_a, "heads_kv"_a, "seq_q"_a, "seq_kv"_a, "head_dim"_a,
      "causal"_a, "variant"_a);

  py::class_<AttentionPlan>(m, "AttentionPlan",
                            "One intfa.attention signature: quantize and attend in one call.")
      .def(py::init([](int batch, int heads_q, int heads_kv, int seq_q, int seq_kv, int head_dim,
                       bool causal, const std::string& variant, const std::string& dtype,
                       const std::array<std::int64_t, 4>& q_strides,
                       const std::array<std::int64_t, 4>& k_strides,
                       const std::array<std::int64_t, 4>& v_strides,
                       const std::array<std::int64_t, 4>& out_strides, double softmax_scale,
                       const NumericsNames& numerics, bool smooth_k, int total_q, int total_kv,
                       const std::string& rotate) {
             AttentionOptions options;
             options.softmax_scale = softmax_scale;
             options.numerics = numerics_from_dict(numerics);
             options.smooth_k = smooth_k;
             options.rotate_qk = parse_rotation(rotate);
             return AttentionPlan(
                 make_problem(batch, heads_q, heads_kv, seq_q, seq_kv, head_dim, causal, variant),
                 dtype, q_strides, k_strides, v_strides, out_strides, options, total_q, total_kv);
           }),
           py::kw_only(), "batch"_a, "heads_q"_a, "heads_kv"_a, "seq_q"_a, "seq_kv"_a, "head_dim"_a,
           "causal"_a, "variant"_a, "dtype"_a, "q_strides"_a, "k_strides"_a, "v_strides"_a,
           "out_strides"_a, "softmax_scale"_a, "numerics"_a, "smooth_k"_a, "total_q"_a = 0,
           "total_kv"_a = 0, "rotate"_a = option_name(AttentionOptions{}.rotate_qk))
      .def_property_readonly("workspace_bytes", &AttentionPlan::workspace_bytes)
      .def_property_readonly(
          "numerics", [](const AttentionPlan& plan) { return numerics_dict(plan.numerics()); },
          "The numerics the plan runs with, every option by name.")
      .def("run", &AttentionPlan::run,
           "Quantizes q, k (and v) into `workspace` and attends into `out` (and `lse`, 0 for "
           "none) on `stream`: intfa::attention_forward_16bit. Addresses as ints; the offsets 0 "
           "unless the plan has totals (packed sequences).",
           "q"_a, "k"_a, "v"_a, "out"_a, "lse"_a, "workspace"_a, "stream"_a, "cu_seqlens_q"_a = 0,
           "cu_seqlens_kv"_a = 0);

  py::class_<Int8AttentionPlan>(m, "Int8AttentionPlan",
                                "One intfa.attention_int8 signature, launched by addresses "
                                "(K's scales per token, as quantize writes them).")
      .def(py::init([](int batch, int heads_q, int heads_kv, int seq_q, int seq_kv, int head_dim,
                       bool causal, const std::string& variant, const std::string& v_dtype,
                       const std::string& out_dtype, const std::array<std::int64_t, 4>& q_strides,
                       const std::array<std::int64_t, 4>& k_strides,
                       const std::array<std::int64_t, 4>& v_strides,
                       const std::array<std::int64_t, 4>& out_strides, double softmax_scale,
                       const NumericsNames& numerics,
                       const std::optional<std::array<int, 4>>& config) {
             AttentionOptions options;
             options.softmax_scale = softmax_scale;
             options.numerics = numerics_from_dict(numerics);
             if (config) {
               options.config = KernelConfig{(*config)[0], (*config)[1], (*config)[2],
                                             (*config)[3],
                                             path_for_config((*config)[0], (*config)[2])};
             }
             return Int8AttentionPlan(
                 make_problem(batch, heads_q, heads_kv, seq_q, seq_kv, head_dim, causal, variant),
                 v_dtype, out_dtype, q_strides, k_strides, v_strides, out_strides, options);
           }),
           py::kw_only(), "batch"_a, "heads_q"_a, "heads_kv"_a, "seq_q"_a, "seq_kv"_a, "head_dim"_a,
           "causal"_a, "variant"_a, "v_dtype"_a, "out_dtype"_a, "q_strides"_a, "k_strides"_a,
           "v_strides"_a, "out_strides"_a, "softmax_scale"_a, "numerics"_a, "config"_a)
      .def_property_readonly(
          "numerics", [](const Int8AttentionPlan& plan) { return numerics_dict(plan.numerics()); },
          "The numerics the plan runs with, every option by name.")
      .def("run", &Int8AttentionPlan::run,
           "intfa::attention_forward on `stream` (addresses as ints; lse, v_scale and "
           "q_dot_k_mean 0 for none).",
           "q"_a, "k"_a, "v"_a, "q_scale"_a, "k_scale"_a, "v_scale"_a, "out"_a, "lse"_a, "stream"_a,
           "q_dot_k_mean"_a = 0);

  m.def(
      "use_packaged_kernels",
      [](const std::string& directory) { launch::KernelRuntime::use_packaged_kernels(directory); },
      "The kernels the package ships (launch::KernelRuntime::use_packaged_kernels).",
      "directory"_a);

  m.def(
      "quantize_qk",
      [](const std::array<int, 4>& shape, std::uintptr_t input, const std::string& input_dtype,
         const std::array<std::int64_t, 4>& input_strides, std::uintptr_t output,
         const std::array<std::int64_t, 4>& output_strides, std::uintptr_t scales,
         std::uintptr_t smooth_k_channel_mean, std::uintptr_t stream, std::uintptr_t k_channel_mean,
         int k_channel_mean_heads, std::uintptr_t q_dot_k_mean, const std::string& rotate,
         std::uintptr_t smooth_k_given_mean, std::uintptr_t rotated_heads,
         std::uintptr_t k_rotated_heads) {
        const TensorShape logical{shape[0], shape[1], shape[2], shape[3]};
        const TensorView in = make_view(input, input_dtype, input_strides);
        const TensorView out = make_view(output, "i8", output_strides);
        QuantizeOptions options;
        options.smooth_k_channel_mean = static_cast<float*>(pointer(smooth_k_channel_mean));
        options.k_channel_mean = static_cast<const float*>(pointer(k_channel_mean));
        options.k_channel_mean_heads = k_channel_mean_heads;
        options.q_dot_k_mean = static_cast<float*>(pointer(q_dot_k_mean));
        options.rotate = parse_rotation(rotate);
        options.smooth_k_given_mean = static_cast<const float*>(pointer(smooth_k_given_mean));
        options.rotated_heads = static_cast<int*>(pointer(rotated_heads));
        options.k_rotated_heads = static_cast<const int*>(pointer(k_rotated_heads));
        py::gil_scoped_release unlocked;  // the first call of a shape compiles its kernel
        quantize_qk(logical, in, out, static_cast<float*>(pointer(scales)), as_stream(stream),
                    options);
      },
      "smooth_k_channel_mean: 0, or [batch][heads][head_dim] floats that receive K's channel "
      "means, subtracted before quantizing. Q of a smoothed K: k_channel_mean (K's means, "
      "k_channel_mean_heads heads) and q_dot_k_mean ([batch][heads][seq] floats that receive "
      "q . mean per row, the LSE term). rotate: the rotation of incoherent processing (Q and K "
      "alike), \"off\", \"on\" or \"auto\" (per head: K writes its decisions into "
      "rotated_heads, [batch][heads] int32, or reads them as Q does from k_rotated_heads). "
      "smooth_k_given_mean: K smoothed by these means, given instead of computed "
      "(smooth_k_channel_mean then 0).",
      py::kw_only(), "shape"_a, "input"_a, "input_dtype"_a, "input_strides"_a, "output"_a,
      "output_strides"_a, "scales"_a, "smooth_k_channel_mean"_a, "stream"_a, "k_channel_mean"_a = 0,
      "k_channel_mean_heads"_a = 0, "q_dot_k_mean"_a = 0, "rotate"_a = "off",
      "smooth_k_given_mean"_a = 0, "rotated_heads"_a = 0, "k_rotated_heads"_a = 0);

  m.def(
      "k_channel_means",
      [](const std::array<int, 4>& shape, std::uintptr_t input, const std::string& input_dtype,
         const std::array<std::int64_t, 4>& input_strides, std::uintptr_t means,
         std::uintptr_t stream, std::uintptr_t rotated_heads) {
        const TensorShape logical{shape[0], shape[1], shape[2], shape[3]};
        const TensorView in = make_view(input, input_dtype, input_strides);
        py::gil_scoped_release unlocked;
        k_channel_means(logical, in, static_cast<float*>(pointer(means)), as_stream(stream),
                        static_cast<int*>(pointer(rotated_heads)));
      },
      "intfa::k_channel_means: K smoothing's [batch][heads][head_dim] means of `input` (0: not "
      "wanted), and automatic rotation's [batch][heads] int32 decisions into rotated_heads (0: "
      "none), of K less those means (as given without them).",
      py::kw_only(), "shape"_a, "input"_a, "input_dtype"_a, "input_strides"_a, "means"_a,
      "stream"_a, "rotated_heads"_a = 0);
  m.def("k_channel_mean_sample_rows", &k_channel_mean_sample_rows,
        "The rows of a sequence of `seq` keys that K smoothing's means are taken over, in order.",
        "seq"_a);

  m.def(
      "quantize_v",
      [](const std::array<int, 4>& shape, std::uintptr_t input, const std::string& input_dtype,
         const std::array<std::int64_t, 4>& input_strides, std::uintptr_t output,
         std::uintptr_t scales, const std::string& v_granularity, std::uintptr_t stream,
         bool scales_given) {
        const TensorShape logical{shape[0], shape[1], shape[2], shape[3]};
        const TensorView in = make_view(input, input_dtype, input_strides);
        const VScaleGranularity granularity = parse_v_granularity(v_granularity);
        py::gil_scoped_release unlocked;
        float* scale_floats = static_cast<float*>(pointer(scales));
        if (scales_given) {
          quantize_v_with_scales(logical, in, pointer(output), scale_floats, granularity,
                                 as_stream(stream));
        } else {
          quantize_v(logical, in, pointer(output), scale_floats, granularity, as_stream(stream));
        }
      },
      "intfa::quantize_v; scales_given: intfa::quantize_v_with_scales (per-tensor or per-channel "
      "scales read, not computed).",
      py::kw_only(), "shape"_a, "input"_a, "input_dtype"_a, "input_strides"_a, "output"_a,
      "scales"_a, "v_granularity"_a, "stream"_a, "scales_given"_a = false);

  m.def(
      "v_scales",
      [](const std::array<int, 4>& shape, std::uintptr_t input, const std::string& input_dtype,
         const std::array<std::int64_t, 4>& input_strides, std::uintptr_t scales,
         const std::string& v_granularity, std::uintptr_t stream) {
        const TensorShape logical{shape[0], shape[1], shape[2], shape[3]};
        const TensorView in = make_view(input, input_dtype, input_strides);
        const VScaleGranularity granularity = parse_v_granularity(v_granularity);
        py::gil_scoped_release unlocked;
        v_scales(logical, in, static_cast<float*>(pointer(scales)), granularity, as_stream(stream));
      },
      "intfa::v_scales: quantize_v's per-tensor or per-channel scales of `input` alone.",
      py::kw_only(), "shape"_a, "input"_a, "input_dtype"_a, "input_strides"_a, "scales"_a,
      "v_granularity"_a, "stream"_a);

  m.def(
      "quantize_v_varlen",
      [](const std::array<int, 4>& shape, std::uintptr_t input, const std::string& input_dtype,
         const std::array<std::int64_t, 4>& input_strides, int total_kv,
         std::uintptr_t cu_seqlens_kv, std::uintptr_t output, std::uintptr_t scales,
         const std::string& v_granularity, std::uintptr_t stream) {
        const TensorShape logical{shape[0], shape[1], shape[2], shape[3]};
        const TensorView in = make_view(input, input_dtype, input_strides);
        const VScaleGranularity granularity = parse_v_granularity(v_granularity);
        py::gil_scoped_release unlocked;
        quantize_v_varlen(logical, in, total_kv, static_cast<const int*>(pointer(cu_seqlens_kv)),
                          pointer(output), static_cast<float*>(pointer(scales)), granularity,
                          as_stream(stream));
      },
      "shape: {sequences, heads_kv, longest sequence, head_dim}; input: packed "
      "[1, heads_kv, total_kv, head_dim].",
      py::kw_only(), "shape"_a, "input"_a, "input_dtype"_a, "input_strides"_a, "total_kv"_a,
      "cu_seqlens_kv"_a, "output"_a, "scales"_a, "v_granularity"_a, "stream"_a);

  m.def(
      "attention_forward",
      [](int batch, int heads_q, int heads_kv, int seq_q, int seq_kv, int head_dim, bool causal,
         const std::string& variant, std::uintptr_t q, const std::array<std::int64_t, 4>& q_strides,
         std::uintptr_t k, const std::array<std::int64_t, 4>& k_strides, std::uintptr_t v,
         const std::string& v_dtype, const std::array<std::int64_t, 4>& v_strides,
         std::uintptr_t q_scale, std::uintptr_t k_scale, std::uintptr_t v_scale, std::uintptr_t out,
         const std::string& out_dtype, const std::array<std::int64_t, 4>& out_strides,
         std::uintptr_t lse, double softmax_scale, const NumericsNames& numerics,
         const std::optional<std::array<int, 4>>& config, std::uintptr_t stream,
         std::uintptr_t cu_seqlens_q, std::uintptr_t cu_seqlens_kv, int total_q, int total_kv,
         std::uintptr_t q_dot_k_mean) {
        const AttentionProblem problem =
            make_problem(batch, heads_q, heads_kv, seq_q, seq_kv, head_dim, causal, variant);
        AttentionTensors tensors;
        tensors.q = make_view(q, "i8", q_strides);
        tensors.k = make_view(k, "i8", k_strides);
        tensors.v = make_view(v, v_dtype, v_strides);
        tensors.q_scale = static_cast<const float*>(pointer(q_scale));
        tensors.k_scale = static_cast<const float*>(pointer(k_scale));
        tensors.v_scale = static_cast<const float*>(pointer(v_scale));
        tensors.out = make_view(out, out_dtype, out_strides);
        tensors.lse = static_cast<float*>(pointer(lse));
        tensors.varlen = VarlenLayout{static_cast<const int*>(pointer(cu_seqlens_q)),
                                      static_cast<const int*>(pointer(cu_seqlens_kv)), total_q,
                                      total_kv};
        tensors.q_dot_k_mean = static_cast<const float*>(pointer(q_dot_k_mean));
        AttentionOptions options;
        options.softmax_scale = softmax_scale;
        options.numerics = numerics_from_dict(numerics);
        if (config)
          options.config = KernelConfig{(*config)[0], (*config)[1], (*config)[2], (*config)[3],
                                        path_for_config((*config)[0], (*config)[2])};
        py::gil_scoped_release unlocked;
        attention_forward(problem, tensors, as_stream(stream), options);
      },
      "Validates, compiles or fetches the kernel, launches it on `stream`. Asynchronous. "
      "Varlen (packed) batches when cu_seqlens_q and cu_seqlens_kv are set (intfa::VarlenLayout). "
      "K's scales per token (k_scale [batch][heads_kv][seq_kv]).",
      py::kw_only(), "batch"_a, "heads_q"_a, "heads_kv"_a, "seq_q"_a, "seq_kv"_a, "head_dim"_a,
      "causal"_a, "variant"_a, "q"_a, "q_strides"_a, "k"_a, "k_strides"_a, "v"_a, "v_dtype"_a,
      "v_strides"_a, "q_scale"_a, "k_scale"_a, "v_scale"_a, "out"_a, "out_dtype"_a, "out_strides"_a,
      "lse"_a, "softmax_scale"_a, "numerics"_a, "config"_a, "stream"_a, "cu_seqlens_q"_a = 0,
      "cu_seqlens_kv"_a = 0, "total_q"_a = 0, "total_kv"_a = 0, "q_dot_k_mean"_a = 0);

  m.def("precompile", &precompile_dict, py::kw_only(), "arch"_a, "head_dims"_a, "variants"_a,
        "dtypes"_a, "causal"_a, "numerics"_a, "smooth_k"_a, "jobs"_a,
        "rotate"_a = option_name(AttentionOptions{}.rotate_qk));

  register_paged(m);
}
