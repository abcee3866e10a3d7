"""Benchmark: generation through the sink cache against transformers' full cache, and decoding
under sinks + window against re-computation.

    python benchmarks/generation.py [MODEL] [--lengths 1024 8192 32768 131072] [--new 64]
        [--cache 4+1020] [--latency-caches 256 512 1024 2048 4096] [--no-latency]

MODEL: a sinkscope model cache or a Hugging Face folder (default: the packaged SmolLM2-135M,
resources/models/smollm2-135m, materialised by `sinkscope stream smollm2-135m ...` or the
pipeline). For each length L, a prompt of the corpus's first L tokens is prefilled and `--new`
greedy tokens generated, once through `SinkCache` (sinkscope.streaming.generate) and once
through transformers' `DynamicCache` (its prefill chunked alike), each in a fresh process so
that its peak resident memory is its own: prefill seconds, decode tokens per second and peak
resident memory, and the ratios. A length whose full cache fails (out of memory) is reported
as such. Then the seconds per decoded token once the cache is full, sinks + window against
re-computation of the window, at each cache size (streaming.latency's `latency_table`), each
measured, and their ratio.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
CHUNK = 256  # prefill queries per forward pass, both caches


def load(model_dir: Path):
    """The model (fp32, eval) and its tokenizer, from a sinkscope cache or a Hugging Face
    folder."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from sinkscope.models import load_model
    from sinkscope.models.cache import read_manifest
    from sinkscope.streaming.text import stream_tokenizer

    if (model_dir / "manifest.json").exists():
        model, _ = load_model(model_dir)
        tokenizer = stream_tokenizer(read_manifest(model_dir), model_dir, "model")
    else:  # without a tokenizer, the model reads UTF-8 bytes
        model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
        has_tokenizer = (model_dir / "tokenizer_config.json").exists()
        tokenizer = AutoTokenizer.from_pretrained(model_dir) if has_tokenizer else None
    model.config._attn_implementation = "sdpa"
    return model.eval(), tokenizer


def corpus_ids(tokenizer, n: int) -> torch.Tensor:
    from sinkscope.data.text import read_corpus
    from sinkscope.streaming.text import text_tokens

    return text_tokens(read_corpus(REPO / "data/austen.txt.xz"), tokenizer, n)


def _run(model_dir: Path, length: int, new: int, cache: str, threads: int, queue) -> None:
    """One generation in this process; puts (prefill s, decode tokens/s, peak RSS MiB)."""
    sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - the progress bars: the table is the output
    from transformers import DynamicCache
    from transformers.generation.streamers import BaseStreamer

    from sinkscope.streaming import SinkCache, generate, parse

    torch.set_num_threads(threads)
    model, tokenizer = load(model_dir)
    ids = corpus_ids(tokenizer, length)[None]
    arrivals: list[float] = []

    class Clock(BaseStreamer):
        def put(self, value):
            arrivals.append(time.perf_counter())

        def end(self):
            pass

    options = dict(max_new_tokens=new, do_sample=False, eos_token_id=None, pad_token_id=0,
                   streamer=Clock())  # fmt: skip
    start = time.perf_counter()
    with torch.inference_mode():
        if cache == "full":
            model.generate(ids, cache=DynamicCache(), prefill_chunk_size=CHUNK, **options)
        else:
            generate(model, ids, SinkCache(model, parse(cache)), **options)
    prefill = arrivals[1] - start  # the prompt arrives first, then each new token
    decode = (new - 1) / (arrivals[-1] - arrivals[1])
    queue.put((prefill, decode, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))


def measure(model_dir: Path, length: int, new: int, cache: str, threads: int):
    """`_run` in a fresh process: its numbers, or the reason it failed."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=_run, args=(model_dir, length, new, cache, threads, queue))
    process.start()
    process.join()
    if process.exitcode != 0:
        return f"failed (exit {process.exitcode}: out of memory?)"
    return queue.get()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "model", nargs="?", type=Path, default=REPO / "resources/models/smollm2-135m"
    )
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 8192, 32768, 131072])
    parser.add_argument("--new", type=int, default=64, help="tokens generated after the prompt")
    parser.add_argument("--cache", default="4+1020")
    parser.add_argument(
        "--latency-caches", type=int, nargs="+", default=[256, 512, 1024, 2048, 4096]
    )
    parser.add_argument("--steps", type=int, default=1, help="timed steps per repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-latency", action="store_true")
    args = parser.parse_args(argv)
    if not args.model.is_dir():
        parser.error(
            f"{args.model}: no such model folder; materialise the packaged one with "
            "`sinkscope stream smollm2-135m --prompt hi --tokens 1`, or name another"
        )
    threads = torch.get_num_threads()
    print(f"{args.model.name}: {threads} threads, {args.new} tokens generated after each prompt")
    print(f"{'prompt':>7} {'cache':>8} {'prefill s':>10} {'decode tok/s':>13} {'peak RSS MiB':>13}")
    for length in args.lengths:
        results = {}
        for cache in (args.cache, "full"):
            results[cache] = measure(args.model, length, args.new, cache, threads)
            if isinstance(results[cache], str):
                print(f"{length:>7} {cache:>8} {results[cache]}")
            else:
                prefill, decode, rss = results[cache]
                print(f"{length:>7} {cache:>8} {prefill:>10.1f} {decode:>13.1f} {rss:>13.0f}")
        sink, full = results[args.cache], results["full"]
        if not isinstance(sink, str) and not isinstance(full, str):
            print(f"{length:>7} {'ratio':>8} {sink[0] / full[0]:>10.2f} {sink[1] / full[1]:>13.2f}"
                  f" {sink[2] / full[2]:>13.2f}")  # fmt: skip
    if args.no_latency:
        return
    latency(args)


def latency(args) -> None:
    """Seconds per decoded token, sinks + window against re-computation, at each cache size."""
    from sinkscope.streaming.latency import latency_table, tokens_needed

    settings = {"caches": args.latency_caches, "sinks": int(args.cache.split("+")[0]),
                "steps": args.steps, "repeats": args.repeats, "warmup": 1}  # fmt: skip
    model, tokenizer = load(args.model)
    table = latency_table(model, corpus_ids(tokenizer, tokens_needed(settings)), settings)
    medians = table.groupby(["cache", "policy"]).seconds.median().unstack()
    print(f"\n{'cache':>6} {'recompute s/tok':>16} {'sinks s/tok':>12} {'speedup':>8}")
    for cache, row in medians.iterrows():
        speedup = row.recompute / row.sinks
        print(f"{cache:>6} {row.recompute:>16.4f} {row.sinks:>12.4f} {speedup:>7.1f}x")


if __name__ == "__main__":
    main()
