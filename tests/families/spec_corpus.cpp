// intfa_spec_corpus: writes one line per kernel spec that intfa can list (every attention call's
// kernels over archs, dtypes, head dims, variants, Q.K widths, numerics, transforms and every
// candidate tile config; the paged cache's kernels; each family's builders over their fields):
// its to_string, its JSON, its JSON read back and written again, the hash of its rendered unit,
// its kernel id, its cache key and the errors its checks give. Written to compare two builds:
// a change that must not alter kernels (a refactor of the spec types) leaves the output
// byte-identical. Usage: intfa_spec_corpus > corpus.txt
#include <cstdint>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "api/kernel_lists.hpp"
#include "cache/cache_key.hpp"
#include "families/attention_family.hpp"
#include "families/paged_family.hpp"
#include "families/quantize_family.hpp"
#include "intfa/errors.hpp"
#include "nvrtc/compiler.hpp"
#include "render/template_set.hpp"
#include "spec/attention_spec.hpp"

namespace intfa {
namespace {

// The lines already written (the lists repeat many kernels).
std::set<std::string> g_seen;
std::set<std::string> g_dumped;  // to_string and JSON of each spec dumped
std::size_t g_specs = 0;

void emit(const std::string& line) {
  if (g_seen.insert(line).second) std::printf("%s\n", line.c_str());
}

std::string hex64(std::uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

// FNV-1a over a string: a short stand-in for the bytes it covers.
std::uint64_t fnv(const std::string& text, std::uint64_t hash = 1469598103934665603ull) {
  for (unsigned char c : text) hash = (hash ^ c) * 1099511628211ull;
  return hash;
}

template <typename Spec>
void dump(const Spec& spec) {
  const std::string text = spec.to_string();
  const std::string json = spec.to_json().dump();
  std::string line = text + "\t" + json;
  if (!g_dumped.insert(line).second) return;
  try {
    const auto read_back = std::decay_t<decltype(spec)>::from_json(json::parse(json));
    line += read_back == spec ? "\tround-trip=equal" : "\tround-trip=DIFFERENT";
    line += read_back.to_json().dump() == json ? "" : "\tjson-rewrite=DIFFERENT";
  } catch (const Error& error) {
    line += std::string("\tfrom_json-error=") + error.what();
  }
  const render::KernelId id = kernel_id(spec);
  line += "\tid=";
  for (std::uint64_t word : id.words) line += hex64(word);
  try {
    const render::KernelSource source = families::kernel_source(spec);
    std::uint64_t unit_hash = fnv(source.unit.file_name);
    unit_hash = fnv(source.unit.source, unit_hash);
    unit_hash = fnv(source.unit.name_expression, unit_hash);
    for (const std::string& header : source.unit.headers) unit_hash = fnv(header, unit_hash);
    line += "\tunit=" + hex64(unit_hash) + "\tarch=" + device::arch_name(source.arch) +
            "\tsource-text=" + (source.text == text ? "to_string" : source.text) +
            "\tsource-json=" + (source.json.dump() == json ? "to_json" : source.json.dump());
    const auto options = nvrtc::compile_options(source.arch);
    const cache::CacheKey key = cache::make_key(
        {source.unit, render::TemplateSet::active(), options, nvrtc::Version{13, 0}, source.arch});
    line += "\tkey=" + key.hex();
  } catch (const Error& error) {
    line += std::string("\trender-error=") + error.what();
  }
  ++g_specs;
  emit(line);
}

template <typename Specs>
void dump_all(const Specs& specs) {
  for (const auto& spec : specs) dump(spec);
}

const device::Arch kArchs[] = {device::Arch::kSm80, device::Arch::kSm86, device::Arch::kSm89,
                               device::Arch::kSm90a};
const kernels::ElementType kTypes[] = {kernels::ElementType::kF16, kernels::ElementType::kBF16,
                                       kernels::ElementType::kF32};

// Every attention call's kernels, at every candidate config (errors of those that do not fit
// included) and at the heuristic's.
void attention_calls() {
  for (device::Arch arch : kArchs)
    for (DType dtype : {DType::kF16, DType::kBF16})
      for (int head_dim : {64, 128, 256})
        for (Variant variant : {Variant::kFullInt8, Variant::kHalfInt8})
          for (int bits : {8, 4})
            for (bool causal : {false, true})
              for (PEncoding p : {PEncoding::kSigned127, PEncoding::kUnsigned255})
                for (PScaleReference p_scale :
                     {PScaleReference::kRunningMax, PScaleReference::kTileMax})
                  for (VScaleGranularity v :
                       {VScaleGranularity::kPerTensor, VScaleGranularity::kPerChannel,
                        VScaleGranularity::kPerBlock})
                    for (KScaleGranularity k :
                         {KScaleGranularity::kPerToken, KScaleGranularity::kPerBlock})
                      for (int transforms = 0; transforms < 6; ++transforms)
                        for (bool q_in_kernel : {false, true}) {
                          if (bits == 4 && k == KScaleGranularity::kPerBlock) continue;
                          AttentionProblem problem;
                          problem.head_dim = head_dim;
                          problem.variant = variant;
                          problem.qk_bits = bits;
                          problem.causal = causal;
                          AttentionOptions options;
                          options.numerics.p_encoding = p;
                          options.numerics.p_scale = p_scale;
                          options.numerics.v_granularity = v;
                          options.numerics.k_granularity = k;
                          options.smooth_k = (transforms & 1) != 0;
                          options.rotate_qk = static_cast<QKRotation>(transforms / 2);
                          attention::SpecRequest request =
                              attention::request_for(arch, problem, options, dtype);
                          if (q_in_kernel) {
                            request = attention::with_q_in_kernel(request, options, dtype);
                          }
                          std::vector<KernelConfig> configs = attention::candidate_configs(request);
                          for (const KernelConfig& config : attention::heuristic_configs(request)) {
                            configs.push_back(config);
                          }
                          for (const KernelConfig& config : configs) {
                            try {
                              dump_all(
                                  aot::attention_call_specs(request, dtype, options, {config}));
                            } catch (const Error& error) {
                              emit("call-error\t" + config.to_string() + "\t" + error.what());
                            }
                            const auto spec = attention::make_spec(request, config);
                            dump(spec);
                            try {
                              attention::validate_config(spec, 232448);
                              emit("valid\t" + spec.to_string() + "\t" +
                                   std::to_string(attention::shared_bytes(spec)));
                            } catch (const Error& error) {
                              emit("invalid\t" + spec.to_string() + "\t" + error.what());
                            }
                          }
                        }
}

void paged_kernels() {
  for (device::Arch arch : kArchs)
    for (DType dtype : {DType::kF16, DType::kBF16})
      for (int head_dim : {64, 128, 256})
        for (int bits : {8, 4}) {
          try {
            dump_all(aot::paged_specs(arch, head_dim, bits, dtype));
          } catch (const Error& error) {
            emit("paged-error\t" + std::string(error.what()));
          }
          for (kernels::ElementType query : kTypes)
            for (kernels::ElementType output : kTypes) {
              dump(paged::append_spec(arch, head_dim, bits, query));
              dump(paged::merge_spec(arch, head_dim, query, output));
              for (int rows : {8, 16, 32, 64, 12})
                for (int tokens : {64, 128, 96})
                  for (int stages : {1, 2, 3, 4}) {
                    const auto decode = paged::decode_spec(arch, head_dim, bits, query, output,
                                                           PagedDecodeConfig{rows, tokens, stages});
                    dump(decode);
                    try {
                      paged::check_decode_config(decode, 232448);
                      emit("decode-valid\t" + decode.to_string());
                    } catch (const Error& error) {
                      emit("decode-invalid\t" + decode.to_string() + "\t" + error.what());
                    }
                  }
            }
        }
}

void quantize_kernels() {
  for (device::Arch arch : kArchs)
    for (int head_dim : {64, 128, 256, 96})
      for (kernels::ElementType input : kTypes)
        for (int bits : {8, 4}) {
          dump(quantize::channel_mean_spec(arch, head_dim, input));
          for (VScaleGranularity v : {VScaleGranularity::kPerTensor, VScaleGranularity::kPerChannel,
                                      VScaleGranularity::kPerBlock}) {
            dump(quantize::v_spec(arch, head_dim, input, v));
            dump(quantize::v_scale_spec(arch, head_dim, input, v));
            for (int flags = 0; flags < 24; ++flags) {
              quantize::RowTransforms transforms;
              transforms.smooth_k = (flags & 1) != 0;
              transforms.q_dot_k_mean = (flags & 2) != 0;
              transforms.k_granularity =
                  (flags & 4) != 0 ? KScaleGranularity::kPerBlock : KScaleGranularity::kPerToken;
              transforms.rotate = static_cast<QKRotation>(flags / 8);
              dump(quantize::rows_spec(arch, head_dim, input, bits, transforms));
              dump(quantize::k_v_scale_spec(arch, head_dim, input, bits, transforms, v));
              dump(quantize::k_v_spec(arch, head_dim, input, bits, transforms, v));
            }
          }
        }
}

}  // namespace
}  // namespace intfa

int main() {
  intfa::quantize_kernels();
  intfa::paged_kernels();
  intfa::attention_calls();
  std::fprintf(stderr, "%zu specs dumped, %zu distinct lines\n", intfa::g_specs,
               intfa::g_seen.size());
  return 0;
}
