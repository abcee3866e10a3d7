"""Vision exhibits (U8, U9, S8) through the exhibit contract, on hand-built per-model tables; the
settings the vision stage's rules receive."""

from __future__ import annotations

import matplotlib.figure
import numpy as np
import pandas as pd
import pytest

from sinkscope.exhibits import Measured, s8, u8, u9
from sinkscope.exhibits.registry import EXHIBITS, Plan
from sinkscope.vision import images, params, stage

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: see conftest

VARIANTS = ["baseline", "registers", "gate", "gate-registers"]
TRAINED_LABEL = "vit-<variant>-s<r>, r < 2"


def _write(tmp_path, kind: str, per_model: dict[str, pd.DataFrame]) -> list[str]:
    """One parquet file per model, in the order of `per_model`."""
    paths = []
    for model, table in per_model.items():
        path = tmp_path / f"{kind}_{model}.parquet"
        table.to_parquet(path)
        paths.append(str(path))
    return paths


def _round_trip(tmp_path, exhibit: str, tables: dict[str, pd.DataFrame]) -> dict:
    """The tables as the claims and figure jobs read them: written to parquet and read back."""
    assert list(tables) == list(EXHIBITS[exhibit].tables)
    read = {}
    for name, table in tables.items():
        path = tmp_path / f"{exhibit}_{name}.parquet"
        table.to_parquet(path)
        read[name] = pd.read_parquet(path)
    return read


# --- U8 -------------------------------------------------------------------------------------------


def _u8_inputs(tmp_path):
    models = {
        f"vit-{variant}-s{seed}": {"variant": variant, "seed": seed}
        for variant in VARIANTS
        for seed in (0, 1)
    }
    results = {"baseline": (0.2, 50.0), "registers": (0.3, 50.5), "gate": (0.25, 49.8)}
    results["gate-registers"] = (0.35, 50.2)
    probes, curves = {}, {}
    for model, info in models.items():
        miou, top1 = results[info["variant"]]
        noise = (-0.01, 0.01)[info["seed"]]
        probes[model] = pd.DataFrame(
            {
                "dataset": ["procedural", "procedural"],
                "task": ["classification", "segmentation"],
                "metric": ["top1", "miou"],
                "value": [top1 + noise, miou + noise],
            }
        )
        curves[model] = pd.DataFrame(
            {"step": [0, 10], "loss": [1.0, 0.5], "probe_eval_acc": [0.2, 0.4 + noise]}
        )
    inputs = {
        "probes": _write(tmp_path, "probes", probes),
        "curves": _write(tmp_path, "curves", curves),
    }
    return inputs, {"models": models, "variants": VARIANTS}


def test_u8_tables_claims_and_figure(tmp_path):
    inputs, settings = _u8_inputs(tmp_path)
    tables = _round_trip(tmp_path, "U8", u8.tables(inputs, settings))
    assert set(tables["probes"].model) == set(settings["models"])
    assert tables["curves"].query("model == 'vit-gate-s1'").variant.unique().tolist() == ["gate"]
    seg = tables["table"][tables["table"].task == "segmentation"].set_index("variant")
    assert list(seg.index) == VARIANTS
    assert seg.loc["registers", "mean"] == pytest.approx(0.3)
    assert seg.loc["registers", "std"] == pytest.approx(np.std([-0.01, 0.01], ddof=1))
    assert seg.loc["registers", "n_seeds"] == 2 and np.isnan(seg.loc["registers", "paper"])
    assert seg.loc["registers", "paper_voc_miou"] == 0.499  # shown beside, never measured

    claims = u8.claims(tables, {"claim_model": TRAINED_LABEL, "scale": "default"})
    assert all(isinstance(m, Measured) and m.model == TRAINED_LABEL for m in claims.values())
    assert claims["U8.registers_improve_segmentation"].value is True
    assert claims["U8.gate_improves_segmentation"].value is True
    assert claims["U8.gate_registers_best"].value is True
    assert claims["U8.classification_unchanged"].value == pytest.approx(0.7)
    assert (
        "procedural: 0.300 +- 0.014 vs baseline 0.200"
        in claims["U8.registers_improve_segmentation"].note
    )
    assert claims["U8.gate_registers_best"].note == "best mIoU: procedural gate-registers (0.350)"

    fig = u8.figure(tables, {"scale": "default"})
    assert isinstance(fig, matplotlib.figure.Figure)
    assert len([ax for ax in fig.axes if ax.get_visible()]) == 4  # 2 probes + 2 training logs
    assert len({ax.get_subplotspec().rowspan.start for ax in fig.axes}) == 2  # at most 3 a row


def test_u8_reads_one_table_per_model(tmp_path):
    inputs, settings = _u8_inputs(tmp_path)
    with pytest.raises(ValueError, match="tables for"):
        u8.tables({**inputs, "curves": inputs["curves"][:-1]}, settings)


# --- U9 -------------------------------------------------------------------------------------------


