"""Provenance: every writer embeds a record that `read` gets back; audit follows the chain."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

from sinkscope import plotting, provenance
from sinkscope.audit import audit


@pytest.fixture
def record(tmp_path):
    source = tmp_path / "input.txt"
    source.write_text("data")
    recorder = provenance.Recorder(
        rule="demo", params={"alpha": 0.5}, inputs=[source], code_dir=tmp_path
    )
    return recorder.record()


def test_record_fields(record, tmp_path):
    assert record["rule"] == "demo" and record["params"] == {"alpha": 0.5}
    assert record["inputs"] == [
        {
            "path": str(tmp_path / "input.txt"),
            "sha256": provenance.sha256_file(tmp_path / "input.txt"),
        }
    ]
    assert record["code"] == {"commit": None, "dirty": None}  # tmp_path is not a git checkout
    assert record["packages"]["torch"] and record["packages"]["python"]
    assert record["device"].startswith("cpu") and record["wall_time_s"] >= 0


def test_git_state_of_a_checkout(tmp_path):
    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "f").write_text("1")
    git("add", "f")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    state = provenance.git_state(tmp_path)
    assert len(state["commit"]) == 40 and state["dirty"] is False
    (tmp_path / "f").write_text("2")
    assert provenance.git_state(tmp_path)["dirty"] is True


def test_round_trip_parquet_json_sidecar(record, tmp_path):
    provenance.write_parquet(pd.DataFrame({"a": [1, 2]}), tmp_path / "t.parquet", record)
    assert provenance.read(tmp_path / "t.parquet") == record
    assert pd.read_parquet(tmp_path / "t.parquet").a.tolist() == [1, 2]
    provenance.write_json({"value": 3}, tmp_path / "r.json", record)
    assert provenance.read(tmp_path / "r.json") == record
    assert json.loads((tmp_path / "r.json").read_text())["value"] == 3
    provenance.write_with_sidecar("a,b\n1,2\n", tmp_path / "t.csv", record)
    assert provenance.read(tmp_path / "t.csv") == record
    assert (tmp_path / "t.csv").read_text() == "a,b\n1,2\n"


def test_round_trip_figures(record, tmp_path):
    fig, ax = plotting.figure()
    ax.plot([0, 1], [0, 1])
    provenance.save_figure(fig, tmp_path / "f.png", record)
    assert provenance.read(tmp_path / "f.png") == record
    assert provenance.read(tmp_path / "f.pdf") == record


def test_files_without_provenance_read_as_none(tmp_path):
    (tmp_path / "plain.json").write_text("{}")
    assert provenance.read(tmp_path / "plain.json") is None
    pd.DataFrame({"a": [1]}).to_parquet(tmp_path / "plain.parquet")
    assert provenance.read(tmp_path / "plain.parquet") is None


def test_atomic_path_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "out.txt"
    with pytest.raises(RuntimeError), provenance.atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("interrupted")
    assert list(tmp_path.iterdir()) == []


def test_audit_follows_inputs_and_flags_changes(tmp_path):
    raw = tmp_path / "raw.txt"
    raw.write_text("numbers")
    table = tmp_path / "table.parquet"
    first = provenance.Recorder(rule="make_table", params={"n": 3}, inputs=[raw], code_dir=tmp_path)
    provenance.write_parquet(pd.DataFrame({"a": [1]}), table, first.record())
    fig, _ = plotting.figure()
    second = provenance.Recorder(rule="plot", params={}, inputs=[table], code_dir=tmp_path)
    provenance.save_figure(fig, tmp_path / "fig.png", second.record())

    lines = "\n".join(audit(tmp_path / "fig.png"))
    assert "made by rule plot" in lines and "made by rule make_table" in lines
    assert '"n": 3' in lines and "raw.txt" in lines and "[unchanged]" in lines
    raw.write_text("other numbers")
    assert "CHANGED since" in "\n".join(audit(tmp_path / "fig.png"))


def test_audit_command_line(record, tmp_path):
    provenance.write_json({"value": 1}, tmp_path / "r.json", record)
    done = subprocess.run(
        [sys.executable, "-m", "sinkscope.cli", "audit", str(tmp_path / "r.json")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "made by rule demo" in done.stdout and "input.txt" in done.stdout


def test_models_used_are_recorded(tmp_path):
    recorder = provenance.Recorder(rule="r", params={}, inputs=[], code_dir=tmp_path)
    manifest = {
        "name": "m",
        "source": "wheel",
        "pin": {"wheels": []},
        "architecture": "X",
        "weights_sha256": {"model.safetensors": "ab"},
        "files": {"big": "cd"},
    }
    recorder.add_model(manifest)
    (model,) = recorder.record()["models"]
    assert model == {
        k: manifest[k] for k in ("name", "source", "pin", "architecture", "weights_sha256")
    }


def test_parquet_stream_appends_batches_and_stamps_on_close(record, tmp_path):
    stream = provenance.ParquetStream(tmp_path / "s.parquet")
    for start in (0, 2, 4):
        stream.write(pd.DataFrame({"a": [start, start + 1], "b": [0.5, 1.5]}))
    assert not (tmp_path / "s.parquet").exists()  # nothing counts as complete before close
    stream.close(record)
    assert pd.read_parquet(tmp_path / "s.parquet").a.tolist() == list(range(6))
    assert provenance.read(tmp_path / "s.parquet") == record
    assert sorted(p.name for p in tmp_path.iterdir()) == ["input.txt", "s.parquet"]
