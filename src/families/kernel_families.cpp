// The one switch over KernelFamily: which family's host file gives a spec's instantiation
// (families::instantiation_for) and its text (families::family_fields_text), both declared in
// families/kernel_spec.hpp. Defined here, beside the family host files it dispatches to;
// families::render(spec) reaches it through the library's link, not through a registry filled by
// static initialisers (a static library drops objects nothing references).
#include "families/attention_family.hpp"
#include "families/attention_wgmma_family.hpp"
#include "families/kernel_spec.hpp"
#include "families/paged_family.hpp"
#include "families/quantize_family.hpp"
#include "intfa/errors.hpp"
#include "render/render.hpp"

namespace intfa::families {

render::Instantiation instantiation_for(const KernelSpec& spec) {
  switch (spec.family) {
    case KernelFamily::kQuantizeRows: return quantize::rows_instantiation(spec);
    case KernelFamily::kChannelMean: return quantize::channel_mean_instantiation(spec);
    case KernelFamily::kQuantizeVScale: return quantize::v_scale_instantiation(spec);
    case KernelFamily::kQuantizeV: return quantize::v_instantiation(spec);
    case KernelFamily::kQuantizeKVScale: return quantize::k_v_scale_instantiation(spec);
    case KernelFamily::kQuantizeKV: return quantize::k_v_instantiation(spec);
    case KernelFamily::kAttention: return attention::portable_instantiation(spec);
    case KernelFamily::kAttentionWgmma: return attention::wgmma_instantiation(spec);
    case KernelFamily::kPagedAppend:
    case KernelFamily::kPagedDecode:
    case KernelFamily::kMergeStates: return paged::instantiation(spec);
  }
  throw InternalError("unknown KernelFamily");
}

std::string family_fields_text(const KernelSpec& spec) {
  switch (spec.family) {
    case KernelFamily::kQuantizeRows:
    case KernelFamily::kChannelMean:
    case KernelFamily::kQuantizeVScale:
    case KernelFamily::kQuantizeV:
    case KernelFamily::kQuantizeKVScale:
    case KernelFamily::kQuantizeKV:
      return quantize::fields_text(spec);
    case KernelFamily::kAttention:
    case KernelFamily::kAttentionWgmma:
      return attention::fields_text(spec);
    case KernelFamily::kPagedAppend:
    case KernelFamily::kPagedDecode:
    case KernelFamily::kMergeStates:
      return paged::describe(spec);
  }
  throw InternalError("unknown KernelFamily");
}

}  // namespace intfa::families