def _heads(sinks, ratios, sranks):
    """A heads table with one relaxed event per row, at layer 1, over two images."""
    n = len(sinks)
    return pd.DataFrame(
        {
            "sample": np.arange(n) % 2,
            "layer": 1,
            "head": np.arange(n),
            "sink": sinks,
            "event_relaxed": True,
            "ratio_out": ratios,
            "srank": sranks,
        }
    )


def test_u9_tables_claims_and_figure(tmp_path):
    models = {
        "vit-baseline-s0": {"variant": "baseline", "seed": 0, "registers": 0},
        "vit-registers-s0": {"variant": "registers", "seed": 0, "registers": 2},
        "vit-gate-s0": {"variant": "gate", "seed": 0, "registers": 0},
    }
    heads = {
        "vit-baseline-s0": _heads([0, 0, 5, 0], [0.1, 0.1, 0.9, 0.3], [2.0, 2.0, 1.2, 2.0]),
        "vit-registers-s0": _heads([1, 2, 5], [0.9, 0.9, 0.9], [1.1, 1.1, 1.1]),
        "vit-gate-s0": _heads([0, 5], [0.1, 0.9], [2.0, 1.2]),
    }
    settings = {"models": models, "variants": VARIANTS[:3], "first_counted_layer": 1}
    found = u9.tables({"heads": _write(tmp_path, "heads", heads)}, settings)
    tables = _round_trip(tmp_path, "U9", found)
    mean = tables["table"].set_index(["variant", "sink_class", "location"])["mean"]
    assert mean[("baseline", "NOP", "cls")] == 1.0  # 2 NOP events on CLS over 2 images
    assert mean[("baseline", "Broadcast", "patch")] == 0.5
    assert mean[("baseline", "other", "all")] == 0.5
    assert mean[("registers", "Broadcast", "register")] == 1.0
    events = tables["events"]
    assert events.query("variant == 'registers'").registers.unique().tolist() == [2]

    claims = u9.claims(tables, {"claim_model": TRAINED_LABEL, "scale": "default"})
    assert {m.model for m in claims.values()} == {TRAINED_LABEL}
    assert claims["U9.gate_removes_nop"].value is True  # 0.5 < 1.0
    assert claims["U9.registers_take_broadcast"].value is True  # 2 of 3 on registers
    assert claims["U9.baseline_nop_per_image"].value == 1.0
    assert claims["U9.baseline_broadcast_per_image"].value == 0.5
    assert (
        claims["U9.gate_removes_nop"].note == "NOP events per image: gate 0.500 vs baseline 1.000"
    )
    assert claims["U9.registers_take_broadcast"].note.startswith("2 of 3 Broadcast events")
    assert claims["U9.registers_take_broadcast"].note.endswith("(67 %)")

    fig = u9.figure(tables, {"scale": "default"})
    assert [ax.get_title() for ax in fig.axes] == u9.CLASSES


# --- S8 -------------------------------------------------------------------------------------------


def _norms(outliers: int, registers: int, rng) -> pd.DataFrame:
    """CLS, registers and 99 patch tokens of one image, `outliers` of the patches at norm 100."""
    patch = rng.uniform(9, 11, 99 - outliers)
    norm = np.r_[10.0, np.full(registers, 50.0), np.full(outliers, 100.0), patch]
    kind = ["cls"] + ["register"] * registers + ["patch"] * 99
    return pd.DataFrame({"sample": 0, "token": np.arange(len(norm)), "kind": kind, "norm": norm})


def _map(registers: int) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "sample": [0],
            "side": [2],
            "weights": [np.full(4, 0.1, dtype=np.float32)],
            "register_mass": [0.3 if registers else 0.0],
            "pixels": [np.zeros((4, 4, 3), np.uint8).tobytes()],
            "image_size": [4],
        }
    )


