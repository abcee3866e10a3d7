"""Stand-ins for the paper scale: tiny random models and datasets in the real on-disk formats.

Every hub repository the paper config names gets a tiny randomly initialised model of the same
`model_type`, with a tokenizer of the same kind trained here on the bundled corpus, written in the
Hugging Face hub cache layout (`models--org--name/{blobs,refs,snapshots/<commit>}`) under a
private HF_HOME, so that `snapshot_download(repo, revision=...)` with HF_HUB_OFFLINE=1 resolves
them as it would online. The hub datasets (wikitext, PG19) are parquet files in the same layout,
and ImageNet, ADE20K and VOC 2012 a handful of images in their distribution's folder layout.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np
from PIL import Image

from sinkscope.data.text import read_corpus

REPO = Path(__file__).resolve().parents[1]
CORPUS_CHARS = 400_000  # of the bundled corpus: tokenizer training and the stand-in datasets
LFS_SUFFIXES = {".safetensors", ".model", ".parquet", ".bin"}  # stored by sha256, as on the hub
COMMIT = re.compile(r"[0-9a-f]{40}")
TINY = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
}


# --- the hub cache layout -------------------------------------------------------------------


def _blob_id(name: str, data: bytes) -> str:
    """The name the hub cache gives a file's blob: sha256 for LFS files, else the git blob sha1."""
    if Path(name).suffix in LFS_SUFFIXES:
        return hashlib.sha256(data).hexdigest()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def write_repo(hub: Path, repo: str, revision: str, folder: Path, kind: str = "model") -> str:
    """Store the files of `folder` as hub repository `repo` at `revision` in the cache `hub`.

    A 40-hex revision is the snapshot's commit; a branch or ref gets a commit derived from the
    repository's name, recorded under `refs/<revision>` as a download would. Returns the commit.
    """
    commit = revision if COMMIT.fullmatch(revision) else hashlib.sha1(repo.encode()).hexdigest()
    storage = hub / f"{kind}s--{repo.replace('/', '--')}"
    snapshot = storage / "snapshots" / commit
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        name = path.relative_to(folder).as_posix()
        data = path.read_bytes()
        blob = storage / "blobs" / _blob_id(name, data)
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        link = snapshot / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.unlink(missing_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    if not COMMIT.fullmatch(revision):
        ref = Path(os.path.join(storage, "refs", revision))
        ref.parent.mkdir(parents=True, exist_ok=True)
        ref.write_text(commit)
    return commit


# --- tokenizers, trained on the bundled corpus ----------------------------------------------


def corpus_lines() -> list[str]:
    text = read_corpus(REPO / "data" / "austen.txt.xz")[:CORPUS_CHARS]
    return [line for line in text.splitlines() if line.strip()]


LLAMA_PIECES = {"unk": (0, "<unk>"), "bos": (1, "<s>"), "eos": (2, "</s>"), "pad": (-1, "<pad>")}
GEMMA_PIECES = {"pad": (0, "<pad>"), "eos": (1, "<eos>"), "bos": (2, "<bos>"), "unk": (3, "<unk>")}


def sentencepiece(out: Path, lines: list[str], dummy_prefix: bool, gemma: bool) -> Path:
    """A SentencePiece BPE model with byte fallback, with Llama-2 / Mistral or Gemma settings.

    Llama-2's has a dummy prefix and no newline piece, so "\\n" after text is "▁" plus the byte
    <0x0A> (ids 29871, 13 there); Gemma's has no dummy prefix and a newline piece."""
    import sentencepiece as spm

    pieces = GEMMA_PIECES if gemma else LLAMA_PIECES
    special = {f"{kind}_id": index for kind, (index, _) in pieces.items()}
    special |= {f"{kind}_piece": piece for kind, (_, piece) in pieces.items()}
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=model,
        vocab_size=800,
        model_type="bpe",
        byte_fallback=True,
        split_digits=True,
        add_dummy_prefix=dummy_prefix,
        remove_extra_whitespaces=False,
        normalization_rule_name="identity",
        allow_whitespace_only_pieces=True,
        user_defined_symbols=["\n"] if gemma else [],
        num_threads=1,
        minloglevel=2,
        **special,
    )
    out.mkdir(parents=True, exist_ok=True)
    (out / "tokenizer.model").write_bytes(model.getvalue())
    return out / "tokenizer.model"


