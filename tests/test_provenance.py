"""Provenance: every writer embeds a record that `read` gets back; audit follows the chain."""

from __future__ import annotations

import json
import os
import platform
import shutil
import stat
import subprocess
import sys
import time
import zlib
from importlib.metadata import version
from pathlib import Path

import pandas as pd
import pytest

from sinkscope import codedigest, files, plotting, provenance
from sinkscope.audit import audit
from sinkscope.cli import main
from sinkscope.provenance.pdf import literal as pdf_literal
from sinkscope.provenance.seal import payload as record_payload


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
            "sha256": files.sha256_file(tmp_path / "input.txt"),
        }
    ]
    code = record["code"]  # tmp_path is not a git checkout
    assert code["commit"] is None and code["dirty"] is None
    assert code["modules"]["sinkscope.provenance"] == codedigest.module_digest(
        "sinkscope.provenance"
    )
    assert record["packages"]["pandas"] == version("pandas")  # this module imports it
    assert record["packages"]["python"] == platform.python_version()
    assert record["device"].startswith("cpu") and record["wall_time_s"] >= 0


def test_a_record_names_the_libraries_its_job_imported_by_the_time_of_the_record(tmp_path):
    """A job that imports pandas after its recorder started, and not torch: its record names
    pandas and what pandas imported, with their installed versions, and not torch."""
    job = (
        "import json, sys\n"
        "from sinkscope.provenance import Recorder\n"
        "recorder = Recorder(rule='r', params={}, inputs=[], code_dir=sys.argv[1])\n"
        "import pandas\n"
        "print(json.dumps(recorder.record()['packages']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", job, str(tmp_path)], capture_output=True, text=True, check=True
    )
    packages = json.loads(done.stdout)
    assert list(packages)[:2] == ["python", "sinkscope"]
    assert packages["python"] == platform.python_version()
    for name in ("pandas", "numpy", "python-dateutil"):
        assert packages[name] == version(name), name
    assert "torch" not in packages and "matplotlib" not in packages


