"""The registry of exhibits: for each ID its paper, tables, upstream inputs, the config keys each
of its three functions reads, and its job's resources. The workflow generates the table, claims
and figure rules of every exhibit from it (workflow/rules/exhibits.smk).

Settings are given as {name: config key} (a dotted path into the merged config) or
{name: function of the Plan (`exhibits.plan`)} for values derived from several keys (the models
an exhibit runs on) or from the claim catalogue (a paper value a figure shows). A job receives
exactly these values, so a config or catalogue change reruns only the jobs that read it.
Light on purpose (no torch at import): the workflow reads it to build the DAG.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..catalogue import find_claim
from ..models.sources import null_of, parent_of
from ..toys.runs import toy_runs
from . import PAPERS
from .plan import Plan

Setting = str | Callable[[Plan], Any]


@dataclass(frozen=True)
class Exhibit:
    """One exhibit: what its three jobs read and write."""

    id: str
    title: str
    tables: tuple[str, ...]
    inputs: Callable[[Plan], dict[str, str | list[str]]] = lambda plan: {}
    # a trained toy: the tables each of its runs (`toys.runs`) writes in its own `train` job
    run_tables: tuple[str, ...] = ()
    train_settings: dict[str, Setting] = field(default_factory=dict)
    table_settings: dict[str, Setting] = field(default_factory=dict)
    claim_settings: dict[str, Setting] = field(default_factory=dict)
    figure_settings: dict[str, Setting] = field(default_factory=dict)
    threads: int | str = 1  # or the config key that holds it
    mem_mb: int = 2000
    runtime: int = 10  # minutes
    # why this scale cannot run the exhibit, or cannot measure its claims (None: it can)
    unavailable: Callable[[Plan], str | None] = lambda plan: None
    unclaimed: Callable[[Plan], str | None] = lambda plan: None

    @property
    def paper(self) -> str:
        return PAPERS[self.id[0]]

    @property
    def module(self) -> str:
        return f"sinkscope.exhibits.{self.id.lower()}"

    def table_paths(self) -> dict[str, str]:
        return {name: f"results/{self.id}/{name}.parquet" for name in self.tables}

    def runs(self, plan: Plan) -> dict[str, dict[str, Any]]:
        """{run name: its settings} of a trained toy (none for the other exhibits)."""
        return toy_runs(self.id, plan.get(f"toys.{self.id}")) if self.run_tables else {}

    def run_paths(self, run: str) -> dict[str, str]:
        """The tables one run writes (`run` may be a wildcard)."""
        return {name: f"results/{self.id}/runs/{run}/{name}.parquet" for name in self.run_tables}

    def settings(self, plan: Plan, job: str) -> dict[str, Any]:
        """The values the `train`, `tables`, `claims` or `figure` function of the exhibit
        reads."""
        spec = {
            "train": self.train_settings,
            "tables": self.table_settings,
            "claims": self.claim_settings,
        }.get(job, self.figure_settings)
        if job not in ("train", "tables"):
            spec = {**spec, "scale": "scale"}
        if job == "figure":
            spec = {**spec, "title": lambda plan: self.title}
        return {name: plan.get(s) if isinstance(s, str) else s(plan) for name, s in spec.items()}

    def config_keys(self) -> dict[str, list[str]]:
        """The config keys each job reads directly (derived values are not listed)."""
        return {
            job: sorted(s for s in spec.values() if isinstance(s, str))
            for job, spec in (
                *((("train", self.train_settings),) if self.run_tables else ()),
                ("tables", self.table_settings),
                ("claims", {**self.claim_settings, "scale": "scale"}),
                ("figure", {**self.figure_settings, "scale": "scale"}),
            )
        }


# --- diagnostics of pretrained models (S2, U3-U7, D1, D3) -------------------------------------

EXTRACT_FILES = {
    "heads": "heads",
    "layers": "layers",
    "cosine": "first_cosine",
    "qk": "qk_spectra",
    "intervention": "intervention",
}


def _diagnostics(
    exhibit: str,
    title: str,
    tables: tuple[str, ...],
    needs: tuple[str, ...],
    claims_on: tuple[str, ...],
    modality: str | None = None,
    registers: bool = False,
    events: bool = False,
    units: bool = False,
    table_settings: dict[str, Setting] | None = None,
    claim_settings: dict[str, Setting] | None = None,
) -> Exhibit:
    """A diagnostics exhibit, its claims measured on the claim models of `claims_on`
    (`diagnostics.claim_models.<role>`: the first as `claim_model`, a text model after an image
    one as `extension_model`, whose claims `exhibits.targets` counts apart) and on each one's
    null; `events`: its tables count sink events (they read each model's registers and the first
    counted layer); `units`: its tables read the independent unit of each input
    (`data.inputs`), which its claims are bootstrapped over."""

    def models(plan: Plan) -> list[str]:
        return plan.models_of(modality, registers) + plan.nulls(claims_on)

    key = f"diagnostics.claim_models.{claims_on[0]}"
    which = "model with registers" if registers else f"{modality or ''} model".lstrip()

    def unclaimed(plan: Plan) -> str | None:
        if plan.get(key) in models(plan):
            return None
        runs_on = ", ".join(plan.models_of(modality, registers))
        return f"its claim model {plan.get(key)} ({key}) is not a {which} of this run ({runs_on})"

    return Exhibit(
        id=exhibit,
        title=title,
        tables=tables,
        inputs=lambda plan: {
            **{
                kind: [f"results/extract/{m}/{EXTRACT_FILES[kind]}.parquet" for m in models(plan)]
                for kind in needs
            },
            **({"units": [inputs_of(m) for m in models(plan)]} if units else {}),
        },
        table_settings={
            "models": models,
            **(
                {
                    "registers": lambda plan: {
                        m: plan.entry(m).get("registers", 0) for m in models(plan)
                    },
                    "first_counted_layer": "diagnostics.first_counted_layer",
                }
                if events
                else {}
            ),
            **(table_settings or {}),
        },
        claim_settings={
            "claim_model": key,
            **(
                {"extension_model": f"diagnostics.claim_models.{claims_on[1]}"}
                if len(claims_on) > 1
                else {}
            ),
            **(claim_settings or {}),
        },
        mem_mb=4000,
        unavailable=lambda plan: None if models(plan) else f"no {which} at this scale",
        unclaimed=unclaimed,
    )


def inputs_of(model: str) -> str:
    """The inputs table a model reads (a null reads its parent's)."""
    return f"resources/data/{parent_of(model)}.parquet"


# --- toys (U1, U2, D2, D4-D6) -----------------------------------------------------------------


def _toy(
    exhibit: str, title: str, tables: tuple[str, ...], trained: bool | tuple[str, ...], runtime: int
) -> Exhibit:
    """A toy exhibit. A trained one trains each run in its own job, on `device` with
    `toys.threads` threads, which writes every table (`trained` True) or those `trained` names;
    its tables job gathers them."""
    recipe = f"toys.{exhibit}"
    run_tables = tables if trained is True else trained or ()

    def inputs(plan: Plan) -> dict[str, list[str]]:
        paths = [entry.run_paths(run) for run in entry.runs(plan)]
        return {name: [p[name] for p in paths] for name in run_tables}

    entry = Exhibit(
        id=exhibit,
        title=title,
        tables=tables,
        inputs=inputs,
        run_tables=run_tables,
        train_settings=(
            {"recipe": recipe, "device": "device", "checkpoints": "toys.checkpoints"}
            if run_tables
            else {}
        ),
        table_settings={"recipe": recipe},
        claim_settings={"recipe": recipe},
        figure_settings={"recipe": recipe},
        threads="toys.threads" if run_tables else 1,
        runtime=runtime,
    )
    return entry


# --- streaming (S3-S7, S9) ----------------------------------------------------------------------


def streamed(plan: Plan) -> list[str]:
    """The models whose per-token NLL S3 and S4 read: `streaming.ppl.models`, then the nulls
    (`null_of`) of the claim models of S3 and S4 among them."""
    models = plan.get("streaming.ppl.models")
    claim_models = [plan.get(f"streaming.ppl.claim_models.{e}") for e in ("S3", "S4")]
    return models + list(dict.fromkeys(null_of(m) for m in claim_models if m in models))


def _nll_files(plan: Plan) -> list[str]:
    from ..streaming.policies import PARTS

    return [f"results/streaming/nll/{m}/{part}.parquet" for m in streamed(plan) for part in PARTS]


def _lm_histories(plan: Plan) -> list[str]:
    return [
        f"results/streaming/lms/{v}_history.parquet"
        for v in plan.get("streaming.pretrain.variants")
    ]


def _streaming_ppl(
    exhibit: str,
    title: str,
    tables: tuple[str, ...],
    table_settings: dict[str, Setting],
    claim_settings: dict[str, Setting] | None = None,
) -> Exhibit:
    """A streaming-perplexity exhibit (S3, S4): its tables from the NLL of every streamed model
    under every cache policy, its claims on `streaming.ppl.claim_models.<ID>`."""
    key = f"streaming.ppl.claim_models.{exhibit}"

    def unclaimed(plan: Plan) -> str | None:
        models = plan.get("streaming.ppl.models")
        if plan.get(key) in models:
            return None
        return f"its claim model {plan.get(key)} ({key}) is not in streaming.ppl.models {models}"

    return Exhibit(
        id=exhibit,
        title=title,
        tables=tables,
        inputs=lambda plan: {"nll": _nll_files(plan)},
        table_settings={**table_settings, "cache": "streaming.ppl.cache"},
        claim_settings={
            "claim_model": key,
            "cache": "streaming.ppl.cache",
            **(claim_settings or {}),
        },
        figure_settings={"cache": "streaming.ppl.cache"},
        mem_mb=4000,
        unclaimed=unclaimed,
    )


# what S6 and S7 name their models and notes by (exhibits.streaming_tables.sink_lm_context)
SINK_LM_LABEL = {
    "arch": "streaming.pretrain.arch",
    "steps": "streaming.pretrain.steps",
    "cache": "streaming.pretrain.cache",
}
LM_EVAL = {
    "ppl": "results/streaming/lms/ppl.parquet",
    "attention": "results/streaming/lms/attention.parquet",
}


# --- vision (U8, U9, S8) ------------------------------------------------------------------------


def _trained(plan: Plan) -> dict[str, dict[str, Any]]:
    return {
        m: {"variant": info["variant"], "seed": info["seed"]} for m, info in plan.trained.items()
    }


def _trained_registers(plan: Plan) -> dict[str, dict[str, Any]]:
    return {
        m: {**labels, "registers": plan.trained[m]["registers"]}
        for m, labels in _trained(plan).items()
    }


def _and_nulls(models: dict[str, dict[str, Any]], of: list[str]) -> dict[str, dict[str, Any]]:
    """`models` ({model: labels}) each labelled `null: False`, then the null of each model of
    `of` (its copy with the weights drawn afresh, `models.sources.null_of`) with that model's
    labels and `null: True`. A null's weights depend on its architecture and
    `diagnostics.nulls.seed` alone, so the nulls of a variant's seeds would be one model:
    `of` names one seed of each."""
    return {
        **{model: {**labels, "null": False} for model, labels in models.items()},
        **{null_of(model): {**models[model], "null": True} for model in of},
    }


def _u9_models(plan: Plan) -> dict[str, dict[str, Any]]:
    """The trained ViTs (variant, seed, registers) and the null of each variant's seed 0."""
    trained = _trained_registers(plan)
    return _and_nulls(trained, [m for m, info in trained.items() if info["seed"] == 0])


# the variants whose token norms U9 compares (gate + registers against the baseline); an input
# that is not one per model of `models` (U9's training logs and token norms) is one per model of
# the setting `<input>_models`
U9_NORM_VARIANTS = ("baseline", "gate-registers")


def _u9_norm_models(plan: Plan) -> dict[str, dict[str, Any]]:
    return {m: info for m, info in _u9_models(plan).items() if info["variant"] in U9_NORM_VARIANTS}


def _trained_label(plan: Plan) -> str:
    return f"vit-<variant>-s<r>, r < {plan.get('mitigation.n_seeds')}"


def _s8_label(plan: Plan) -> str:
    return next(iter(plan.s8_pairs().values()))["pair"]


def _s8_models(plan: Plan) -> dict[str, dict[str, Any]]:
    """The S8 pairs' models (pair, role, seed) and the nulls of the claim pair's seed 0."""
    pairs, claimed = plan.s8_pairs(), _s8_label(plan)
    return _and_nulls(
        pairs, [m for m, info in pairs.items() if info["pair"] == claimed and info["seed"] == 0]
    )


def _control_thresholds(controls: dict[str, tuple[str, str]]) -> Callable[[Plan], dict]:
    """The thresholds of catalogue controls ({name: (claim id, measure)}), for a figure that
    draws them (display only): a setting, so that editing one in the catalogue redraws it."""

    def thresholds(plan: Plan) -> dict[str, float]:
        found = {}
        for name, (claim_id, measure) in controls.items():
            (control,) = [
                c for c in find_claim(claim_id)["preconditions"] if c.get("measure") == measure
            ]
            found[name] = control["check"]["value"]
        return found

    return thresholds


def _paper_value(claim_id: str) -> Callable[[Plan], str]:
    """A claim's paper value as the catalogue gives it, for a figure that shows it (display
    only): a setting, so that editing it in the catalogue redraws that figure."""
    return lambda plan: find_claim(claim_id)["paper"]


def _descriptions(key: str) -> Callable[[Plan], dict[str, str]]:
    """{model: its registry description} of the models a config key lists."""
    return lambda plan: {m: plan.entry(m).get("description", "") for m in plan.get(key)}


def _per_model(models: Callable[[Plan], dict | list], path: str) -> Callable[[Plan], list[str]]:
    return lambda plan: [path.format(model=m) for m in models(plan)]


def _learned_sinks_models(plan: Plan) -> list[str]:
    """S1's model with learned sink logits, if it is among this scale's models."""
    name = plan.get("exhibits.S1.learned_sinks_model")
    return [name] if name in plan.models_of() else []


def _learned_sinks_with_nulls(plan: Plan) -> list[str]:
    """S1's model with learned sink logits and its null, if the model is among this scale's."""
    return [name for m in _learned_sinks_models(plan) for name in (m, null_of(m))]


def _learned_sinks_heads(plan: Plan) -> dict[str, list[str]]:
    paths = [f"results/extract/{m}/heads.parquet" for m in _learned_sinks_with_nulls(plan)]
    return {"heads": paths} if paths else {}


EXHIBITS: dict[str, Exhibit] = {
    e.id: e
    for e in (
        Exhibit(
            id="S1",
            title="a value-less sink logit absorbs spare attention",
            tables=(
                "sink_logit",
                "learned_sinks",
                "learned_sinks_per_input",
                "learned_sinks_check",
            ),
            inputs=_learned_sinks_heads,
            table_settings={
                "example": "exhibits.S1",
                "learned_sinks_models": _learned_sinks_with_nulls,
            },
            claim_settings={
                "learned_sinks_model": lambda plan: next(iter(_learned_sinks_models(plan)), None)
            },
        ),
        _diagnostics(
            "S2",
            "where attention goes",
            ("table", "per_input", "claim"),
            ("heads",),
            claims_on=("bos",),
            modality="text",
        ),
        _diagnostics(
            "U3",
            "where the sink sits, layer by layer",
            ("table", "per_input"),
            ("heads",),
            events=True,
            claims_on=("image", "text"),
            units=True,
        ),
        _diagnostics(
            "U4",
            "head specialization",
            ("table", "per_input", "claim"),
            ("heads",),
            claims_on=("image", "text"),
            units=True,
        ),
        _diagnostics(
            "U5",
            "dual regimes of sink events",
            ("table", "counts", "per_input", "claim"),
            ("heads",),
            events=True,
            claims_on=("image", "text"),
            units=True,
        ),
        _diagnostics(
            "U6",
            "sinks on registers",
            ("table", "counts", "per_input", "claim"),
            ("heads",),
            claims_on=("registers",),
            registers=True,
            events=True,
            units=True,
        ),
        _diagnostics(
            "U7",
            "mechanism signatures",
            ("table", "per_input"),
            ("heads", "qk"),
            claims_on=("image", "text"),
            units=True,
            table_settings={
                "first_counted_layer": "diagnostics.first_counted_layer",
                "min_event_rate": "diagnostics.intervention.min_event_rate",
            },
            claim_settings={"min_event_rate": "diagnostics.intervention.min_event_rate"},
        ),
        _diagnostics(
            "D1",
            "half-space condition: cosine to the first token",
            ("table", "histogram", "per_input", "claim"),
            ("layers", "cosine", "heads"),
            claims_on=("bos",),
            modality="text",
        ),
        _diagnostics(
            "D3",
            "density and oversmoothing",
            ("table", "intervention"),
            ("heads", "intervention"),
            claims_on=("text",),
            modality="text",
            claim_settings={
                "first_counted_layer": "diagnostics.first_counted_layer",
                "min_event_rate": "diagnostics.intervention.min_event_rate",
            },
        ),
        _toy(
            "U1",
            "conditional damping (NOP task)",
            (
                "summary",
                "interventions",
                "curves",
                "attention",
                "profile",
                "examples",
                "null_examples",
            ),
            True,
            60,
        ),
        _toy(
            "U2",
            "global broadcast",
            ("layers", "seeds", "curves", "emergence", "null_layers"),
            ("layers", "curves", "null_layers"),
            120,
        ),
        _toy("D2", "oversmoothing in one attention step", ("similarity", "layers"), False, 10),
        _toy("D4", "hard attention switch", ("seeds", "curves", "null_seeds"), True, 60),
        _toy("D5", "soft attention switch", ("runs", "curves", "null_runs"), True, 120),
        _toy("D6", "representation cost of sink and diagonal", ("norms", "slopes"), False, 60),
        _streaming_ppl(
            "S3",
            "streaming perplexity under cache policies",
            ("ppl", "curve", "blocks", "recomputed"),
            {
                "bin_tokens": "streaming.ppl.bin_tokens",
                "block_tokens": "streaming.ppl.block_tokens",
                "newline_sinks": "streaming.ppl.newline_sinks",
            },
            {"descriptions": _descriptions("streaming.ppl.models")},
        ),
        _streaming_ppl(
            "S4",
            "how many initial tokens",
            ("ppl", "blocks"),
            {"block_tokens": "streaming.ppl.block_tokens", "sinks": "streaming.ppl.sinks"},
        ),
        Exhibit(
            id="S5",
            title="decoding latency: re-computation vs sinks + window",
            tables=("latency", "summary"),
            table_settings={"models": "streaming.latency.models"},
            inputs=lambda plan: {
                "latency": "results/streaming/latency.parquet",
                "manifests": _per_model(
                    lambda plan: plan.get("streaming.latency.models"),
                    "resources/models/{model}/manifest.json",
                )(plan),
            },
            claim_settings={
                "models": "streaming.latency.models",
                "law_at_cache": "exhibits.S5.law_at_cache",
            },
            figure_settings={
                "paper_speedup": _paper_value("S5.speedup_growth"),
                "law_at_cache": "exhibits.S5.law_at_cache",
            },
        ),
        Exhibit(
            id="S6",
            title="pretraining with a sink token",
            tables=("ppl", "windows", "history", "emergence", "ratios"),
            inputs=lambda plan: {"ppl": LM_EVAL["ppl"], "histories": _lm_histories(plan)},
            claim_settings=SINK_LM_LABEL,
        ),
        Exhibit(
            id="S7",
            title="a learned sink logit",
            tables=("attention", "ppl", "windows", "ratios"),
            inputs=lambda plan: dict(LM_EVAL),
            claim_settings=SINK_LM_LABEL,
        ),
        Exhibit(
            id="S9",
            title="constant memory and attention cost per step",
            tables=("cost", "measured"),
            inputs=lambda plan: {"measured": "results/streaming/memory.parquet"},
            table_settings={
                "sam2": "streaming.memory.sam2",
                "tokens": "streaming.memory.tokens",
            },
            claim_settings={"measured": "streaming.memory.measured"},
            figure_settings={"model": "streaming.memory.measured.model"},
        ),
        Exhibit(
            id="U8",
            title="ViT mitigations: frozen linear probes",
            tables=("table", "probes", "curves"),
            inputs=lambda plan: {
                "probes": _per_model(_trained, "results/mitigation/probes/{model}.parquet")(plan),
                "curves": _per_model(_trained, "results/mitigation/train/{model}.parquet")(plan),
            },
            table_settings={"models": _trained, "variants": "mitigation.variants"},
            claim_settings={"claim_model": _trained_label},
        ),
        Exhibit(
            id="U9",
            title="ViT mitigations: sink classes, locations and token norms",
            tables=("table", "events", "images", "reference", "emergence", "models", "norms"),
            inputs=lambda plan: {
                "heads": _per_model(_u9_models, "results/extract/{model}/heads.parquet")(plan),
                "manifests": _per_model(_u9_models, "resources/models/{model}/manifest.json")(plan),
                "curves": _per_model(_trained, "results/mitigation/train/{model}.parquet")(plan),
                "norms": _per_model(_u9_norm_models, "results/mitigation/norms/{model}.parquet")(
                    plan
                ),
            },
            table_settings={
                "models": _u9_models,
                "curves_models": _trained,
                "norms_models": _u9_norm_models,
                "variants": "mitigation.variants",
                "first_counted_layer": "diagnostics.first_counted_layer",
                "batch_size": "mitigation.train.batch_size",
                "outlier": "mitigation.s8.outlier",
            },
            claim_settings={"claim_model": _trained_label, "outlier": "mitigation.s8.outlier"},
            figure_settings={
                "thresholds": _control_thresholds(
                    {
                        "events": ("U3.cls_early_patch_deep", "U5.events_per_image"),
                        "NOP": ("U5.nop_early_broadcast_deep", "U5.nop_per_image"),
                        "Broadcast": ("U5.nop_early_broadcast_deep", "U5.broadcast_per_image"),
                    }
                )
            },
        ),
        Exhibit(
            id="S8",
            title="high-norm tokens with and without registers",
            tables=("shares", "images", "outliers", "histogram", "maps"),
            inputs=lambda plan: {
                "norms": _per_model(_s8_models, "results/mitigation/norms/{model}.parquet")(plan),
                "maps": _per_model(_s8_models, "results/mitigation/norms/{model}_maps.parquet")(
                    plan
                ),
                "manifests": _per_model(_s8_models, "resources/models/{model}/manifest.json")(plan),
            },
            table_settings={
                "models": _s8_models,
                "outlier": "mitigation.s8.outlier",
                "bins": "mitigation.s8.bins",
            },
            claim_settings={"claim_model": _s8_label, "outlier": "mitigation.s8.outlier"},
            mem_mb=4000,
        ),
    )
}


def active(plan: Plan) -> dict[str, Exhibit]:
    """The exhibits this scale runs (U6 needs a model with registers)."""
    return {exhibit_id: e for exhibit_id, e in EXHIBITS.items() if e.unavailable(plan) is None}


def claimed(plan: Plan) -> dict[str, Exhibit]:
    """The exhibits this scale runs and measures the claims of (on the claim model named)."""
    return {exhibit_id: e for exhibit_id, e in active(plan).items() if e.unclaimed(plan) is None}


def not_run(plan: Plan) -> dict[str, str]:
    """{exhibit: why its claims are not measured at this scale} for the exhibits not claimed."""
    return {
        exhibit_id: e.unavailable(plan) or f"not measured: {e.unclaimed(plan)}"
        for exhibit_id, e in EXHIBITS.items()
        if exhibit_id not in claimed(plan)
    }
