"""Device check: what a machine with one GPU and no network says of the GPU path, in one command.

    python benchmarks/device_check.py OUT                      # on the GPU, the reference recipe
    python benchmarks/device_check.py OUT --steps 4 --batch 8  # a reduced size (the CPU, tests)

Writes under OUT: `test_gpu.xml` and `test_gpu.log`, the GPU tests (tests/test_gpu.py: the
extraction and streaming of stand-in models on the GPU against the CPU, half precision, timed
decoding, the training loops); per run of U1 and U2 at the one-GPU tier's recipe
(config/gpu.yaml: 30,000 steps of batch 1024, five replicates or seeds; `--steps` and `--batch`
reduce it) its tables under `results/<ID>/runs/`, as the workflow writes them, trained side by
side on the device, one process per run; `rows.csv`, U1's and U2's scorecard rows judged as a
run of the one-GPU tier would judge them; and
`device_check.json`: the device, the library versions, each step's wall seconds and each run's
training steps per second. Needs only the checkout's files.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import pandas as pd

from sinkscope.catalogue import load_claims
from sinkscope.config import load_config
from sinkscope.exhibits import module
from sinkscope.exhibits.plan import Plan
from sinkscope.exhibits.registry import EXHIBITS
from sinkscope.scorecard import verdict
from sinkscope.tiers import claim_tiers, control_settings

REPO = Path(__file__).resolve().parents[1]
TOYS = ("U1", "U2")


def recipe_config(steps: int | None, batch: int | None, n_eval: int | None) -> dict:
    """The one-GPU tier's config, its U1 and U2 recipes reduced where asked (U1 without its
    sweep: the replicates of its main setting)."""
    config = load_config([REPO / "config" / "config.yaml", REPO / "config" / "gpu.yaml"])
    u1 = config["toys"]["U1"]
    u1["sweep"] = {"gamma": [u1["gamma"]], "p": [u1["p"]]}
    for exhibit in TOYS:
        recipe = config["toys"][exhibit]
        train = recipe["train"]
        if steps:
            train |= {"steps": steps, "log_every": max(1, steps // 4), "checkpoint_every": steps}
        if batch:
            train |= {"batch": batch, "eval_batch": batch}
        if n_eval:
            recipe["n_eval"] = n_eval
    return config


def train_run(exhibit: str, run: dict, settings: dict, paths: dict[str, Path]) -> tuple[float, int]:
    """One run of a toy on the device, its tables written to `paths`; (wall s, steps)."""
    import torch

    torch.set_num_threads(1)
    start = time.perf_counter()
    tables = module(exhibit).train(run, settings)
    seconds = time.perf_counter() - start
    for name, path in paths.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        tables[name].to_parquet(path)
    return seconds, int(tables["curves"].step.max())


def run_toys(config: dict, device: str, out: Path, workers: int) -> tuple[list[dict], dict]:
    """Train every run of U1 and U2 side by side (one process each), gather and judge them;
    (the scorecard rows, each run's wall seconds and steps)."""
    plan, testable = Plan(config), claim_tiers(REPO)
    catalogue = {claim["id"]: claim for claim in load_claims()}
    jobs, timings, rows = {}, {}, []
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
        for exhibit in TOYS:
            entry = EXHIBITS[exhibit]
            settings = {**entry.settings(plan, "train"), "device": device}
            settings["checkpoints"] = str(out / "checkpoints")
            for name, run in entry.runs(plan).items():
                paths = {t: out / path for t, path in entry.run_paths(name).items()}
                jobs[pool.submit(train_run, exhibit, run, settings, paths)] = f"{exhibit} {name}"
        for job, name in jobs.items():
            seconds, steps = job.result()
            timings[name] = {"seconds": seconds, "steps_per_second": steps / seconds}
    for exhibit in TOYS:
        entry, toy = EXHIBITS[exhibit], module(exhibit)
        inputs = {t: [str(out / path) for path in paths] for t, paths in entry.inputs(plan).items()}
        tables = toy.tables(inputs, entry.settings(plan, "tables"))
        found = toy.claims(tables, entry.settings(plan, "claims"))
        measured = {claim: m.record() for claim, m in found.items()}
        for claim_id, record in measured.items():
            if claim_id not in catalogue:  # a control, judged within its claim's row
                continue
            claim = catalogue[claim_id]
            judged, reason = verdict(claim, measured, "gpu", control_settings(config), testable)
            rows.append({"claim": claim_id, "value": record["value"], "low": record["low"],
                         "high": record["high"], "verdict": judged, "reason": reason})  # fmt: skip
    return rows, timings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the folder everything is written under")
    parser.add_argument("--steps", type=int, help="training steps per run (default: the recipe's)")
    parser.add_argument("--batch", type=int, help="batch size (default: the recipe's)")
    parser.add_argument("--n-eval", type=int, help="evaluation sequences (default: the recipe's)")
    parser.add_argument("--workers", type=int, default=10, help="runs trained at once")
    args = parser.parse_args(argv)
    import torch

    args.out.mkdir(parents=True, exist_ok=True)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    report = {
        "device": torch.cuda.get_device_name() if device == "cuda" else platform.processor(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "seconds": {},
    }
    start = time.perf_counter()
    tests = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         str(REPO / "tests" / "test_gpu.py"), f"--junitxml={args.out / 'test_gpu.xml'}"],
        capture_output=True, text=True, cwd=REPO,
    )  # fmt: skip
    (args.out / "test_gpu.log").write_text(tests.stdout + tests.stderr)
    report["seconds"]["test_gpu"] = time.perf_counter() - start
    report["test_gpu"] = tests.stdout.strip().splitlines()[-1] if tests.stdout.strip() else ""
    start = time.perf_counter()
    config = recipe_config(args.steps, args.batch, args.n_eval)
    rows, report["runs"] = run_toys(config, device, args.out, args.workers)
    report["seconds"]["toys"] = time.perf_counter() - start
    report["recipes"] = {exhibit: config["toys"][exhibit]["train"] for exhibit in TOYS}
    pd.DataFrame(rows).to_csv(args.out / "rows.csv", index=False)
    (args.out / "device_check.json").write_text(json.dumps(report, indent=2, default=str))
    print(pd.DataFrame(rows)[["claim", "value", "verdict"]].to_string(index=False))
    print(json.dumps(report["seconds"]), report["test_gpu"])
    return 0 if tests.returncode in (0, 5) else 1  # 5: every test skipped (no GPU)


if __name__ == "__main__":
    sys.exit(main())