def test_audit_names_each_library_made_under_another_version(tmp_path, capsys):
    """A result whose record names other versions than those installed (or a library no longer
    installed): the audit names each library and both versions, and the verdict the first."""
    table = tmp_path / "table.parquet"
    made = provenance.Recorder(rule="r", params={}, inputs=[], code_dir=tmp_path)
    record = made.record()
    assert "libraries now: the same versions" in audit_lines(table, record)
    assert audit(table)[-1] == "verdict: verified"

    numpy_now = version("numpy")
    record["packages"] |= {"numpy": "1.26.4", "removed-library": "2.0"}
    lines = audit_lines(table, record)
    assert (
        f"libraries now: OTHER VERSIONS of numpy 1.26.4 (installed: {numpy_now}), "
        "removed-library 2.0 (installed: none)"
    ) in lines
    verdict = f"verdict: other library versions: {table} was made with numpy 1.26.4"
    assert audit(table)[-1] == f"{verdict} (installed: {numpy_now})"
    assert main(["audit", str(table)]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == audit(table)[-1]


def test_a_stale_input_outranks_other_library_versions(tmp_path):
    raw = tmp_path / "raw.txt"
    raw.write_text("numbers")
    table = tmp_path / "table.parquet"
    record = provenance.Recorder(rule="r", params={}, inputs=[raw], code_dir=tmp_path).record()
    record["packages"]["numpy"] = "1.26.4"
    provenance.write_parquet(pd.DataFrame({"a": [1]}), table, record)
    raw.write_text("other numbers")
    assert audit(table)[-1] == (
        f"verdict: stale: input {raw} changed since {table} was made (and 1 more above)"
    )


def audit_lines(table, record) -> list[str]:
    """The audit's lines of `table` written with `record`, without the indentation."""
    provenance.write_parquet(pd.DataFrame({"a": [1]}), table, record)
    return [line.strip() for line in audit(table)]


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
    with pytest.raises(RuntimeError), files.atomic_path(target) as tmp:
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


# --- content hashes and the audit's verdict ---------------------------------------------------


def _all_outputs(record, folder):
    """One output of each writer, in `folder`."""
    provenance.write_parquet(
        pd.DataFrame({"a": [1, 2], "b": ["x", "y"]}), folder / "t.parquet", record
    )
    stream = provenance.ParquetStream(folder / "s.parquet")
    stream.write(pd.DataFrame({"a": [1.5]}))
    stream.close(record)
    provenance.write_json({"value": 0.25, "notes": ["(a) \\ b"]}, folder / "r.json", record)
    provenance.write_with_sidecar("a,b\n1,2\n", folder / "t.csv", record)
    fig, ax = plotting.figure()
    ax.plot([0, 1], [0, 1])
    provenance.save_figure(fig, folder / "f.png", record)
    return ["t.parquet", "s.parquet", "r.json", "t.csv", "f.png", "f.pdf"]


def test_every_writer_records_the_hash_of_its_content(record, tmp_path):
    for name in _all_outputs(record, tmp_path):
        recorded, actual = provenance.content_check(tmp_path / name)
        assert recorded is not None and recorded == actual, name
        assert provenance.read(tmp_path / name) == record, name  # read() leaves the hash out


def _flip_byte(path, at):
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("name", ["t.parquet", "s.parquet", "r.json", "t.csv", "f.png", "f.pdf"])
def test_an_edit_of_an_output_is_detected(record, tmp_path, name):
    _all_outputs(record, tmp_path)
    path = tmp_path / name
    if name == "r.json":
        obj = json.loads(path.read_text())
        obj["value"] = 0.5
        path.write_text(json.dumps(obj))
    elif name == "t.csv":
        path.write_text("a,b\n1,3\n")
    elif name == "f.png":  # a byte of the image data (IDAT), the record untouched
        _flip_byte(path, path.read_bytes().index(b"IDAT") + 20)
    elif name == "f.pdf":  # a byte before the record
        _flip_byte(path, 200)
    else:  # a byte of the column data
        _flip_byte(path, 10)
    recorded, actual = provenance.content_check(path)
    assert recorded != actual
    assert (
        audit(path)[-1]
        == f"verdict: content modified: {path} (its content differs from its record)"
    )


def test_audit_verdicts(tmp_path):
    raw = tmp_path / "raw.txt"
    raw.write_text("numbers")
    table = tmp_path / "table.parquet"
    first = provenance.Recorder(rule="make_table", params={}, inputs=[raw], code_dir=tmp_path)
    provenance.write_parquet(pd.DataFrame({"a": [1]}), table, first.record())
    assert audit(table)[-1] == "verdict: verified"
    raw.write_text("other numbers")
    assert audit(table)[-1] == f"verdict: stale: input {raw} changed since {table} was made"
    raw.unlink()
    assert audit(table)[-1] == f"verdict: stale: input {raw} of {table} is missing now"


def test_audit_compares_the_code_that_ran_with_the_code_now(tmp_path, monkeypatch):
    table = tmp_path / "table.parquet"
    record = provenance.Recorder(rule="r", params={}, inputs=[], code_dir=tmp_path).record()
    record["code"]["modules"]["sinkscope.provenance.parquet"] = "0" * 16  # edited since
    provenance.write_parquet(pd.DataFrame({"a": [1]}), table, record)
    lines = audit(table)
    assert lines[-1].startswith(f"verdict: stale: the code of {table} changed since: ")
    assert lines[-1].endswith(str(Path("provenance", "parquet.py")))


def test_audit_calls_stale_what_would_rerun(tmp_path, monkeypatch):
    """A prose edit of a module that ran leaves its output verified; a code edit makes it stale."""
    name, real = "sinkscope.exhibits.d2", codedigest._module_file
    source = real(name).read_text()
    table = tmp_path / "table.parquet"
    record = provenance.Recorder(rule="r", params={}, inputs=[], code_dir=tmp_path).record()
    record["code"]["modules"] = {name: codedigest.module_digest(name)}
    provenance.write_parquet(pd.DataFrame({"a": [1]}), table, record)

    def audit_after(change) -> str:
        edited = tmp_path / f"edit{len(list(tmp_path.glob('edit*')))}.py"
        edited.write_text(change(source))
        monkeypatch.setattr(
            codedigest, "_module_file", lambda module: edited if module == name else real(module)
        )
        return audit(table)[-1]

    prose = source.replace('CAPTION = r"""', 'CAPTION = r"""Edited. ')
    assert prose != source and audit_after(lambda _: prose) == "verdict: verified"
    assert audit_after(lambda _: source + "\nEDITED = 1\n").startswith(
        f"verdict: stale: the code of {table} changed since: "
    )


def test_outputs_and_temporary_folders_respect_the_umask(record, tmp_path):
    old = os.umask(0o002)
    try:
        names = _all_outputs(record, tmp_path)
        with files.temporary_dir(tmp_path, ".work-") as work:
            assert stat.S_IMODE(work.stat().st_mode) == 0o775
    finally:
        os.umask(old)
    for name in names:
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o664, name


def test_stale_temporaries_of_dead_jobs_are_removed_and_live_ones_kept(tmp_path):
    (tmp_path / "results" / "X").mkdir(parents=True)
    dead = tmp_path / "results" / "X" / ".t.parquet.abc123.part"
    dead.write_text("half")
    dead_dir = tmp_path / "resources" / "wheels" / ".extract-xyz"
    dead_dir.mkdir(parents=True)
    (dead_dir / "big.gguf").write_text("half")
    kept = tmp_path / "results" / "X" / "t.parquet"
    kept.write_text("done")
    with files.atomic_path(tmp_path / "results" / "X" / "live.json") as live:
        live.write_text("being written")
        removed = files.remove_stale_temporaries(
            [(tmp_path / "results", 4), (tmp_path / "resources", 2)]
        )
        assert sorted(removed) == sorted([dead, dead_dir])
        assert live.exists() and kept.exists()
    assert sorted(p.name for p in (tmp_path / "results" / "X").iterdir()) == [
        "live.json",
        "t.parquet",
    ]


def test_a_temporary_file_of_a_job_killed_before_its_lock_goes_once_an_hour_old(tmp_path):
    young, old = tmp_path / ".t.parquet.abc.new", tmp_path / ".u.parquet.def.new"
    young.touch()
    old.touch()
    hours_ago = time.time() - 7200
    os.utime(old, (hours_ago, hours_ago))
    assert files.remove_stale_temporaries([(tmp_path, 0)]) == [old]
    assert young.exists()


def test_a_sidecar_given_as_an_input_is_checked_against_the_file_it_describes(record, tmp_path):
    provenance.write_with_sidecar("a,b\n1,2\n", tmp_path / "t.csv", record)
    sidecar = tmp_path / "t.csv.prov.json"
    recorded, actual = provenance.content_check(sidecar)
    assert recorded == actual == files.sha256_file(tmp_path / "t.csv")
    table = tmp_path / "cost.parquet"
    made = provenance.Recorder(rule="cost", params={}, inputs=[sidecar], code_dir=tmp_path)
    provenance.write_parquet(pd.DataFrame({"a": [1]}), table, made.record())
    assert audit(table)[-1] == "verdict: verified"


# --- the seal of a record ---------------------------------------------------------------------


def _record_bytes(path) -> tuple[int, int]:
    """[start, end) of the bytes a file's record is written as (the whole sidecar of a CSV)."""
    data = path.read_bytes()
    if path.suffix == ".csv":
        return 0, 0  # see the sidecar
    if path.suffix == ".json":
        return data.index(b'\n  "provenance": '), len(data)
    seal = provenance.seal_of(path)
    full = {
        **seal.record,
        "content_sha256": seal.content_sha256,
        "record_sha256": seal.record_sha256,
    }
    payload = record_payload(full)
    if path.suffix == ".pdf":
        payload = pdf_literal(payload)
    start = data.index(payload)
    if path.suffix == ".png":  # the whole chunk: length, type, keyword, text, CRC
        start, end = start - len(provenance.KEY) - 9, start + len(payload) + 4
        return start, end
    if path.suffix == ".parquet":  # the key too
        start = data.index(provenance.KEY.encode())
    return start, data.index(payload) + len(payload)


def _still_sealed(path) -> bool:
    try:
        seal = provenance.seal_of(path)
    except provenance.BadInput as error:
        assert path.name in str(error)
        return False
    return seal.record is not None and seal.edited is None and seal.modified is None


@pytest.mark.parametrize(
    "name", ["t.parquet", "s.parquet", "r.json", "t.csv.prov.json", "f.png", "f.pdf"]
)
def test_every_byte_of_every_record_is_sealed(record, tmp_path, name):
    """Flipping a bit of a record's bytes breaks its seal (or the file): its first and last
    bytes and every 7th between (all of them, both bits, take a minute and pass too)."""
    _all_outputs(record, tmp_path)
    path = tmp_path / name
    start, end = (0, path.stat().st_size) if name.endswith(".prov.json") else _record_bytes(path)
    original = path.read_bytes()
    assert end - start > 500 and _still_sealed(path)
    for at in sorted({*range(start, end, 7), *range(start, start + 40), *range(end - 40, end)}):
        data = bytearray(original)
        data[at] ^= 0x20 if at % 2 else 0x01
        path.write_bytes(bytes(data))
        assert not _still_sealed(path), (name, at)


def test_an_edited_record_is_named_in_the_verdict_of_what_used_it(tmp_path):
    """The issue's case: a config value edited in place in a parquet footer (same length), and
    a rule name edited in a PNG's text chunk (with and without its CRC recomputed)."""
    table = tmp_path / "sink_logit.parquet"
    made = provenance.Recorder(rule="s1", params={"sink_logit": 3.0}, inputs=[], code_dir=tmp_path)
    provenance.write_parquet(pd.DataFrame({"a": [1.0]}), table, made.record())
    fig, ax = plotting.figure()
    ax.plot([0, 1])
    plot = provenance.Recorder(rule="figure_S1", params={}, inputs=[table], code_dir=tmp_path)
    provenance.save_figure(fig, tmp_path / "S1.png", plot.record())
    assert audit(tmp_path / "S1.png")[-1] == "verdict: verified"

    data = table.read_bytes()
    table.write_bytes(data.replace(b'"sink_logit": 3.0', b'"sink_logit": 4.0'))
    verdict = audit(tmp_path / "S1.png")[-1]
    assert verdict.startswith(f"verdict: record edited: {table} ("), verdict
    table.write_bytes(data)
    assert audit(tmp_path / "S1.png")[-1] == "verdict: verified"

    png = tmp_path / "S1.png"
    raw = png.read_bytes()
    edited = raw.replace(b'"rule": "figure_S1"', b'"rule": "figure_S2"')
    png.write_bytes(edited)
    assert audit(png)[-1].startswith(f"verdict: record edited: {png} (its text chunk tEXt at ")
    at = edited.index(b"tEXt")  # the CRC recomputed too: the record's own digest tells
    length = int.from_bytes(edited[at - 4 : at], "big")
    crc = zlib.crc32(edited[at : at + 4 + length]).to_bytes(4, "big")
    png.write_bytes(edited[: at + 4 + length] + crc + edited[at + 8 + length :])
    assert audit(png)[-1] == (
        f"verdict: record edited: {png} (its record differs from the record's own digest)"
    )


def test_inputs_are_named_by_their_seal(record, tmp_path):
    provenance.write_parquet(pd.DataFrame({"a": [1]}), tmp_path / "t.parquet", record)
    seal = provenance.seal_of(tmp_path / "t.parquet")
    made = provenance.Recorder(
        rule="r", params={}, inputs=[tmp_path / "t.parquet"], code_dir=tmp_path
    )
    (item,) = made.record()["inputs"]
    assert (
        item["content_sha256"] == seal.content_sha256
        and item["record_sha256"] == seal.record_sha256
    )
    assert item["sha256"] == files.sha256_file(tmp_path / "t.parquet")


@pytest.mark.integration
def test_every_record_of_a_real_run_is_sealed(smoke, tmp_path, capsys):
    """In a copy of each output of the smoke run that carries a record, flipping a bit of its
    record's bytes (about 30 places each) breaks the seal; the audit names the record."""
    from sinkscope.cli import main

    checked = set()
    for path in sorted(p for folder in ("results", "figures", "resources/models")
                       for p in (smoke / folder).rglob("*")):  # fmt: skip
        rel = path.relative_to(smoke)
        if not path.is_file() or path.name.endswith(".prov.json") or "/." in f"/{rel}":
            continue
        if provenance.read(path) is None:
            continue
        copy = tmp_path / rel
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, copy)
        sidecar = Path(f"{path}{provenance.SIDECAR_SUFFIX}")
        if sidecar.exists():
            shutil.copy2(sidecar, f"{copy}{provenance.SIDECAR_SUFFIX}")
            carrier = Path(f"{copy}{provenance.SIDECAR_SUFFIX}")
            start, end = 0, carrier.stat().st_size
        else:
            carrier = copy
            start, end = _record_bytes(copy)
        assert _still_sealed(copy), rel
        original = carrier.read_bytes()
        for at in range(start, end, max(1, (end - start) // 30)):
            data = bytearray(original)
            data[at] ^= 0x01
            carrier.write_bytes(bytes(data))
            assert not _still_sealed(copy), (rel, at)
        if copy.suffix in checked:
            continue
        checked.add(copy.suffix)  # one audit per kind: the rule's name edited, same length
        data = bytearray(original)
        at = data.index(b'"rule": "') + len(b'"rule": "')
        data[at] = ord("X") if data[at] != ord("X") else ord("Y")
        carrier.write_bytes(bytes(data))
        assert main(["audit", str(copy)]) == 1
        verdict = capsys.readouterr().out.splitlines()[-1]
        assert verdict.startswith(f"verdict: record edited: {copy} ("), verdict
    assert {".parquet", ".json", ".png", ".pdf", ".csv"} <= checked
