"""Loading and validating the pipeline configuration: the schema (`schema_path()`), then the
rules between keys that a schema cannot state (every model named exists, divisibility and
order between sizes), then the data files the configuration names."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NoReturn

import jsonschema
import yaml

from .catalogue import YAML_LOADER
from .errors import BadInput, UserError, read_text


class ConfigError(UserError, ValueError):
    """A configuration that cannot run; the message names every offending key (or file)."""


# The config keys (dotted prefixes) each rule upstream of the exhibits reads, at local sources
# (the hub and ImageNet keys are read only where those are the configured sources): the readers
# table of config/README.md and the rerun sweep of tests/test_reruns.py, which checks it against
# the jobs Snakemake reruns when each key changes. The exhibits' readers are in their registry.
UPSTREAM_READS = {
    "materialise_model": ["registry", "fetch"],
    "model_inputs": [
        "data.text.window",
        "data.text.n_windows",
        "data.text.seed",
        "data.images.n_images",
        "data.images.seed",
    ],
    "null_model": ["diagnostics.nulls.seed"],
    "extract": ["extract", "diagnostics.nulls.inputs", "device"],
    "qk_spectra": [],
    "intervention": [
        "diagnostics.first_counted_layer",
        "diagnostics.intervention",
        "extract.batch_size",
        "device",
    ],
    "streaming_nll": [
        "streaming.text.tokenize",
        "streaming.attention",
        "streaming.ppl.cache",
        "streaming.ppl.sinks",
        "streaming.ppl.newline_sinks",
        "streaming.ppl.tokens",
        "streaming.ppl.short_tokens",
        "streaming.ppl.null_tokens",
        "streaming.ppl.recompute_every",
        "streaming.ppl.chunk",
        "device",
    ],
    "streaming_latency": [
        "streaming.text.tokenize",
        "streaming.attention",
        "streaming.latency",
        "device",
    ],
    "streaming_pretrain": [
        "streaming.pretrain.arch",
        "streaming.pretrain.steps",
        "streaming.pretrain.batch_size",
        "streaming.pretrain.lr",
        "streaming.pretrain.precision",
        "streaming.pretrain.held_out",
        "streaming.pretrain.seeds",
        "streaming.pretrain.emergence",
        "device",
    ],
    "streaming_sink_eval": [
        "streaming.pretrain.held_out",
        "streaming.pretrain.arch.context",
        "streaming.pretrain.eval_tokens",
        "streaming.pretrain.eval_windows",
        "streaming.pretrain.cache",
        "streaming.pretrain.sinks",
        "streaming.pretrain.attention_windows",
        "device",
    ],
    "streaming_memory": [
        "streaming.text.tokenize",
        "streaming.attention",
        "streaming.memory.measured",
        "device",
    ],
    "mitigation_images": ["mitigation.data.procedural", "mitigation.arch.image_size"],
    "mitigation_train": [
        "mitigation.seeds.init",
        "mitigation.seeds.data",
        "mitigation.data.procedural",
        "mitigation.preprocessing",
        "mitigation.arch",
        "mitigation.views",
        "mitigation.train",
        "mitigation.checkpoints",
        "diagnostics.first_counted_layer",
        "device",
    ],
    "mitigation_probe": [
        "mitigation.seeds.probe",
        "mitigation.data.procedural",
        "mitigation.preprocessing",
        "mitigation.arch.image_size",
        "mitigation.probes",
        "device",
    ],
    "mitigation_norms": [
        "extract.batch_size",
        "mitigation.s8.maps",
        "diagnostics.nulls.inputs",
        "device",
    ],
    "scorecard": ["scale"],
    "run_cost": ["scale"],
}


def schema_path() -> Path:
    """The JSON schema (YAML) of the merged configuration: the one place that knows where it is."""
    return Path(__file__).with_name("schema.yaml")


def read_yaml(path: str | Path) -> dict[str, Any]:
    """A YAML mapping from a file; ConfigError naming the file (and line) if it is missing,
    unreadable, not UTF-8, not YAML or not a mapping."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except IsADirectoryError:
        raise ConfigError(f"config file {path} is a folder, not a YAML file") from None
    except UnicodeDecodeError as error:
        line = error.object[: error.start].count(b"\n") + 1
        raise ConfigError(
            f"config file {path} is not UTF-8 text (byte {error.object[error.start]:#04x} at "
            f"offset {error.start}) on line {line}: save it as UTF-8"
        ) from None
    except OSError as error:
        raise ConfigError(f"config file {path} cannot be read ({error.strerror})") from None
    try:
        data = yaml.load(text, YAML_LOADER)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise ConfigError(f"config file {path} is not valid YAML at{where}: {problem}") from None
    if data is None:  # Snakemake refuses such a --configfile too
        raise ConfigError(
            f"config file {path} holds no keys (it is empty or only comments): add the keys to "
            "change, or leave the file out"
        )
    if not isinstance(data, dict):
        raise ConfigError(
            f"config file {path} holds a {type(data).__name__}, not a mapping of keys to values"
        )
    return data


