"""Benchmark: the whole `sinkscope atlas MODEL` command, from opening the model to the page.

    python benchmarks/atlas.py [model] [windows] [tokens]

Default: smollm2-135m (from the model cache of the working folder, materialised there first if
missing) on 32 windows of 512 tokens of the configured corpus, the configured batch size and
map size. Run from the repository's folder. Prints the wall time, the process's CPU time (user +
system, of all threads), the torch threads, the machine's load average at the start and the
page size; the atlas goes to a temporary folder.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import torch

from sinkscope.atlas.command import AtlasRequest, run_atlas


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(model: str = "smollm2-135m", windows: int = 32, tokens: int = 512) -> dict:
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        start_wall, start_cpu = time.perf_counter(), cpu_seconds()
        page = run_atlas(AtlasRequest([model], out=Path(tmp), inputs=windows, tokens=tokens))
        wall, cpu = time.perf_counter() - start_wall, cpu_seconds() - start_cpu
        size = page.stat().st_size
    return {
        "model": model,
        "windows": windows,
        "tokens": tokens,
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "torch_threads": torch.get_num_threads(),
        "cpus": os.cpu_count(),
        "load_average_at_start": round(load, 2),
        "page_mb": round(size / 1e6, 2),
    }


if __name__ == "__main__":
    args = sys.argv[1:]
    print(json.dumps(main(*args[:1], *map(int, args[1:3])), indent=2))
