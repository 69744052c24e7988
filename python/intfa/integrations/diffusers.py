"""intfa as a diffusers attention backend.

diffusers' models call ``dispatch_attention_fn``, which calls the active backend's function with
[B, N, H, D] tensors and ``attn_mask``, ``dropout_p``, ``is_causal``, ``scale``, ``enable_gqa``,
``return_lse``, ``_parallel_config`` (diffusers/models/attention_dispatch.py). ``backend()``
makes such a function on intfa. diffusers keeps its backends in an enumeration, so a new name
cannot be added; ``register()`` installs the function in place of one of them instead:

    from intfa.integrations import diffusers as intfa_diffusers
    intfa_diffusers.register()                      # the "native" backend (diffusers' default)
    image = pipeline(prompt).images[0]
    # or, for one model: intfa_diffusers.register("_native_flash");
    #                    pipeline.transformer.set_attention_backend("_native_flash")

The function keeps the native backend's semantics: SDPA's top-left causal mask, GQA, the scale,
a [B, N_kv] mask read as [B, 1, 1, N_kv]. What intfa does not serve (masks, dropout, FP32, ...)
runs torch's SDPA the way the native backend calls it. ``return_lse`` returns the LSE as
intfa.attention does: float32 [B, H, N], natural log.

Context-parallel calls (``_parallel_config`` with a ``ContextParallelConfig`` over more than one
rank) run ``intfa.distributed`` over diffusers' own meshes: ``ulysses_attention`` over the
"ulysses" mesh, ``ring_attention`` over the "ring" one, ``usp_attention`` when both degrees are
above one, on the contiguous sequence shards diffusers gives each rank (the ring quantizes each
shard as one call over the whole sequence would, and INT8 K/V travel). What they do not serve
(masks, dropout, causal calls, whose zig-zag shards diffusers does not cut, the "anything"
variants' uneven shards, numerics options other than variant, smooth_k, rotate and v_granularity)
runs the replaced backend's function, counted as "context_parallel".
"""
import inspect

import torch

from intfa import _fallback, _sdpa, _torch
from intfa import distributed as _distributed
from intfa._errors import InvalidArgument
from intfa.integrations import _client

DEFAULT_BACKEND = "native"
# The options intfa.distributed takes (the others have no context-parallel form).
CONTEXT_PARALLEL_OPTIONS = ("variant", "smooth_k", "rotate", "v_granularity")


def _context_parallel_ranks(parallel_config):
    """The ContextParallelConfig of a call's _parallel_config when it spans more than one rank;
    else None (tensor parallelism only, or one rank: the call is a local one)."""
    config = getattr(parallel_config, "context_parallel_config", None)
    if config is None or config.ring_degree * config.ulysses_degree <= 1:
        return None
    return config


def _context_parallel(settings, query, key, value, attn_mask, dropout_p, is_causal, scale,
                      return_lse, config):
    """intfa.distributed over diffusers' meshes, or _torch.Unserved (counted)."""
    if attn_mask is not None:
        return _client.unserved("attn_mask", settings)
    if dropout_p:
        return _client.unserved("dropout", settings)
    unequal_shards = getattr(config, "ring_anything", False) or getattr(
        config, "ulysses_anything", False)
    other_options = [name for name, value in settings.options.items()
                     if value is not None and name not in CONTEXT_PARALLEL_OPTIONS]
    if is_causal or unequal_shards or other_options:
        return _client.unserved("context_parallel", settings)
    tensors = (query, key, value)
    if any(x.dtype not in _distributed.FLOAT_DTYPES for x in tensors):
        return _client.unserved("dtype", settings)
    # The ring quantizes each shard with the kernels' own head dims (no padding to them, as
    # intfa.attention does for the others).
    if any(x.shape[-1] not in _distributed.HEAD_DIMS for x in tensors):
        return _client.unserved("head_dim", settings)
    if torch.is_grad_enabled() and any(x.requires_grad for x in tensors):
        return _client.unserved("autograd", settings)
    if not all(x.is_cuda for x in tensors):
        return _client.unserved("device", settings)
    options = {name: value for name, value in settings.options.items()
               if name in CONTEXT_PARALLEL_OPTIONS}
    arguments = dict(layout="NHD", sm_scale=scale, return_lse=return_lse, **options)
    if config.ulysses_degree > 1 and config.ring_degree > 1:
        return _distributed.usp_attention(query, key, value, config._ulysses_mesh.get_group(),
                                          config._ring_mesh.get_group(), **arguments)
    if config.ulysses_degree > 1:
        return _distributed.ulysses_attention(query, key, value,
                                              config._ulysses_mesh.get_group(), **arguments)
    return _distributed.ring_attention(query, key, value, config._ring_mesh.get_group(),
                                       **arguments)


