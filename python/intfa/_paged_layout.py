"""The paged KV cache's layout and ahead-of-time compiles: what needs no PyTorch.

``paged_layout`` gives the shapes and dtypes of one layer's cache tensors (the C++ API's
``intfa::PagedKVCache``, templates/decode/README.md); ``precompile_paged`` compiles the family's
kernels into the kernel cache. Bad arguments raise ``InvalidArgument`` naming the Python argument.
"""
from intfa import _intfa
from intfa._checks import as_list, choice, is_int
from intfa._errors import InvalidArgument, invalid_argument

PAGE_SIZES = (16, 32, 64, 128)
HEAD_DIMS = (64, 128, 256)
BITS = (8, 4)
INT4_GROUP = 32  # channels per INT4 scale (kPagedInt4Group)
_INT32_MAX = 2**31 - 1
_ARCHS = tuple(_intfa.target_archs())
_MAX_JOBS = 1024
# The C++ cache members and the Python arguments they come from.
CACHE_ARGUMENTS = {
    "cache.num_pages": "num_pages",
    "cache.page_size": "page_size",
    "cache.heads_kv": "num_kv_heads",
    "cache.head_dim": "head_dim",
    "cache.bits": "bits",
}


def check_count(name, value, lowest=1):
    """An int in [lowest, 2**31 - 1] (not a bool)."""
    if not is_int(value) or not lowest <= value <= _INT32_MAX:
        raise invalid_argument(name, repr(value), f"expected an int in [{lowest}, 2**31 - 1]")
    return value


def renamed(error, names):
    """`error` (an InvalidArgument from C++) naming the Python argument `names` maps its field to;
    unchanged when the field is not there."""
    if error.field not in names:
        return error
    reason = str(error).split(": ", 1)[-1]
    return invalid_argument(names[error.field], error.value, reason)


def cache_bytes(num_pages, page_size, num_kv_heads, head_dim, bits):
    """(data bytes, scale bytes) of one of K and V, checked by the C++ rules."""
    for name, value in (("num_pages", num_pages), ("page_size", page_size),
                        ("num_kv_heads", num_kv_heads), ("head_dim", head_dim), ("bits", bits)):
        check_count(name, value)
    try:
        return _intfa.paged_cache_bytes(num_pages=num_pages, page_size=page_size,
                                        heads_kv=num_kv_heads, head_dim=head_dim, bits=bits)
    except InvalidArgument as error:
        raise renamed(error, CACHE_ARGUMENTS) from None


def paged_layout(num_pages, page_size, num_kv_heads, head_dim, bits=8):
    """Shapes and dtypes of one layer's paged cache, as a dict of name -> (shape, dtype name):
    ``k_data`` and ``v_data`` ``[num_pages, num_kv_heads, page_size, head_dim * bits / 8]`` uint8
    (INT8 values, or INT4 two per byte, element 2i in the low nibble of byte i); ``k_scale`` and
    ``v_scale`` ``[num_pages, num_kv_heads, page_size]`` float32 (INT8: one per token and head) or
    ``[num_pages, num_kv_heads, page_size, head_dim / 32]`` float16 (INT4: one per 32 channels);
    ``k_offset`` ``[num_kv_heads, head_dim]`` float32 (optional K smoothing). page_size 16, 32, 64
    or 128; head_dim 64, 128 or 256; bits 8 or 4."""
    cache_bytes(num_pages, page_size, num_kv_heads, head_dim, bits)
    return layout_shapes(num_pages, page_size, num_kv_heads, head_dim, bits)


def layout_shapes(num_pages, page_size, num_kv_heads, head_dim, bits):
    """paged_layout without the C++ check of the sizes (for a caller that has them checked
    elsewhere: under torch.compile, where Dynamo cannot trace the check's pybind11 call)."""
    pages = (num_pages, num_kv_heads, page_size)
    scale = (pages, "float32") if bits == 8 else (pages + (head_dim // INT4_GROUP,), "float16")
    return {
        "k_data": (pages + (head_dim * bits // 8,), "uint8"),
        "v_data": (pages + (head_dim * bits // 8,), "uint8"),
        "k_scale": scale,
        "v_scale": scale,
        "k_offset": ((num_kv_heads, head_dim), "float32"),
    }


def precompile_paged(head_dims=HEAD_DIMS, bits=BITS, dtypes=("float16",), *, arch=None, jobs=0):
    """Compiles now, into the kernel cache, every kernel of the paged cache for these head dims,
    cache widths and query/K/V dtypes (torch dtypes or names): the append, the decode at the
    heuristic's tile config for 16, 32 and 64 query rows per KV head, the split-KV combine and
    merge_states. ``arch`` as for ``intfa.precompile`` (naming one needs no GPU). Returns a dict:
    ``arch``, ``kernels``, ``compiled_now``, ``already_present``, ``specs``."""
    if not is_int(jobs) or not 0 <= jobs <= _MAX_JOBS:
        raise invalid_argument("jobs", repr(jobs), f"expected an int in [0, {_MAX_JOBS}]")
    if arch is not None and arch != "":
        choice("arch", arch, _ARCHS)
    head_dims, bits, dtypes = as_list("head_dims", head_dims), as_list("bits", bits), \
        as_list("dtypes", dtypes)
    for name, values in (("head_dims", head_dims), ("bits", bits), ("dtypes", dtypes)):
        if not values:
            raise invalid_argument(name, "[]", "expected one value or more")
    for head_dim in head_dims:
        if not is_int(head_dim) or head_dim not in HEAD_DIMS:
            raise invalid_argument("head_dims", repr(head_dim),
                                   "supported head dims are 64, 128 and 256")
    for width in bits:
        if not is_int(width) or width not in BITS:
            raise invalid_argument("bits", repr(width), "expected 8 or 4")
    names = []
    for dtype in dtypes:
        name = str(dtype).replace("torch.", "")
        table = {"float16": "f16", "half": "f16", "f16": "f16", "bfloat16": "bf16", "bf16": "bf16"}
        if name not in table:
            raise invalid_argument("dtypes", dtype, "expected torch.float16 or torch.bfloat16")
        names.append(table[name])
    return _intfa.precompile_paged(arch="" if arch is None else arch, head_dims=head_dims,
                                   bits=bits, dtypes=names, jobs=jobs)
