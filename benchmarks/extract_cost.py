"""Benchmark: extraction memory and time against a plain forward pass.

    python benchmarks/extract_cost.py [model] [n]

For `n` and `4 n` random windows of 512 tokens, each in a fresh process: the peak resident
memory of a full extraction (statistics streamed to parquet), and the time per sample of the
extraction against a plain forward pass with output_attentions=True on the same model.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from sinkscope.data.inputs import batches
from sinkscope.extract import extract
from sinkscope.models import load_model
from sinkscope.provenance import ParquetStream

LENGTH, BATCH = 512, 4


def measure(model_dir: str, n: int) -> dict:
    torch.manual_seed(0)
    model, manifest = load_model(model_dir)
    vocab = model.config.vocab_size
    table = pd.DataFrame(
        {
            "sample": np.arange(n),
            "tokens": list(np.random.default_rng(0).integers(0, vocab, (n, LENGTH))),
        }
    )
    with tempfile.TemporaryDirectory() as tmp:
        heads, layers = ParquetStream(f"{tmp}/h.parquet"), ParquetStream(f"{tmp}/l.parquet")
        start = time.perf_counter()
        extract(model, batches(table, manifest, BATCH, "cpu"), heads, layers, 64, 1)
        hooked = (time.perf_counter() - start) / n
        heads.close({})
        layers.close({})
    start = time.perf_counter()
    with torch.no_grad():
        for inputs, _ in batches(table, manifest, BATCH, "cpu"):
            model.base_model(**inputs, output_attentions=True)
    plain = (time.perf_counter() - start) / n
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "n": n,
        "peak_mb": round(peak_mb),
        "s_per_sample": round(hooked, 3),
        "plain_s_per_sample": round(plain, 3),
        "overhead": round(hooked / plain, 2),
    }


def main(model: str, n: int) -> None:
    model_dir = str(Path("resources/models") / model)
    for count in (n, 4 * n):
        done = subprocess.run(
            [sys.executable, __file__, "--one", model_dir, str(count)],
            capture_output=True,
            text=True,
            check=True,
        )
        print(model, done.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:
        print(json.dumps(measure(sys.argv[2], int(sys.argv[3]))))
    else:
        main(
            sys.argv[1] if len(sys.argv) > 1 else "smollm2-135m",
            int(sys.argv[2]) if len(sys.argv) > 2 else 8,
        )
