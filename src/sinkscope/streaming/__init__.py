"""Streaming language models: KV-cache policies, exact fast perplexity, latency, sink pretraining.

Usable with any Hugging Face causal LM (RoPE or not), outside the pipeline:

    from sinkscope.streaming import StreamingLM, nll_fast, parse
    nll = nll_fast(model, ids, parse("4+1020"))      # per-token NLL, StreamingLLM cache
    lm = StreamingLM(model, parse("4+1020"))         # token-by-token, bounded memory
"""

from .cache import StreamingLM
from .evaluate import nll_fast, nll_fast_many, nll_loop, nll_recompute
from .policies import Policy, parse

__all__ = [
    "Policy",
    "StreamingLM",
    "nll_fast",
    "nll_fast_many",
    "nll_loop",
    "nll_recompute",
    "parse",
]
