"""Vision (mitigation stage): LeJEPA training, resume, and the trained models as model caches."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from sinkscope import diagnostics as dx
from sinkscope import metrics
from sinkscope.data.inputs import batches, model_inputs
from sinkscope.extract import Extractor
from sinkscope.models import load_model
from sinkscope.models.cache import write_cache
from sinkscope.vision import augment, datasets, emergence, images, lejepa, stage
from sinkscope.vision.models import build

SETTINGS = {
    "variants": ["baseline", "registers", "gate", "gate-registers"],
    "n_seeds": 1,
    "seeds": {"init": 0, "data": 10, "probe": 20},
    "data": {
        "source": "procedural",
        "procedural": {
            "file": "",
            "classes": 3,
            "train": 24,
            "test": 8,
            "diagnostic": 4,
            "seed": 0,
        },
        "imagenet": {"train": "", "val": ""},
        "segmentation": ["procedural"],
        "ade20k": "",
        "voc": "",
    },
    "preprocessing": {"mean": [0.5] * 3, "std": [0.25] * 3},
    "arch": {
        "image_size": 16,
        "patch_size": 4,
        "embed_dim": 16,
        "depth": 2,
        "num_heads": 2,
        "mlp_ratio": 2.0,
        "registers": 2,
        "layerscale_init": 1e-4,
        "drop_path_rate": 0.5,  # high, so that the resumed run must draw the same masks
    },
    "views": {
        "global": 2,
        "local": 1,
        "local_size": 8,
        "global_scale": [0.5, 1.0],
        "local_scale": [0.2, 0.5],
        "jitter": 0.4,
    },
    "train": {
        "steps": 6,
        "batch_size": 4,
        "lr": 0.003,
        "weight_decay": 0.05,
        "warmup": 2,
        "lambda": 0.05,
        "slices": 8,
        "knots": 9,
        "t_max": 5.0,
        "projector": {"hidden": 16, "out": 8},
        "probe_lr": 0.01,
        "log_every": 2,
        "checkpoint_every": 2,
        "eval_images": 4,
        "emergence_images": 4,
        "workers": 0,
        "precision": "float32",
        "grad_checkpointing": False,
    },
    "probes": {
        "epochs": 2,
        "lr": 0.01,
        "weight_decay": 0.0,
        "batch_size": 8,
        "max_train": 0,
        "max_test": 0,
        "feature_dtype": "float32",
        "workers": 0,
    },
}


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: see conftest


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    counts = {split: SETTINGS["data"]["procedural"][split] for split in images.SPLITS}
    return images.generate(16, 3, counts, seed=0)


def _train(table, checkpoint, variant="registers", data_seed=10, **train):
    vit = stage.ViTConfig.of_variant(variant, SETTINGS["arch"])
    data, held_out, classes = datasets.pretraining(SETTINGS["data"], table, 16)
    return lejepa.train(
        vit,
        stage.view_config(SETTINGS),
        stage.train_config({**SETTINGS, "train": {**SETTINGS["train"], **train}}),
        lejepa.Seeds(init=0, data=data_seed),
        data,
        held_out,
        classes,
        stage.preprocessing(SETTINGS),
        checkpoint,
    )


def test_views_are_seeded_and_shaped(table):
    split = datasets.procedural(table, "train")
    batch = next(datasets.batches(split, 4))[0]
    cfg = stage.view_config(SETTINGS)
    first = augment.views(batch, cfg, [0.5] * 3, [0.25] * 3, torch.Generator().manual_seed(1))
    again = augment.views(batch, cfg, [0.5] * 3, [0.25] * 3, torch.Generator().manual_seed(1))
    assert first[0].shape == (8, 3, 16, 16) and first[1].shape == (4, 3, 8, 8)
    assert torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])
    assert not torch.equal(first[0][:4], first[0][4:])  # two different global views


def test_full_crop_without_jitter_is_the_image_or_its_mirror():
    images_ = torch.rand(6, 3, 8, 8)
    gen = torch.Generator().manual_seed(0)
    crops = augment.resized_crops(images_, 8, (1.0, 1.0), gen, aspect=(1.0, 1.0))
    pairs = list(zip(crops, images_, strict=True))
    flipped = [torch.allclose(c, i.flip(-1), atol=1e-5) for c, i in pairs]
    same = [torch.allclose(c, i, atol=1e-5) for c, i in pairs]
    assert all(a != b for a, b in zip(flipped, same, strict=True)) and any(flipped) and any(same)
    half = augment.resized_crops(images_, 4, (0.25, 0.25), gen, aspect=(1.0, 1.0))
    assert half.shape == (6, 3, 4, 4)


def test_lejepa_loss_parts():
    t = lejepa.sigreg.knots(9)
    slices = lejepa.sigreg.random_slices(4, 8, torch.Generator().manual_seed(0))
    z = torch.randn(2 * 16, 4, generator=torch.Generator().manual_seed(1))
    same = torch.cat([z[:16], z[:16]])  # two identical global views: invariance 0
    loss, invariance, regulariser = lejepa.lejepa_loss(same, None, 2, 0.05, slices, t)
    assert invariance.item() == 0.0
    assert loss.item() == pytest.approx(0.05 * regulariser.item())
    local = torch.zeros(16, 4)
    _, invariance, _ = lejepa.lejepa_loss(same, local, 2, 0.05, slices, t)
    assert invariance.item() == pytest.approx((z[:16] ** 2).mean().item() / 3, rel=1e-5)


def test_resume_gives_bit_identical_weights(table, tmp_path, monkeypatch):
    full, full_curve = _train(table, tmp_path / "a.pt")
    real_views, calls = augment.views, []

    def crashing(*args, **kwargs):  # killed during step 4, after the checkpoint of step 2
        calls.append(1)
        if len(calls) == 4:
            raise KeyboardInterrupt
        return real_views(*args, **kwargs)

    monkeypatch.setattr(augment, "views", crashing)
    with pytest.raises(KeyboardInterrupt):
        _train(table, tmp_path / "b.pt")
    monkeypatch.setattr(augment, "views", real_views)
    assert torch.load(tmp_path / "b.pt", weights_only=True)["step"] == 2
    torch.manual_seed(12345)  # the process's generator (drop path draws from it) moved on
    resumed, resumed_curve = _train(table, tmp_path / "b.pt")
    for (name, p), q in zip(full.state_dict().items(), resumed.state_dict().values(), strict=True):
        assert torch.equal(p, q), name
    pd.testing.assert_frame_equal(full_curve, resumed_curve)  # the sinks' emergence included
    assert list(full_curve.step) == [2, 4, 6] and full_curve.notna().all().all()
    assert set(emergence.COLUMNS) <= set(full_curve.columns)
    other, _ = _train(table, tmp_path / "c.pt", data_seed=11)
    assert not torch.equal(other.reg_token, full.reg_token)


def test_layerscale_and_drop_path_as_the_reference_builds_them():
    vit = stage.ViTConfig.of_variant("baseline", SETTINGS["arch"])
    model = build(vit, seed=0)
    for block in model.blocks:
        for scale in (block.ls1, block.ls2):
            assert torch.equal(scale.gamma.detach(), torch.full((16,), 1e-4))
    rates = [getattr(block.drop_path1, "drop_prob", 0.0) for block in model.blocks]
    assert rates == [0.0, 0.5]  # rising linearly from the first block to the last
    pixels = torch.randn(3, 3, 16, 16)
    model.eval()
    assert torch.equal(model.embedding(pixels), model.embedding(pixels))  # no drop in eval
    model.train()
    torch.manual_seed(0)
    first = model.forward_features(pixels)
    torch.manual_seed(1)
    assert not torch.equal(first, model.forward_features(pixels))


def test_sinks_counted_in_training_are_the_diagnostics_events():
    """A ViT whose every query attends to CLS (queries a constant, keys the normalised input,
    CLS a large first feature): its sink events per image as the training log counts them are
    those of the diagnostics' extraction, by class and by the reference code's rule."""
    arch = {**SETTINGS["arch"], "depth": 3, "registers": 0, "layerscale_init": None}
    model = build(stage.ViTConfig.of_variant("baseline", arch), seed=0).eval()
    with torch.no_grad():
        model.cls_token.zero_()
        model.cls_token[0, 0, 0] = 50.0
        for block in model.blocks:
            qkv = block.attn.qkv
            qkv.weight[:32] = 0.0
            qkv.weight[16:32] = 3 * torch.eye(16)
            qkv.bias[:16], qkv.bias[16:32] = 3.0, 0.0
    pixels = torch.randn(4, 3, 16, 16)
    found = emergence.sinks_per_image(model, pixels, first_counted_layer=1)
    heads, _ = Extractor(model).run({"pixel_values": pixels}, np.arange(4))
    events = dx.events(heads, first_counted_layer=1, registers=0)
    assert len(events) > 0 and found["events_per_image"] == len(events) / 4
    for cls in ("NOP", "Broadcast"):
        assert found[f"{cls}_per_image"] == (events.sink_class == cls).sum() / 4
    reference = metrics.value_ratio_class(events.ratio_head)
    for cls in ("NOP-like", "broadcast-like"):
        assert found[f"{cls}_per_image"] == (reference == cls).sum() / 4


def test_gradient_checkpointing_changes_no_weight(table, tmp_path):
    plain, _ = _train(table, tmp_path / "a.pt", variant="gate", steps=2)
    recomputed, _ = _train(
        table, tmp_path / "b.pt", variant="gate", steps=2, grad_checkpointing=True
    )
    for (name, p), q in zip(
        plain.state_dict().items(), recomputed.state_dict().values(), strict=True
    ):
        assert torch.equal(p, q), name
    assert not recomputed.grad_checkpointing  # switched off again for the analyses


def test_trained_variant_is_a_model_cache_the_diagnostics_read(table, tmp_path):
    path = tmp_path / "images.parquet"
    table.to_parquet(path)
    settings = {
        **SETTINGS,
        "checkpoints": str(tmp_path / "checkpoints"),
        "data": {
            **SETTINGS["data"],
            "procedural": {**SETTINGS["data"]["procedural"], "file": str(path)},
        },
    }
    encoder, curve, manifest = stage.train_variant(settings, "gate-registers", 0, table, "cpu")
    assert not list((tmp_path / "checkpoints").iterdir())  # removed once done
    assert manifest["registers"] == 2 and manifest["vit_config"]["gate"] == "elementwise"
    cache = tmp_path / "models" / manifest["name"]
    write_cache(cache, encoder, manifest)
    model, loaded = load_model(cache)
    pixels = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        assert torch.equal(model.forward_features(pixels), encoder.forward_features(pixels))
    data = {"images": {"source": "bundled", "imagenet_val": "", "n_images": 3, "seed": 0}}
    inputs = model_inputs(loaded, cache, data)
    diagnostic = images.arrays(table, "diagnostic")[0][:3]
    assert [np.frombuffer(p, np.uint8).tobytes() for p in inputs.pixels] == [
        d.tobytes() for d in diagnostic
    ]
    (batch, samples), *_ = batches(inputs, loaded, 4, "cpu")
    assert batch["pixel_values"].shape == (3, 3, 16, 16) and list(samples) == [0, 1, 2]
    result = stage.probe_model(settings, model, 0, table, "cpu")
    assert list(result.metric) == ["top1", "top1", "miou", "miou"]
    assert list(result.labels) == ["true", "permuted"] * 2  # each probe and its null
    assert result.value.between(0, 100).all() and (result[result.metric == "miou"].value <= 1).all()