def test_s8_tables_claims_and_figure(tmp_path):
    rng = np.random.default_rng(0)
    models = {
        "m-a": {"pair": "a / b", "role": "without", "seed": 0},
        "m-b": {"pair": "a / b", "role": "with", "seed": 0},
        "m-c": {"pair": "c / d", "role": "without", "seed": 0},
        "m-d": {"pair": "c / d", "role": "with", "seed": 0},
    }
    outliers = {"m-a": 5, "m-b": 0, "m-c": 2, "m-d": 2}
    registers = {"m-a": 0, "m-b": 2, "m-c": 0, "m-d": 2}
    inputs = {
        "norms": _write(
            tmp_path, "norms", {m: _norms(outliers[m], registers[m], rng) for m in models}
        ),
        "maps": _write(tmp_path, "maps", {m: _map(registers[m]) for m in models}),
    }
    settings = {"models": models, "outlier": {"kind": "relative", "value": 3.0}, "bins": 10}
    tables = _round_trip(tmp_path, "S8", s8.tables(inputs, settings))
    shares = tables["shares"].set_index("model")
    assert shares.outlier_share.tolist() == pytest.approx([100 * n / 99 for n in outliers.values()])
    assert np.isnan(shares.loc["m-a", "register_outlier_share"])
    assert shares.loc["m-b", "register_outlier_share"] == 100.0  # 50 > 3 x median of ~10
    assert tables["histogram"].groupby("model", sort=False)["count"].sum().tolist() == [
        100,
        102,
        100,
        102,
    ]
    assert tables["maps"].role.tolist() == ["without", "with"] * 2

    claims = s8.claims(tables, {"claim_model": "a / b", "scale": "default"})
    assert claims["S8.outlier_share"] == Measured(
        pytest.approx(100 * 5 / 99),
        "a / b",
        "a / b, mean of 1 seed(s): 5.05 % of patch tokens above the threshold without "
        "registers, 0.00 % with",
    )
    assert claims["S8.registers_remove_outliers"].value is True
    other = s8.claims(tables, {"claim_model": "c / d", "scale": "default"})
    assert other["S8.registers_remove_outliers"].value is False  # as many with as without

    fig = s8.figure(tables, {"scale": "default"})
    titles = [ax.get_title() for ax in fig.axes if ax.get_visible()]
    assert titles[:3] == ["a / b", "c / d", "high-norm outliers"]
    assert "image 0" in titles


# --- the registry's settings and the rules' params ----------------------------------------------


def test_registry_gives_one_input_per_model(smoke_config):
    plan = Plan(smoke_config)
    for exhibit in ("U8", "U9", "S8"):
        models = EXHIBITS[exhibit].settings(plan, "tables")["models"]
        for paths in EXHIBITS[exhibit].inputs(plan).values():
            assert len(paths) == len(models)
            assert all(f"/{model}" in path for model, path in zip(models, paths, strict=True))
    u9_models = EXHIBITS["U9"].settings(plan, "tables")["models"]
    assert u9_models["vit-registers-s0"] == {"variant": "registers", "seed": 0, "registers": 2}
    assert EXHIBITS["U8"].settings(plan, "claims")["claim_model"] == "vit-<variant>-s<r>, r < 1"
    assert EXHIBITS["S8"].settings(plan, "claims")["claim_model"] == "baseline / registers"


def test_s8_pairs_must_be_models(smoke_config):
    smoke_config["mitigation"]["s8"]["pairs"] = [["not-a-model", smoke_config["models"][0]]]
    with pytest.raises(ValueError, match=r"'mitigation.s8.pairs' names \['not-a-model'\]"):
        Plan(smoke_config).s8_pairs()


def test_rule_params_hold_only_what_each_job_reads(smoke_config):
    settings = smoke_config["mitigation"]
    training, probing = params.training(settings), params.probing(settings)
    whole = ["arch", "checkpoints", "preprocessing", "train", "views"]
    assert sorted(training) == sorted([*whole, "data", "seeds"])
    assert training["seeds"] == {"init": 0, "data": 100}
    assert sorted(training["data"]) == ["procedural", "source"]
    assert sorted(probing) == ["arch", "data", "preprocessing", "probes", "seeds"]
    assert probing["arch"] == {"image_size": settings["arch"]["image_size"]}
    assert probing["seeds"] == {"probe": 200}
    assert sorted(probing["data"]) == ["procedural", "segmentation", "source"]
    changed = {
        **settings,
        "probes": {**settings["probes"], "epochs": 99},
        "s8": {**settings["s8"], "bins": 99},
        "seeds": {**settings["seeds"], "probe": 99},
        "threads": 99,
    }
    assert params.training(changed) == training  # retrains no ViT
    imagenet = {**settings["data"], "source": "imagenet", "segmentation": ["ade20k", "voc"]}
    probing_imagenet = params.probing({**settings, "data": imagenet})["data"]
    assert sorted(probing_imagenet) == ["ade20k", "imagenet", "segmentation", "source", "voc"]


def test_training_and_probing_on_the_rule_params_match_the_full_settings(smoke_config, tmp_path):
    settings = {**smoke_config["mitigation"], "checkpoints": str(tmp_path / "checkpoints")}
    procedural = settings["data"]["procedural"]
    counts = {split: procedural[split] for split in images.SPLITS}
    table = images.generate(settings["arch"]["image_size"], procedural["classes"], counts, 0)
    runs = [
        stage.train_variant(chosen, "registers", 0, table, "cpu")
        for chosen in (settings, params.training(settings))
    ]
    (full, full_curve, full_manifest), (narrow, narrow_curve, narrow_manifest) = runs
    pd.testing.assert_frame_equal(full_curve, narrow_curve)
    assert full_manifest == narrow_manifest
    probed = [
        stage.probe_model(chosen, encoder, 0, table, "cpu")
        for chosen, encoder in ((settings, full), (params.probing(settings), narrow))
    ]
    pd.testing.assert_frame_equal(*probed)
