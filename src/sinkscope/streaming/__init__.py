"""Streaming language models: KV-cache policies, exact fast perplexity, latency, sink pretraining.

Usable with any Hugging Face causal LM (RoPE or not), outside the pipeline:

    from sinkscope.streaming import SinkCache, StreamingLM, generate, nll_fast, parse
    nll = nll_fast(model, ids, parse("4+1020"))      # per-token NLL, StreamingLLM cache
    lm = StreamingLM(model, parse("4+1020"))         # token-by-token, bounded memory
    generate(model, ids, SinkCache(model, parse("4+1020")))  # transformers' generate, any prompt
"""

from importlib import import_module

# name -> module; imported on first use, so that the workflow's planning (which reads
# `policies.PARTS`) does not import torch
_EXPORTS = {
    "Policy": "policies",
    "SinkCache": "sink_cache",
    "StreamingLM": "cache",
    "generate": "generation",
    "nll_fast": "evaluate",
    "nll_fast_many": "evaluate",
    "nll_loop": "evaluate",
    "nll_recompute": "evaluate",
    "parse": "policies",
}
__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
