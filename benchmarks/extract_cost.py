"""Benchmark: extraction memory and time against a plain forward pass.

    python benchmarks/extract_cost.py [model] [n]

Memory: for `n` and `4 n` random windows of 512 tokens, each in a fresh process, the peak
resident memory of a full extraction (statistics streamed to parquet), and for reference that of
plain forward passes over the same windows (the runtime's own allocations settle only after
several batches, so `n` should span a few batches).
Time: over `4 n` windows, batch by batch, an extraction (statistics formed and streamed) and a
plain forward pass with output_attentions=True on the same batch, alternating, so that both see
the same machine load; the first batch of each is warm-up. Reported: the median time per
window of each, the median of the per-batch ratios and the host's load average over the run.
The model is resources/models/<model> where it is installed; otherwise (a checkout without the
packaged models) a randomly initialised Llama of SmolLM2-135M's shape stands in.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from sinkscope.data.inputs import batches
from sinkscope.extract import Extractor, extract
from sinkscope.models import load_model
from sinkscope.provenance import ParquetStream

LENGTH, BATCH = 512, 4


# SmolLM2-135M's shape, for a checkout without the packaged model
STAND_IN = {"vocab_size": 49152, "hidden_size": 576, "intermediate_size": 1536,
            "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3,
            "max_position_embeddings": 2048, "tie_word_embeddings": True}  # fmt: skip


def open_model(model_dir: str):
    """The packaged model and its manifest, or the stand-in Llama (no manifest)."""
    if Path(model_dir).exists():
        return load_model(model_dir)
    import transformers

    config = transformers.LlamaConfig(**STAND_IN)
    model = transformers.LlamaForCausalLM._from_config(config, attn_implementation="eager")
    return model.eval(), {}


def windows(model_dir: str, n: int):
    """The model and `n` seeded random windows, in batches."""
    torch.manual_seed(0)
    model, manifest = open_model(model_dir)
    tokens = np.random.default_rng(0).integers(0, model.config.vocab_size, (n, LENGTH))
    table = pd.DataFrame({"sample": np.arange(n), "tokens": list(tokens)})
    return model, list(batches(table, manifest, BATCH, "cpu"))


def memory(model_dir: str, n: int) -> dict:
    model, work = windows(model_dir, n)
    with tempfile.TemporaryDirectory() as tmp:
        heads, layers = ParquetStream(f"{tmp}/h.parquet"), ParquetStream(f"{tmp}/l.parquet")
        extract(model, work, heads, layers, 64, 1)
        heads.close({})
        layers.close({})
    return {"n": n, "peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}


def plain_memory(model_dir: str, n: int) -> dict:
    model, work = windows(model_dir, n)
    with torch.no_grad():
        for inputs, _ in work:
            model.base_model(**inputs)
    return {"n": n, "peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}


def timing(model_dir: str, n: int) -> dict:
    model, work = windows(model_dir, n)
    extractor = Extractor(model, 64, 1)
    hooked, plain = [], []
    with tempfile.TemporaryDirectory() as tmp, torch.no_grad():
        heads, layers = ParquetStream(f"{tmp}/h.parquet"), ParquetStream(f"{tmp}/l.parquet")
        for inputs, samples in work:
            start = time.perf_counter()
            head_rows, layer_rows = extractor.run(inputs, samples)
            heads.write(head_rows)
            layers.write(layer_rows)
            hooked.append((time.perf_counter() - start) / len(samples))
            start = time.perf_counter()
            model.base_model(**inputs, output_attentions=True)
            plain.append((time.perf_counter() - start) / len(samples))
        heads.close({})
        layers.close({})
    hooked, plain = hooked[1:], plain[1:]
    return {
        "n": n,
        "load_average_1min": os.getloadavg()[0],
        "s_per_sample": round(statistics.median(hooked), 3),
        "plain_s_per_sample": round(statistics.median(plain), 3),
        "overhead": round(statistics.median(h / p for h, p in zip(hooked, plain, strict=True)), 2),
    }


def run(kind: str, model_dir: str, n: int) -> str:
    done = subprocess.run(
        [sys.executable, __file__, f"--{kind}", model_dir, str(n)],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip().splitlines()[-1]


def main(model: str, n: int) -> None:
    model_dir = str(Path("resources/models") / model)
    if not Path(model_dir).exists():
        print(model, "not installed: a random Llama of SmolLM2-135M's shape stands in")
    for kind in ("memory", "plain-memory"):
        for count in (n, 4 * n):
            print(model, kind, run(kind, model_dir, count))
    print(model, "time", run("time", model_dir, 4 * n))


if __name__ == "__main__":
    measures = {"--memory": memory, "--plain-memory": plain_memory, "--time": timing}
    if sys.argv[1:2] and sys.argv[1] in measures:
        print(json.dumps(measures[sys.argv[1]](sys.argv[2], int(sys.argv[3]))))
    else:
        main(
            sys.argv[1] if len(sys.argv) > 1 else "smollm2-135m",
            int(sys.argv[2]) if len(sys.argv) > 2 else 16,
        )