def byte_level_bpe(lines: list[str], specials: list[str], split_regex: str | None):
    """A byte-level BPE (`tokenizers`): GPT-2 / GPT-NeoX style, or tiktoken style with the
    Llama-3 split pattern when `split_regex` is given."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    if split_regex is None:
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    else:
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(split_regex), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=1000,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator((line + "\n" for line in lines), trainer)
    return tokenizer


LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def _llama2_tokenizer(out: Path, lines: list[str]):
    from transformers import LlamaTokenizer

    sentencepiece(out, lines, dummy_prefix=True, gemma=False)
    tokenizer = LlamaTokenizer.from_pretrained(out, add_bos_token=True)
    tokenizer.save_pretrained(out)
    return tokenizer


def _gemma_tokenizer(out: Path, lines: list[str]):
    from transformers import GemmaTokenizer

    sentencepiece(out, lines, dummy_prefix=False, gemma=True)
    tokenizer = GemmaTokenizer.from_pretrained(out, add_bos_token=True)
    tokenizer.save_pretrained(out)
    return tokenizer


def _llama3_tokenizer(out: Path, lines: list[str]):
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    bos, eos = "<|begin_of_text|>", "<|end_of_text|>"
    backend = byte_level_bpe(lines, [bos, eos], LLAMA3_SPLIT)
    backend.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A",
        pair=f"{bos} $A {bos} $B",
        special_tokens=[(bos, backend.token_to_id(bos))],
    )
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token=bos, eos_token=eos)
    tokenizer.save_pretrained(out)
    return tokenizer


def _gpt_oss_tokenizer(out: Path, lines: list[str]):
    """tiktoken-style byte-level BPE, no BOS added (as gpt-oss's o200k_harmony)."""
    from transformers import PreTrainedTokenizerFast

    bos, eos = "<|startoftext|>", "<|endoftext|>"
    backend = byte_level_bpe(lines, [bos, eos], LLAMA3_SPLIT)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token=bos, eos_token=eos)
    tokenizer.save_pretrained(out)
    return tokenizer


def _gpt2_tokenizer(out: Path, lines: list[str], neox: bool):
    from transformers import GPT2TokenizerFast, GPTNeoXTokenizerFast

    backend = byte_level_bpe(lines, ["<|endoftext|>", "<|padding|>"], None)
    kind = GPTNeoXTokenizerFast if neox else GPT2TokenizerFast
    tokenizer = kind(tokenizer_object=backend)
    tokenizer.save_pretrained(out)
    return tokenizer


def _bert_tokenizer(out: Path, lines: list[str]):
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertTokenizerFast

    backend = BertWordPieceTokenizer(lowercase=True)
    backend.train_from_iterator(lines, vocab_size=1000, show_progress=False)
    out.mkdir(parents=True, exist_ok=True)
    backend.save_model(str(out))
    tokenizer = BertTokenizerFast(vocab=str(out / "vocab.txt"), do_lower_case=True)
    tokenizer.save_pretrained(out)
    return tokenizer


# --- models ---------------------------------------------------------------------------------


def _causal_lm(config_class: str, tokenizer: Callable, **config):
    def build(out: Path, lines: list[str]) -> None:
        import torch
        import transformers

        text = tokenizer(out, lines)
        ids = {f"{kind}_token_id": getattr(text, f"{kind}_token_id") for kind in ("bos", "eos")}
        torch.manual_seed(0)
        settings = getattr(transformers, config_class)(vocab_size=len(text), **ids, **config)
        transformers.AutoModelForCausalLM.from_config(settings).save_pretrained(out)

    return build