def merge(base: dict, override: dict) -> dict:
    """Merge `override` into a copy of `base` key by key, as Snakemake merges a --configfile."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def load_config(paths: Iterable[str | Path]) -> dict[str, Any]:
    """Read and merge config files in order (later ones override earlier ones)."""
    config: dict[str, Any] = {}
    for path in paths:
        config = merge(config, read_yaml(path))
    return config


def _key(path: Iterable[Any]) -> str:
    return ".".join(str(part) for part in path) or "<top level>"


def _describe(error: jsonschema.ValidationError) -> str:
    key = _key(error.absolute_path)
    schema = error.schema if isinstance(error.schema, dict) else {}
    if error.validator == "additionalProperties":
        allowed = sorted(schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed))
        return f"unknown key(s) {extra} in '{key}'; allowed keys: {allowed}"
    if error.validator == "enum":
        return f"'{key}' is {error.instance!r}; allowed values: {error.validator_value}"
    if error.validator == "const":
        return f"'{key}' is {error.instance!r}; it must be {error.validator_value!r}"
    if error.validator == "type":
        return (
            f"'{key}' must be of type {error.validator_value}, "
            f"got {type(error.instance).__name__} {error.instance!r}"
        )
    if error.validator == "required":
        return f"'{key}' lacks a required key: {error.message.split(' is a required')[0]}"
    return f"'{key}': {error.message}"


# --- rules between keys ------------------------------------------------------------------------

_MISSING = object()


def _get(config: Any, key: str, kind: type | tuple[type, ...] = object) -> Any:
    """The value at a dotted key if it is there and of `kind`, else _MISSING (the schema has
    reported it then)."""
    value = config
    for part in key.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return _MISSING
    if kind is int and isinstance(value, bool):
        return _MISSING
    return value if isinstance(value, kind) else _MISSING


def _ints(*values: Any) -> bool:
    return all(isinstance(v, int) and not isinstance(v, bool) for v in values)


def _is_causal_lm(entry: dict[str, Any]) -> bool:
    """Whether a registry entry is a decoder LM (what the streaming stage runs)."""
    if entry.get("format") == "gguf":
        return True
    return str(entry.get("class", "")).endswith("ForCausalLM")


def _model_problems(config: dict[str, Any]) -> list[str]:
    """Every model named anywhere is in the registry, of the modality its key needs."""
    registry = _get(config, "registry", dict)
    if registry is _MISSING:
        return []
    known = sorted(registry)
    problems = []

    def check(key: str, name: Any, modality: str | None = None, causal: bool = False) -> None:
        if not isinstance(name, str):
            return
        if name not in registry:
            problems.append(
                f"'{key}' names {name!r}, which is not in 'registry'; known models: {known}"
            )
            return
        entry = registry[name] if isinstance(registry[name], dict) else {}
        if modality and entry.get("modality") not in (None, modality):
            problems.append(
                f"'{key}' names {name!r}, whose 'registry.{name}.modality' is "
                f"{entry['modality']}; it must name a {modality} model"
            )
        elif causal and not _is_causal_lm(entry):
            what = entry.get("class") or entry.get("format")
            problems.append(
                f"'{key}' names {name!r}, which is not a causal LM ('registry.{name}' is "
                f"{what}); the streaming stage needs a decoder LM"
            )

    models = _get(config, "models", list)
    for name in [] if models is _MISSING else models:
        check("models", name)
    in_models = [] if models is _MISSING else models
    for role, modality in (("text", "text"), ("bos", "text"), ("image", "image")):
        key = f"diagnostics.claim_models.{role}"
        name = _get(config, key, str)
        if name is not _MISSING and models is not _MISSING and name not in in_models:
            problems.append(f"'{key}' is {name!r}, which is not in 'models'")
        elif name is not _MISSING:
            check(key, name, modality)
    key = "diagnostics.claim_models.registers"  # a registry model or a trained ViT with registers
    name = _get(config, key, str)
    if isinstance(name, str) and isinstance(registry.get(name), dict):
        if name not in in_models:
            problems.append(f"'{key}' is {name!r}, which is not in 'models'")
        elif not registry[name].get("registers"):
            problems.append(
                f"'{key}' names {name!r}, which has no registers ('registry.{name}.registers'); "
                "name a model with registers"
            )
    for key in ("streaming.ppl.models", "streaming.latency.models"):
        names = _get(config, key, list)
        for name in [] if names is _MISSING else names:
            check(key, name, "text", causal=True)
    for key in (
        "streaming.ppl.claim_models.S3",
        "streaming.ppl.claim_models.S4",
        "streaming.memory.measured.model",
    ):
        check(key, _get(config, key), "text", causal=True)
    pairs = _get(config, "mitigation.s8.pairs", list)
    for i, pair in enumerate([] if pairs is _MISSING else pairs):
        if not isinstance(pair, list) or len(pair) != 2:
            continue
        for j, name in enumerate(pair):
            key = f"mitigation.s8.pairs.{i}.{j}"
            if isinstance(name, str) and models is not _MISSING and name not in in_models:
                problems.append(f"'{key}' is {name!r}, which is not in 'models'")
                continue
            before = len(problems)
            check(key, name, "image")
            if len(problems) > before or not isinstance(registry.get(name), dict):
                continue
            registers = registry[name].get("registers", 0)
            if j == 0 and registers:
                problems.append(
                    f"'{key}' is {name!r}, which has registers ('registry.{name}.registers' is "
                    f"{registers}); the first model of a pair is the one without"
                )
            if j == 1 and not registers:
                problems.append(
                    f"'{key}' is {name!r}, which has no 'registry.{name}.registers'; the second "
                    "model of a pair is the one with registers"
                )
    return problems


def _divides(config: dict, small: str, large: str, what: str = "") -> str | None:
    a, b = _get(config, small, int), _get(config, large, int)
    if _ints(a, b) and a > 0 and b % a:
        return f"'{large}' ({b}) must be divisible by '{small}' ({a}){what}"
    return None


def _below(config: dict, small: str | int, large: str, what: str, strict: bool = True):
    a = _get(config, small) if isinstance(small, str) else small
    b = _get(config, large, int)
    if isinstance(a, list):
        a = max((v for v in a if _ints(v)), default=_MISSING)
    if not _ints(a, b):
        return None
    if a >= b if strict else a > b:
        relation = "smaller than" if strict else "at most"
        return f"'{small}' ({a}) must be {relation} '{large}' ({b}){what}"
    return None


def _range(config: dict, key: str) -> str | None:
    pair = _get(config, key, list)
    if pair is _MISSING or len(pair) != 2 or not all(isinstance(v, int | float) for v in pair):
        return None
    if pair[0] > pair[1]:
        return f"'{key}' is {pair}: its first value (lowest) must not exceed its second"
    return None


def _size_problems(config: dict[str, Any]) -> list[str]:
    """Divisibility and ordering between sizes: each message names both keys."""
    c = config
    inside = ": sinks are kept inside the cache"
    problems = [
        # ViTs of the mitigation stage (timm cuts images into whole patches)
        _divides(c, "mitigation.arch.num_heads", "mitigation.arch.embed_dim", " (heads split it)"),
        _divides(c, "mitigation.arch.patch_size", "mitigation.arch.image_size", " (whole patches)"),
        _range(c, "mitigation.views.global_scale"),
        _range(c, "mitigation.views.local_scale"),
    ]
    for small, large, why in (
        # byte-level LMs of S6/S7, per-token NLL of S3/S4, the KV cache of S9
        ("streaming.pretrain.sinks", "streaming.pretrain.cache", inside),
        ("streaming.ppl.sinks", "streaming.ppl.cache", inside),
        ("streaming.ppl.newline_sinks", "streaming.ppl.cache", inside),
        ("streaming.ppl.cache", "streaming.ppl.tokens", ": the cache must fill"),
        ("streaming.ppl.cache", "streaming.ppl.short_tokens", ": the cache must fill"),
        ("streaming.ppl.cache", "streaming.ppl.null_tokens", ": the cache must fill"),
        ("streaming.memory.tokens.sinks", "streaming.memory.tokens.cache", inside),
        ("streaming.memory.measured.sinks", "streaming.memory.measured.cache", inside),
        ("streaming.memory.measured.cache", "streaming.memory.measured.steps", ": it must fill"),
    ):
        problems.append(_below(c, small, large, why))
    caches, sinks = _get(c, "streaming.latency.caches", list), _get(c, "streaming.latency.sinks")
    small = [v for v in caches if _ints(v, sinks) and v <= sinks] if caches is not _MISSING else []
    if small:
        problems.append(
            f"'streaming.latency.caches' ({small}) must each be larger than "
            f"'streaming.latency.sinks' ({sinks}){inside}"
        )
    problems.append(
        _divides(c, "streaming.pretrain.arch.n_heads", "streaming.pretrain.arch.d_model",
                 " (heads split it)")
    )  # fmt: skip
    local, local_size = _get(c, "mitigation.views.local", int), "mitigation.views.local_size"
    if _ints(local) and local > 0:
        problems.append(_divides(c, "mitigation.arch.patch_size", local_size, " (whole patches)"))
    if _get(c, "mitigation.data.source") == "procedural":
        problems.append(
            _below(c, "data.images.n_images", "mitigation.data.procedural.diagnostic",
                   ": the trained ViTs are analysed on those held-out images", strict=False)
        )  # fmt: skip
    d_model = _get(c, "streaming.pretrain.arch.d_model")
    heads = _get(c, "streaming.pretrain.arch.n_heads")
    if _ints(d_model, heads) and heads > 0 and not d_model % heads and (d_model // heads) % 2:
        problems.append(
            f"'streaming.pretrain.arch.d_model' / 'streaming.pretrain.arch.n_heads' "
            f"({d_model} / {heads}) must be even: rotary embeddings rotate pairs of channels"
        )
    pre = "streaming.pretrain"
    tokens, windows = _get(c, f"{pre}.eval_tokens", int), _get(c, f"{pre}.eval_windows", int)
    cache = _get(c, f"{pre}.cache", int)
    if _ints(tokens, windows, cache) and windows > 0 and tokens // windows < cache + 2:
        problems.append(
            f"'{pre}.eval_tokens' / '{pre}.eval_windows' ({tokens} / {windows}) gives windows of "
            f"{tokens // windows} bytes; each needs at least '{pre}.cache' + 2 = {cache + 2}"
        )
    scores, n_tokens = _get(c, "exhibits.S1.scores", list), _get(c, "exhibits.S1.n_tokens", int)
    if scores is not _MISSING and _ints(n_tokens) and len(scores) != n_tokens:
        problems.append(
            f"'exhibits.S1.scores' has {len(scores)} values but 'exhibits.S1.n_tokens' is "
            f"{n_tokens}: one score per token"
        )
    registry = _get(c, "registry", dict)
    for name, entry in ({} if registry is _MISSING else registry).items():
        if not isinstance(entry, dict) or entry.get("source") != "init":
            continue
        base = f"registry.{name}.config"
        problems += [
            _divides(c, f"{base}.num_attention_heads", f"{base}.hidden_size", " (heads split it)"),
            _divides(
                c,
                f"{base}.num_key_value_heads",
                f"{base}.num_attention_heads",
                " (query heads share key-value heads)",
            ),  # fmt: skip
            _divides(c, f"{base}.patch_size", f"{base}.image_size", " (whole patches)"),
        ]
    return [p for p in problems if p]


def cross_field_problems(config: dict[str, Any]) -> list[str]:
    """What the schema cannot check: the models every key names, and the rules between sizes."""
    return _model_problems(config) + _size_problems(config)


def validate_config(
    config: dict[str, Any],
    schema: str | Path | None = None,
    sources: Iterable[str | Path] = (),
) -> None:
    """Raise ConfigError listing every schema violation and every broken rule between keys.

    `schema` defaults to `schema_path()`; `sources` (the files merged) are named in the message.
    """
    validator = jsonschema.Draft202012Validator(read_yaml(schema or schema_path()))
    errors = sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.absolute_path)))
    problems = [_describe(e) for e in errors] + cross_field_problems(config)
    if problems:
        files = " + ".join(str(s) for s in sources)
        origin = f" ({files})" if files else ""
        if len(problems) == 1:
            raise ConfigError(f"invalid configuration{origin}: {problems[0]}")
        raise ConfigError(
            f"invalid configuration{origin}, {len(problems)} problem(s):\n  - "
            + "\n  - ".join(problems)
        )


# --- the data files a configuration names ----------------------------------------------------


def _resolve(path: str, basedir: str | Path | None) -> Path:
    """A relative path that is not in the working directory is one of the repository's files."""
    if os.path.isabs(path) or os.path.exists(path) or basedir is None:
        return Path(path)
    return Path(basedir) / path


