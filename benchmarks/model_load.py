"""Benchmark: time to load each materialised model from its fp32 cache.

    python benchmarks/model_load.py [resources/models]

Prints, per cache, the median load time over repeated loads (the manifest check included; the
files were hashed at materialisation, so loads only compare file stats) and the parameter count.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from sinkscope.models import load_model


def main(root: Path, repeats: int = 5) -> None:
    print(f"{'model':<18} {'parameters':>13} {'median load (s)':>16} {'max (s)':>8}")
    for cache in sorted(p.parent for p in root.glob("*/manifest.json")):
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            _, manifest = load_model(cache)
            times.append(time.perf_counter() - start)
        print(
            f"{cache.name:<18} {manifest['parameters']:>13,} "
            f"{statistics.median(times):>16.3f} {max(times):>8.3f}"
        )


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "resources/models"))