def backend(*, fallback=None, decode_seq_q=_client.DEFAULT_DECODE_SEQ_Q, context_parallel=None,
            **options):
    """A diffusers backend function running intfa.attention with these options (``variant``,
    ``smooth_k``, ...; checked now). ``fallback``: the policy for what intfa does not serve (None:
    the process-wide one); ``decode_seq_q``: calls with at most this many queries against a
    longer K/V run SDPA (0: none do); ``context_parallel``: the function that runs the
    context-parallel calls intfa does not serve (None: such calls raise Unsupported)."""
    settings = _client.Settings(fallback, decode_seq_q, **options)

    def intfa_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                        scale=None, enable_gqa=False, return_lse=False, _parallel_config=None):
        config = _context_parallel_ranks(_parallel_config)
        if config is not None:
            result = _context_parallel(settings, query, key, value, attn_mask, dropout_p,
                                       bool(is_causal), scale, return_lse, config)
            if type(result) is not _torch.Unserved:
                return result
            if context_parallel is None:
                raise _fallback.unsupported("context_parallel", "no backend to run it")
            return context_parallel(query=query, key=key, value=value, attn_mask=attn_mask,
                                    dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                                    enable_gqa=enable_gqa, return_lse=return_lse,
                                    _parallel_config=_parallel_config)
        if (attn_mask is not None and attn_mask.dim() == 2 and attn_mask.shape[0] == query.shape[0]
                and attn_mask.shape[1] == key.shape[1]):
            attn_mask = attn_mask[:, None, None, :]  # [B, N_kv]: a key padding mask
        result = _client.attend(settings, query, key, value, attn_mask, dropout_p,
                                bool(is_causal), scale, "NHD", top_left_causal=True,
                                return_lse=return_lse)
        if type(result) is not _torch.Unserved:
            return result
        return _sdpa.attention(query, key, value, attn_mask, dropout_p, bool(is_causal), scale,
                               "NHD", return_lse, None, top_left=True)

    return intfa_attention


class Registration:
    """intfa installed in place of one diffusers backend; a context manager (undone on exit), or
    ``undo()``. ``function`` is intfa's, ``previous`` the backend function it replaced."""

    def __init__(self, name, settings_arguments):
        from diffusers.models import attention_dispatch
        self._registry = attention_dispatch._AttentionBackendRegistry
        try:
            self.name = attention_dispatch.AttentionBackendName(name)
        except ValueError:
            known = ", ".join(repr(member.value)
                              for member in attention_dispatch.AttentionBackendName)
            raise InvalidArgument(f"invalid name = '{name}': expected one of diffusers' "
                                  f"backends ({known})", field="name", value=str(name)) from None
        self.previous = self._registry._backends[self.name]
        self._previous_arguments = self._registry._supported_arg_names[self.name]
        previous, accepted = self.previous, self._previous_arguments

        def context_parallel(**arguments):  # as the dispatcher calls it: its arguments only
            return previous(**{key: value for key, value in arguments.items() if key in accepted})

        self.function = backend(context_parallel=context_parallel, **settings_arguments)
        self._registry._backends[self.name] = self.function
        # The dispatcher passes a backend only the arguments its signature names.
        self._registry._supported_arg_names[self.name] = set(
            inspect.signature(self.function).parameters)
        self.active = True

    def undo(self):
        if self.active and self._registry._backends[self.name] is self.function:
            self._registry._backends[self.name] = self.previous
            self._registry._supported_arg_names[self.name] = self._previous_arguments
        self.active = False

    def __enter__(self):
        return self

    def __exit__(self, *exception):
        self.undo()
        return False


def register(name=DEFAULT_BACKEND, *, fallback=None, decode_seq_q=_client.DEFAULT_DECODE_SEQ_Q,
             **options):
    """Installs ``backend(...)`` with these options in place of diffusers' backend `name`
    ("native": diffusers' default, used unless a model or DIFFUSERS_ATTN_BACKEND picks another);
    the replaced function still runs the context-parallel calls intfa does not serve. Returns the
    Registration."""
    return Registration(name, dict(fallback=fallback, decode_seq_q=decode_seq_q, **options))
