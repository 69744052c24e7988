"""intfa in the clients people run attention through, each a submodule imported on use:

* ``intfa.integrations.transformers.register()``: ``attn_implementation="intfa"`` for
  transformers models (prefill on intfa; masks other than causal, decode steps and training on
  transformers' own SDPA path).
* ``intfa.integrations.diffusers``: a diffusers attention backend function (``backend()``), and
  ``register()`` to install it in place of one of diffusers' backends ("native" by default).
* ``intfa.integrations.transformers_paged.register()``: ``attn_implementation="paged|intfa"``
  for transformers' continuous batching (``generate_batch``): prefill and decode on intfa's
  paged INT8/INT4 cache, kept beside transformers' own.
* ``intfa.integrations.vllm``: a vLLM attention backend (vLLM 0.11.0's V1 interface, without
  importing vLLM) over intfa's paged INT8/INT4 cache: paged_append, then paged_decode or
  paged_prefill for each step's batch.
* ``intfa.integrations.sdpa.patch_sdpa()`` (also ``intfa.patch_sdpa``): replaces
  ``torch.nn.functional.scaled_dot_product_attention``, ComfyUI-style, as a context manager or
  until ``undo()``.

Each takes intfa.attention's numerics options (``variant``, ``smooth_k``, ...), a ``fallback``
policy (None: the process-wide one) and ``decode_seq_q``: calls with at most that many queries
against a longer K/V run SDPA (default 16; 0: intfa serves them too) until intfa's paged KV-cache
kernels serve decode. Each keeps its client's semantics: causal masks aligned as the client's
(SDPA's top-left, or transformers' cache positions), GQA, the softmax scale; what intfa does not
serve runs the client's own SDPA call, counted in ``intfa.fallback_stats()``.
"""