def _image_processor(settings: dict) -> Callable:
    """Saves the image processor that `settings["image_processor_type"]` names, with the rest."""

    def save(out: Path, lines: list[str]) -> None:
        import transformers

        kwargs = {k: v for k, v in settings.items() if k != "image_processor_type"}
        getattr(transformers, settings["image_processor_type"])(**kwargs).save_pretrained(out)

    return save


def _encoder(config_class: str, model_class: str, preprocessing: Callable, **config):
    """An encoder with its tokenizer or image processor (`preprocessing(out, lines)`)."""

    def build(out: Path, lines: list[str]) -> None:
        import torch
        import transformers

        torch.manual_seed(0)
        settings = getattr(transformers, config_class)(**config)
        getattr(transformers, model_class)(settings).save_pretrained(out)
        preprocessing(out, lines)

    return build


LLAMA = dict(TINY, rms_norm_eps=1e-5)
DINOV2_PROCESSOR = {
    "image_processor_type": "BitImageProcessor",
    "size": {"shortest_edge": 256},
    "crop_size": {"height": 224, "width": 224},
    "do_center_crop": True,
    "image_mean": [0.485, 0.456, 0.406],
    "image_std": [0.229, 0.224, 0.225],
}
CLIP_PROCESSOR = {
    "image_processor_type": "CLIPImageProcessor",
    "size": {"shortest_edge": 224},
    "crop_size": {"height": 224, "width": 224},
    "image_mean": [0.48145466, 0.4578275, 0.40821073],
    "image_std": [0.26862954, 0.26130258, 0.27577711],
}
DINOV2 = dict(TINY, patch_size=14, image_size=518, layerscale_value=1.0)
CLIP_TOWERS = {
    "text_config": dict(
        TINY, vocab_size=1000, max_position_embeddings=77, bos_token_id=0, eos_token_id=1
    ),
    "vision_config": dict(TINY, patch_size=14, image_size=224),
    "projection_dim": 16,
}

