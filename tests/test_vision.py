"""Vision (mitigation stage): SIGReg, the ViT variants, procedural images, datasets, probes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image

from sinkscope.extract import Extractor
from sinkscope.models.vit import HeadwiseGate
from sinkscope.vision import datasets, images, norms, probes, sigreg
from sinkscope.vision.models import ViTConfig, build
from sinkscope.vision.variants import VARIANTS, trained_models

ARCH = {
    "image_size": 16,
    "patch_size": 4,
    "embed_dim": 16,
    "depth": 2,
    "num_heads": 2,
    "mlp_ratio": 2.0,
    "registers": 3,
}


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: see conftest


def _vit(variant: str, seed: int = 0):
    return build(ViTConfig.of_variant(variant, ARCH), seed).eval()


# --- SIGReg -----------------------------------------------------------------------------------


def _sigreg(z: torch.Tensor, seed: int = 0, slices: int = 128) -> float:
    gen = torch.Generator().manual_seed(seed)
    return sigreg.sigreg(z, sigreg.random_slices(z.shape[1], slices, gen), sigreg.knots()).item()


def test_sigreg_gaussian_matches_the_null_mean_and_is_small_against_collapse():
    gen = torch.Generator().manual_seed(1)
    t = torch.linspace(-5, 5, 10001)
    null_mean = torch.trapezoid((1 - torch.exp(-(t**2))) * torch.exp(-(t**2) / 2), t).item()
    values = [_sigreg(torch.randn(512, 32, generator=gen), seed) for seed in range(20)]
    assert np.mean(values) == pytest.approx(null_mean, rel=0.1)  # ~1.06 whatever N
    collapsed = _sigreg(torch.randn(1, 32, generator=gen).expand(512, 32))
    low_rank = torch.randn(512, 2, generator=gen) @ torch.randn(2, 32, generator=gen)
    low_rank = low_rank / low_rank.std(0)  # unit variance per dimension, rank 2
    assert collapsed > 100 * np.mean(values)
    assert _sigreg(low_rank) > 10 * np.mean(values)
    assert _sigreg(3 * torch.randn(512, 32, generator=gen)) > 10 * np.mean(values)  # wrong scale


def test_sigreg_is_invariant_to_the_sample_order():
    gen = torch.Generator().manual_seed(2)
    z = torch.randn(256, 16, generator=gen) * 0.7 + 0.2
    shuffled = z[torch.randperm(256, generator=gen)]
    assert _sigreg(shuffled) == pytest.approx(_sigreg(z), rel=1e-5)


def test_epps_pulley_of_a_point_mass_at_zero_is_the_closed_form():
    t = sigreg.knots(2001, 5.0)
    stat = sigreg.epps_pulley(torch.zeros(10, 1), t)  # phi_N = 1: N * int (1 - g)^2 g dt
    expected = 10 * np.sqrt(2 * np.pi) * (1 - 2 / np.sqrt(2) + 1 / np.sqrt(3))
    assert stat.item() == pytest.approx(expected, rel=1e-4)


# --- ViT variants -----------------------------------------------------------------------------


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_variant_shapes_and_patch_tokens(variant):
    model = _vit(variant)
    registers = ARCH["registers"] if VARIANTS[variant][0] else 0
    pixels = torch.randn(2, 3, 16, 16)
    tokens = model.forward_features(pixels)
    assert tokens.shape == (2, 1 + registers + 16, 16)
    assert model.num_prefix_tokens == 1 + registers
    assert torch.equal(model.patch_tokens(tokens), tokens[:, 1 + registers :])
    assert model.forward_features(torch.randn(2, 3, 8, 8)).shape == (2, 1 + registers + 4, 16)
    assert model.embedding(pixels).shape == (2, 16)


def test_registers_sit_after_cls_without_positional_embedding():
    model = _vit("registers")
    with torch.no_grad():
        patches = model.patch_embed(torch.randn(2, 3, 16, 16))
        sequence = model._pos_embed(patches)
    registers = ARCH["registers"]
    assert torch.equal(sequence[:, 0], model.cls_token[0].expand(2, -1))
    assert torch.equal(sequence[:, 1 : 1 + registers], model.reg_token.expand(2, -1, -1))
    expected = patches.reshape(2, 16, 16) + model.pos_embed
    assert torch.equal(sequence[:, 1 + registers :], expected)
    assert model.pos_embed.shape[1] == 16  # patches only


@pytest.mark.parametrize("variant", ["gate", "headgate"])
def test_a_gate_of_all_ones_reproduces_the_ungated_model(variant):
    plain, gated = _vit("baseline", seed=3), _vit(variant, seed=4)
    missing = gated.load_state_dict(plain.state_dict(), strict=False).missing_keys
    assert missing and all(".attn.gate." in key for key in missing)
    pixels = torch.randn(3, 3, 16, 16)
    with torch.no_grad():
        for block in gated.blocks:
            linear = block.attn.gate.linear if variant == "headgate" else block.attn.gate
            linear.weight.zero_()
            linear.bias.fill_(100.0)  # sigmoid(100) == 1 in float32
        assert torch.equal(gated.forward_features(pixels), plain.forward_features(pixels))
        for block in gated.blocks:
            (block.attn.gate.linear if variant == "headgate" else block.attn.gate).bias.zero_()
        assert not torch.allclose(gated.forward_features(pixels), plain.forward_features(pixels))


def test_headwise_gate_is_one_value_per_head():
    gate = HeadwiseGate(dim=8, num_heads=2, head_dim=4)
    out = gate(torch.randn(3, 5, 8))
    assert out.shape == (3, 5, 8)
    assert torch.equal(out[..., :4], out[..., :1].expand(-1, -1, 4))
    assert torch.equal(out[..., 4:], out[..., 4:5].expand(-1, -1, 4))


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_extractor_reads_every_variant_with_the_pre_gate_update(variant):
    model = _vit(variant)
    pixels = torch.randn(2, 3, 16, 16)
    heads, layers = Extractor(model).run({"pixel_values": pixels}, np.array([0, 1]))
    length = model.num_prefix_tokens + 16
    assert len(heads) == 2 * ARCH["depth"] * ARCH["num_heads"] and len(layers) == 2 * ARCH["depth"]
    assert heads.sink.between(0, length - 1).all()
    with torch.no_grad():  # layer 1 from explicit tensors: U = A V W_O^h, no gate
        block = model.blocks[1]
        hidden = model.blocks[0](model._pos_embed(model.patch_embed(pixels)))
        qkv = block.attn.qkv(block.norm1(hidden)).reshape(2, length, 3, 2, 8).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        probs = ((q @ k.transpose(-1, -2)) * block.attn.scale).softmax(-1)
        w_out = block.attn.proj.weight.T.reshape(2, 8, 16).double()
        update = probs.double() @ (v.double() @ w_out)
        sigma1 = torch.linalg.svdvals(update)[..., 0].reshape(-1).numpy()
    measured = heads[heads.layer == 1].sort_values(["sample", "head"]).sigma1.to_numpy()
    np.testing.assert_allclose(measured, sigma1, rtol=1e-4)


def test_trained_model_names_and_registers():
    settings = {"variants": ["baseline", "gate-registers"], "n_seeds": 2, "arch": ARCH}
    found = trained_models(settings)
    assert list(found) == [
        "vit-baseline-s0",
        "vit-baseline-s1",
        "vit-gate-registers-s0",
        "vit-gate-registers-s1",
    ]
    assert found["vit-gate-registers-s1"] == {
        "variant": "gate-registers",
        "seed": 1,
        "modality": "image",
        "registers": 3,
    }
    assert found["vit-baseline-s0"]["registers"] == 0


# --- procedural images and datasets -----------------------------------------------------------


def test_procedural_images_are_seeded_exact_and_split_independent():
    counts = {"train": 12, "test": 4, "diagnostic": 3}
    table = images.generate(24, 4, counts, seed=5)
    again = images.generate(24, 4, counts, seed=5)
    assert table.pixels.equals(again.pixels) and table["mask"].equals(again["mask"])
    other = images.generate(24, 4, counts, seed=6)
    assert not table.pixels.equals(other.pixels)
    bigger = images.generate(24, 4, {**counts, "train": 20}, seed=5)
    test_images = table[table.split == "test"].pixels.tolist()
    assert bigger[bigger.split == "test"].pixels.tolist() == test_images
    pixels, masks, labels = images.arrays(table, "train")
    assert pixels.shape == (12, 24, 24, 3) and masks.shape == (12, 24, 24)
    assert masks.max() <= 4 and (masks == 0).mean() > 0.3  # background is the largest region
    for mask, label in zip(masks, labels, strict=True):  # image class: most visible object pixels
        assert label == np.bincount(mask.ravel(), minlength=5)[1:].argmax()
    assert len(np.unique(labels)) > 1


def test_shapes_are_where_the_masks_say():
    rng = np.random.default_rng(0)
    u, v = np.meshgrid(np.linspace(-1.2, 1.2, 121), np.linspace(-1.2, 1.2, 121))
    areas = {shape: images._inside(shape, u, v).mean() * 2.4**2 for shape in images.SHAPES}
    assert areas["disc"] == pytest.approx(np.pi, rel=0.02)
    assert areas["square"] == pytest.approx(1.6**2, rel=0.03)
    assert areas["ring"] == pytest.approx(np.pi * (1 - 0.55**2), rel=0.03)
    assert areas["triangle"] == pytest.approx(3 * np.sqrt(3) / 4, rel=0.03)
    assert len(set(np.round(list(areas.values()), 2))) == len(images.SHAPES)
    assert rng is not None


def test_step_order_resumes_where_it_stopped_and_walks_epochs():
    full = list(datasets.StepOrder(10, 3, seed=4, start=0, stop=9))
    resumed = list(datasets.StepOrder(10, 3, seed=4, start=5, stop=9))
    assert all(np.array_equal(a, b) for a, b in zip(full[5:], resumed, strict=True))
    assert all(np.array_equal(datasets.step_indices(10, 3, 4, s), full[s]) for s in range(9))
    epoch = np.concatenate(full[:3])  # 3 steps per epoch: distinct images
    assert len(np.unique(epoch)) == 9
    assert not np.array_equal(full[0], full[3])


def _write(path, array):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path)


def test_paper_scale_readers_on_small_folders(tmp_path):
    rng = np.random.default_rng(0)
    photo = rng.integers(0, 255, (20, 30, 3), dtype=np.uint8)
    for cls in ("n01", "n02"):
        for i in range(2):
            _write(tmp_path / "imagenet" / cls / f"{i}.png", photo)
    split = datasets.image_folder(tmp_path / "imagenet", "key", 16)
    assert list(split.labels) == [0, 0, 1, 1] and split.image(0).shape == (16, 16, 3)
    ade = tmp_path / "ade"
    for i in range(2):
        _write(ade / "images" / "validation" / f"a{i}.jpg", photo)
        label = np.full((20, 30), [0, 7][i], np.uint8)  # raw 0: 'other', ignored; 7: class 6
        _write(ade / "annotations" / "validation" / f"a{i}.png", label)
    masks = datasets.ade20k(ade, "key", "val", 16)
    assert masks.mask(0).max() == datasets.IGNORE and set(np.unique(masks.mask(1))) == {6}
    voc = tmp_path / "voc"
    (voc / "ImageSets" / "Segmentation").mkdir(parents=True)
    (voc / "ImageSets" / "Segmentation" / "val.txt").write_text("x1\n")
    _write(voc / "JPEGImages" / "x1.jpg", photo)
    label = np.zeros((20, 30), np.uint8)
    label[:, 15:] = 255
    _write(voc / "SegmentationClass" / "x1.png", label)
    voc_split = datasets.voc(voc, "key", "val", 16)
    images_, labels_, masks_ = next(datasets.batches(voc_split, 4, with_masks=True))
    assert images_.shape == (1, 3, 16, 16) and set(np.unique(masks_)) == {0, 255}


def test_missing_dataset_path_names_its_key(tmp_path):
    data = {
        "source": "imagenet",
        "imagenet": {"train": str(tmp_path / "nowhere"), "val": ""},
        "segmentation": ["ade20k"],
        "ade20k": "",
    }
    with pytest.raises(datasets.MissingData, match="mitigation.data.imagenet.train"):
        datasets.pretraining(data, None, 32)
    (tmp_path / "nowhere" / "n01").mkdir(parents=True)
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(tmp_path / "nowhere" / "n01" / "a.png")
    with pytest.raises(datasets.MissingData, match="mitigation.data.imagenet.val"):
        datasets.probe_tasks(data, None, 32)


# --- probes and norms -------------------------------------------------------------------------


def test_confusion_and_iou_known_answer():
    target = torch.tensor([[0, 0, 1, 1], [2, 2, 255, 255]])
    predicted = torch.tensor([[0, 1, 1, 1], [2, 0, 2, 2]])
    matrix = probes.confusion(predicted, target, 4)
    assert matrix.sum() == 6 and matrix[0, 1] == 1 and matrix[2, 0] == 1
    iou = probes.class_iou(matrix)
    np.testing.assert_allclose(iou[:3], [1 / 3, 2 / 3, 1 / 2])
    assert np.isnan(iou[3])  # absent class: left out of the mean


def test_linear_probes_separate_separable_features():
    gen = torch.Generator().manual_seed(0)
    cfg = probes.ProbeConfig(
        epochs=40, lr=0.05, weight_decay=0.0, batch_size=32, max_train=0, max_test=0
    )
    centres = torch.randn(3, 8, generator=gen) * 4

    def make(n):
        labels = torch.randint(0, 3, (n,), generator=gen)
        grid = torch.randint(0, 3, (n, 2, 2), generator=gen)
        patches = centres[grid] + 0.1 * torch.randn(n, 2, 2, 8, generator=gen)
        masks = grid.repeat_interleave(4, 1).repeat_interleave(4, 2).to(torch.uint8)
        cls = centres[labels] + 0.1 * torch.randn(n, 8, generator=gen)
        return probes.Features(cls, patches, labels, masks)

    train, test = make(32), make(16)
    assert probes.classification(train, test, 3, cfg, 0, "cpu") == 100.0
    miou, iou = probes.segmentation(train, test, 3, cfg, 0, "cpu")
    assert miou > 0.8 and len(iou) == 3  # bilinear upsampling blurs patch borders a little


def test_permuted_labels_move_classes_and_masks_together():
    """The null's training labels: image i gets the class and mask of image order[i] for one
    seeded permutation; the features stay where they are."""
    cls, patches = torch.randn(6, 4), torch.randn(6, 2, 2, 4)
    labels = torch.arange(6)
    masks = labels[:, None, None].repeat(1, 3, 3).to(torch.uint8)
    train = probes.Features(cls, patches, labels, masks)
    shuffled = probes.permuted(train, seed=5)
    order = np.random.default_rng(5).permutation(6)
    assert shuffled.labels.tolist() == order.tolist()
    assert (shuffled.masks[:, 0, 0].long() == shuffled.labels).all()  # the same permutation
    assert shuffled.cls is cls and shuffled.patches is patches
    assert probes.permuted(train, seed=5).labels.tolist() == order.tolist()  # seeded
    assert probes.permuted(probes.Features(cls, None, labels, None), 5).masks is None


def test_probe_features_drop_cls_and_registers():
    model = _vit("registers")
    table = images.generate(16, 3, {"train": 4, "test": 0, "diagnostic": 0}, seed=0)
    split = datasets.procedural(table, "train")
    cfg = probes.ProbeConfig(
        epochs=1, lr=0.1, weight_decay=0, batch_size=3, max_train=0, max_test=0
    )
    prep = {"mean": [0.5] * 3, "std": [0.25] * 3}
    found = probes.features(model, split, prep, cfg, "cpu", dense=True)
    assert found.patches.shape == (4, 4, 4, 16) and found.masks.shape == (4, 16, 16)
    pixels = (
        torch.from_numpy(np.array(split.pixels)).permute(0, 3, 1, 2).float() / 255 - 0.5
    ) / 0.25
    with torch.no_grad():
        tokens = model.forward_features(pixels)
    torch.testing.assert_close(found.patches.reshape(4, 16, 16), tokens[:, 1 + ARCH["registers"] :])
    torch.testing.assert_close(found.cls, tokens[:, 0])


def test_output_norms_and_cls_maps():
    model = _vit("registers")
    pixels = torch.randn(3, 3, 16, 16)
    table, maps = norms.output_norms(model, [({"pixel_values": pixels}, np.arange(3))], 3, 2)
    assert len(table) == 3 * 20 and (table.kind == "register").sum() == 9
    assert (table.kind == "cls").sum() == 3 and (table.kind == "patch").sum() == 48
    with torch.no_grad():
        sequence = model._pos_embed(model.patch_embed(pixels))
        for block in model.blocks:
            sequence = block(sequence)
    direct = sequence.double().norm(dim=-1).reshape(-1).numpy()
    np.testing.assert_allclose(table.sort_values(["sample", "token"]).norm, direct, rtol=1e-6)
    assert list(maps["sample"]) == [0, 1] and (maps.side == 4).all()
    for row in maps.itertuples():
        assert 0 < row.weights.sum() + row.register_mass <= 1 + 1e-6  # the rest: CLS itself
    patch = table[table.kind == "patch"].sort_values(["sample", "token"])
    expected = norms.patch_pixel_std(pixels, 16).reshape(-1).numpy()
    np.testing.assert_allclose(patch.pixel_std, expected)
    assert table[table.kind != "patch"].pixel_std.isna().all()


def test_patch_pixel_std_known_answer():
    """A 2 x 2 grid of 4-pixel patches: only the top-right one varies, in one channel."""
    pixels = torch.zeros(1, 3, 8, 8)
    pixels[0, 1, 0:4, 4:8] = torch.tensor([0.0, 3.0]).repeat(8)[:16].view(4, 4)
    found = norms.patch_pixel_std(pixels, 4)
    values = np.r_[np.zeros(32), np.tile([0.0, 3.0], 8)]  # the patch's 3 x 4 x 4 pixels
    np.testing.assert_allclose(found.numpy(), [[0.0, values.std(), 0.0, 0.0]])
    with pytest.raises(ValueError, match="square grid"):
        norms.patch_pixel_std(pixels, 3)


def test_token_kinds():
    assert list(norms.token_kind(5, 2)) == ["cls", "register", "register", "patch", "patch"]


def test_procedural_dataset_builds_the_probe_tasks():
    table = images.generate(16, 3, {"train": 5, "test": 2, "diagnostic": 1}, seed=0)
    data = {"source": "procedural", "procedural": {"classes": 3}, "segmentation": ["procedural"]}
    tasks = datasets.probe_tasks(data, table, 16)
    assert [(t.name, t.task, t.n_classes) for t in tasks] == [
        ("procedural", "classification", 3),
        ("procedural", "segmentation", 4),
    ]
    train, held_out, classes = datasets.pretraining(data, table, 16)
    assert (len(train), len(held_out), classes) == (5, 2, 3)
    assert isinstance(table, pd.DataFrame)