def corpora(config: dict[str, Any], basedir: str | Path | None = None) -> dict[str, Path]:
    """{config key: file} of the local text corpora this configuration reads."""
    found = {}
    for section in ("data.text", "streaming.text"):
        if _get(config, f"{section}.source") == "file":
            path = _get(config, f"{section}.file", str)
            if path is not _MISSING:
                found[f"{section}.file"] = _resolve(path, basedir)
    return found


def check_corpora(
    config: dict[str, Any],
    basedir: str | Path | None = None,
    read: Callable[[Path, str], str] = read_text,
) -> None:
    """Read every local corpus once (UTF-8, not truncated, not empty) and check that the
    byte-level LMs of S6/S7 find enough bytes in it; ConfigError naming the file and key."""
    texts: dict[Path, int] = {}
    for key, path in corpora(config, basedir).items():
        try:
            if path not in texts:
                texts[path] = len(read(path, key).encode("utf-8"))
        except BadInput as error:
            raise ConfigError(str(error)) from None
        if key != "streaming.text.file":
            continue
        pre = "streaming.pretrain"
        context = _get(config, f"{pre}.arch.context", int)
        held_out = _get(config, f"{pre}.held_out", int | float)
        eval_tokens = _get(config, f"{pre}.eval_tokens", int)
        windows = _get(config, f"{pre}.attention_windows", int)
        if not _ints(context, eval_tokens, windows) or held_out is _MISSING:
            continue
        n = texts[path]
        train, held = int(n * (1 - held_out)), n - int(n * (1 - held_out))
        need_held = max(eval_tokens, windows * context)
        if train <= context or held < need_held:
            raise ConfigError(
                f"{path} ('{key}') holds {n} bytes: at '{pre}.held_out' {held_out} that is "
                f"{train} training bytes (more than '{pre}.arch.context' {context} needed) and "
                f"{held} held-out bytes (max('{pre}.eval_tokens', '{pre}.attention_windows' x "
                f"context) = {need_held} needed); use a longer corpus or lower those keys"
            )


def check_startup(
    config: dict[str, Any],
    basedir: str | Path | None = None,
    sources: Iterable[str | Path] = (),
) -> None:
    """Everything the workflow checks before it plans a job: the schema, the rules between keys
    and the corpora; ConfigError with every problem found."""
    validate_config(config, sources=sources)
    check_corpora(config, basedir)


def temporary_folders(config: dict[str, Any]) -> list[tuple[Path, int]]:
    """(folder, depth) pairs where jobs of this configuration write through temporary files."""
    folders = [(Path("results"), 4), (Path("figures"), 2), (Path("resources"), 2)]
    for key in ("fetch.wheelhouse", "toys.checkpoints", "mitigation.checkpoints"):
        if (path := _get(config, key, str)) is not _MISSING:
            folders.append((Path(path), 2))
    return folders


def stop(error: ConfigError) -> NoReturn:
    """End a start-up that failed on the user's input: its message alone on stderr, exit 1
    (with SINKSCOPE_DEBUG=1, the traceback)."""
    if os.environ.get("SINKSCOPE_DEBUG"):
        raise error
    print(f"sinkscope: {error}", file=sys.stderr)
    sys.exit(1)
