"""Benchmark: the fast exact streaming evaluation against the token-by-token loop.

    python benchmarks/streaming_ppl.py [resources/models/smollm2-135m] [--tokens 512] [--cache 256]

Streams the first tokens of the offline corpus through the model under StreamingLLM (4 sinks)
and window attention, token by token (`nll_loop`, the definition) and chunked (`nll_fast`),
and prints the seconds of each, the speedup and the largest NLL difference.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from sinkscope.data.text import read_corpus
from sinkscope.models import load_model
from sinkscope.models.cache import read_manifest
from sinkscope.streaming import nll_fast, nll_loop, parse
from sinkscope.streaming.text import stream_tokenizer, text_tokens

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cache_dir", nargs="?", default=REPO / "resources/models/smollm2-135m")
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--cache", type=int, default=256)
    parser.add_argument("--chunk", type=int, default=256)
    parser.add_argument("--attention", default="sdpa", choices=["sdpa", "eager"])
    args = parser.parse_args()
    model, manifest = load_model(args.cache_dir)
    model.config._attn_implementation = args.attention
    tokenizer = stream_tokenizer(read_manifest(args.cache_dir), args.cache_dir, "model")
    ids = text_tokens(read_corpus(REPO / "data/austen.txt.xz"), tokenizer, args.tokens)
    print(f"{manifest['name']}: {args.tokens} tokens, {torch.get_num_threads()} threads")
    print(f"{'policy':<10} {'loop (s)':>9} {'fast (s)':>9} {'speedup':>8} {'max |dNLL|':>11}")
    for name in (f"4+{args.cache - 4}", f"0+{args.cache}"):
        start = time.perf_counter()
        loop = nll_loop(model, ids, parse(name))
        t_loop = time.perf_counter() - start
        start = time.perf_counter()
        fast = nll_fast(model, ids, parse(name), chunk=args.chunk)
        t_fast = time.perf_counter() - start
        diff = (loop - fast).abs().max().item()
        print(f"{name:<10} {t_loop:>9.1f} {t_fast:>9.1f} {t_loop / t_fast:>7.1f}x {diff:>11.2e}")


if __name__ == "__main__":
    main()