# Hub repository (prefix) -> how its stand-in is built: the real model_type, tiny sizes.
BUILDERS: dict[str, Callable[[Path, list[str]], None]] = {
    "openai-community/gpt2": _causal_lm(
        "GPT2Config",
        partial(_gpt2_tokenizer, neox=False),
        n_embd=32,
        n_layer=2,
        n_head=4,
        n_positions=1024,
    ),
    "EleutherAI/pythia": _causal_lm(
        "GPTNeoXConfig",
        partial(_gpt2_tokenizer, neox=True),
        **TINY,
        rotary_pct=0.25,
        max_position_embeddings=2048,
        use_parallel_residual=True,
    ),
    "meta-llama/Llama-2": _causal_lm(
        "LlamaConfig", _llama2_tokenizer, **LLAMA, max_position_embeddings=4096
    ),
    "meta-llama/Llama-3": _causal_lm(
        "LlamaConfig",
        _llama3_tokenizer,
        **LLAMA,
        num_key_value_heads=2,
        max_position_embeddings=131072,
        rope_theta=500000.0,
        rope_scaling={
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
    ),
    "mistralai/Mistral": _causal_lm(
        "MistralConfig",
        _llama2_tokenizer,
        **LLAMA,
        num_key_value_heads=2,
        max_position_embeddings=32768,
        sliding_window=4096,
    ),
    "google/gemma-2-": _causal_lm(
        "Gemma2Config",
        _gemma_tokenizer,
        **TINY,
        num_key_value_heads=2,
        head_dim=8,
        sliding_window=4096,
    ),
    "google/gemma-3-": _causal_lm(
        "Gemma3TextConfig",
        _gemma_tokenizer,
        **TINY,
        num_key_value_heads=1,
        head_dim=8,
        sliding_window=512,
    ),
    "mosaicml/mpt-": _causal_lm(
        "MptConfig",
        partial(_gpt2_tokenizer, neox=True),
        d_model=32,
        n_heads=4,
        n_layers=2,
        expansion_ratio=2,
        max_seq_len=2048,
        attn_config={"alibi": True, "alibi_bias_max": 8},
    ),
    "tiiuae/falcon-": _causal_lm(
        "FalconConfig",
        partial(_gpt2_tokenizer, neox=False),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        multi_query=True,
        parallel_attn=True,
        new_decoder_architecture=False,
        alibi=False,
        bias=False,
        max_position_embeddings=2048,
    ),
    "openai/gpt-oss-": _causal_lm(
        "GptOssConfig",
        _gpt_oss_tokenizer,
        **LLAMA,
        num_key_value_heads=2,
        head_dim=8,
        num_local_experts=4,
        num_experts_per_tok=2,
        sliding_window=128,
        layer_types=["sliding_attention", "full_attention"],
        max_position_embeddings=131072,
    ),
    "google-bert/bert-": _encoder(
        "BertConfig", "BertModel", _bert_tokenizer, **TINY, vocab_size=1000
    ),
    "facebook/dinov2-with-registers-": _encoder(
        "Dinov2WithRegistersConfig",
        "Dinov2WithRegistersModel",
        _image_processor(DINOV2_PROCESSOR),
        **DINOV2,
        num_register_tokens=4,
    ),
    "facebook/dinov2-": _encoder(
        "Dinov2Config", "Dinov2Model", _image_processor(DINOV2_PROCESSOR), **DINOV2
    ),
    "laion/CLIP-ViT-": _encoder(
        "CLIPConfig", "CLIPModel", _image_processor(CLIP_PROCESSOR), **CLIP_TOWERS
    ),
}


def builder(repo: str) -> Callable[[Path, list[str]], None]:
    """The stand-in builder of hub repository `repo` (the longest matching prefix)."""
    matches = [prefix for prefix in BUILDERS if repo.startswith(prefix)]
    if not matches:
        raise KeyError(f"no stand-in for hub repository {repo!r}: add one to tests/standins.py")
    return BUILDERS[max(matches, key=len)]


# --- datasets -------------------------------------------------------------------------------


def _parquet(out: Path, column: str, rows: list[str], **extra) -> None:
    import pandas as pd

    out.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({column: rows, **extra}).to_parquet(out)


def _photo(rng: np.random.Generator, height: int, width: int) -> Image.Image:
    """A smooth random colour field with a few rectangles (JPEG-friendly)."""
    ys, xs = np.mgrid[0:height, 0:width] / max(height, width)
    base = rng.uniform(0, 255, 3) + rng.uniform(-80, 80, 3) * (xs + ys)[..., None]
    for _ in range(3):
        top, left = rng.integers(0, height // 2), rng.integers(0, width // 2)
        base[top : top + height // 3, left : left + width // 3] = rng.uniform(0, 255, 3)
    return Image.fromarray(np.clip(base, 0, 255).astype(np.uint8))


def _label_map(rng: np.random.Generator, height: int, width: int, labels: list[int]) -> np.ndarray:
    mask = np.full((height, width), labels[0], np.uint8)
    for label in labels[1:]:
        top, left = rng.integers(0, height // 2), rng.integers(0, width // 2)
        mask[top : top + height // 2, left : left + width // 2] = label
    return mask


def image_datasets(root: Path, per_class: int = 3, seed: int = 0) -> None:
    """ImageNet class folders, ADEChallengeData2016 and VOCdevkit/VOC2012 under `root`."""
    rng = np.random.default_rng(seed)
    for split in ("train", "val"):
        for wnid in ("n01440764", "n01443537", "n01484850"):
            folder = root / "imagenet" / split / wnid
            folder.mkdir(parents=True, exist_ok=True)
            for i in range(per_class):
                name = (
                    f"{wnid}_{i + 1}.JPEG" if split == "train" else f"ILSVRC2012_val_{wnid}{i}.JPEG"
                )
                _photo(rng, 75, 100).save(folder / name, quality=90)
    ade = root / "ade20k" / "ADEChallengeData2016"
    for folder, prefix in (("training", "ADE_train"), ("validation", "ADE_val")):
        for i in range(per_class):
            (ade / "images" / folder).mkdir(parents=True, exist_ok=True)
            (ade / "annotations" / folder).mkdir(parents=True, exist_ok=True)
            _photo(rng, 64, 96).save(ade / "images" / folder / f"{prefix}_{i + 1:08d}.jpg")
            mask = _label_map(rng, 64, 96, [0, *rng.integers(1, 151, 2).tolist()])
            Image.fromarray(mask, "L").save(
                ade / "annotations" / folder / f"{prefix}_{i + 1:08d}.png"
            )
    voc = root / "voc" / "VOCdevkit" / "VOC2012"
    for sub in ("JPEGImages", "SegmentationClass", "ImageSets/Segmentation"):
        (voc / sub).mkdir(parents=True, exist_ok=True)
    palette = np.zeros((256, 3), np.uint8)
    palette[:21] = rng.integers(0, 256, (21, 3))
    palette[255] = 224
    ids = {
        "train": [f"2007_{i:06d}" for i in range(per_class)],
        "val": [f"2008_{i:06d}" for i in range(per_class)],
    }
    for split, names in ids.items():
        (voc / "ImageSets" / "Segmentation" / f"{split}.txt").write_text("\n".join(names) + "\n")
        for name in names:
            _photo(rng, 60, 80).save(voc / "JPEGImages" / f"{name}.jpg")
            mask = _label_map(rng, 60, 80, [0, *rng.integers(1, 21, 2).tolist()])
            mask[0, :] = 255  # the void border
            picture = Image.fromarray(mask, "P")
            picture.putpalette(palette.tobytes())
            picture.save(voc / "SegmentationClass" / f"{name}.png")
    (voc / "ImageSets" / "Segmentation" / "trainval.txt").write_text(
        "\n".join(ids["train"] + ids["val"]) + "\n"
    )


# --- everything the paper config reads ------------------------------------------------------


def build(root: Path, config: dict) -> dict[str, Path]:
    """Build the stand-ins of every hub model and dataset that `config` (a merged config) reads.

    Returns {"hf_home": ..., "resources": ...}: point HF_HOME at the first and link the folders
    of the second into a run's `resources/`.
    """
    hub = root / "hf_home" / "hub"
    lines = corpus_lines()
    repos = {
        config["registry"][name]["repo"]: config["registry"][name]["revision"]
        for name in config["models"]
        if config["registry"][name]["source"] == "hub"
    }
    for repo, revision in sorted(repos.items()):
        with tempfile.TemporaryDirectory(dir=root) as work:
            builder(repo)(Path(work), lines)
            write_repo(hub, repo, revision, Path(work))
    datasets = [config["data"]["text"], config["streaming"]["text"]]
    for settings in (d for d in datasets if d["source"] == "hub"):
        spec = settings["hub"]
        with tempfile.TemporaryDirectory(dir=root) as work:
            half = len(lines) // 2  # the two datasets get different text
            rows = lines[:half] if "wikitext" in spec["repo"] else ["\n".join(lines[half:])]
            _parquet(Path(work) / spec["filename"], spec["column"], rows)
            write_repo(hub, spec["repo"], spec["revision"], Path(work), kind="dataset")
    image_datasets(root / "resources")
    return {"hf_home": root / "hf_home", "resources": root / "resources"}


def link_resources(resources: Path, workdir: Path) -> None:
    """Link each stand-in dataset folder into `workdir/resources/` (paths as in the config)."""
    (workdir / "resources").mkdir(parents=True, exist_ok=True)
    for folder in resources.iterdir():
        target = workdir / "resources" / folder.name
        if target.is_symlink() or target.exists():
            shutil.rmtree(
                target
            ) if target.is_dir() and not target.is_symlink() else target.unlink()
        target.symlink_to(folder, target_is_directory=True)
