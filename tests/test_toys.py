"""Toys stage: the toy transformer, its training loop and the task generators."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats

from sinkscope import metrics
from sinkscope.config import load_config
from sinkscope.exhibits import u1, u2
from sinkscope.exhibits.u1 import model_config as u1_model_config
from sinkscope.toys.analysis import nop_mse_floor
from sinkscope.toys.curves import (
    CONVERGED_FALL,
    convergence,
    fall_over_training,
    late_change,
    late_fall,
    late_slope,
    solved,
)
from sinkscope.toys.interventions import intervention
from sinkscope.toys.model import ToyConfig, build
from sinkscope.toys.tasks import BroadcastTask, NopTask, SwitchTask
from sinkscope.toys.train import Seeds, TrainConfig, fit, train

REPO = Path(__file__).resolve().parents[1]
SMALL = ToyConfig(width=8, layers=2, heads=2, max_len=6, bos=True, pos_emb=True, mlp=True)


def _x(batch: int = 3, length: int = 6, width: int = 8, seed: int = 0) -> torch.Tensor:
    return torch.randn(batch, length, width, generator=torch.Generator().manual_seed(seed))


def test_attention_rows_sum_to_one_and_are_causal():
    model = build(SMALL, seed=0)
    _, records = model(_x(), record=True)
    assert len(records) == 2
    for rec in records:
        attn = rec["attn"]
        assert attn.shape == (3, 2, 7, 7)  # the BOS adds a position
        torch.testing.assert_close(attn.sum(-1), torch.ones(3, 2, 7))
        assert (attn.triu(1) == 0).all()


def test_later_tokens_do_not_change_earlier_outputs():
    model = build(SMALL, seed=0)
    x = _x()
    changed = x.clone()
    changed[:, 4:] += 5.0
    out, _ = model(x)
    out_changed, _ = model(changed)
    torch.testing.assert_close(out[:, :4], out_changed[:, :4])
    assert not torch.allclose(out[:, 4:], out_changed[:, 4:])


def test_bidirectional_model_sees_every_token():
    cfg = ToyConfig(width=8, layers=1, heads=1, max_len=6, bos=False, causal=False)
    _, records = build(cfg, seed=0)(_x(), record=True)
    assert (records[0]["attn"] > 0).all()


def test_hooks_add_up_to_the_attention_output():
    """Sum over heads of the per-head update A V W_O is the attention block's output."""
    cfg = ToyConfig(width=8, layers=1, heads=2, max_len=6, bos=True)
    model = build(cfg, seed=1)
    x = _x()
    out, records = model(x, record=True)
    rec = records[0]
    residual = rec["hidden"][:, 1:] + rec["update"].sum(1)[:, 1:].float()
    torch.testing.assert_close(out, residual, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(
        rec["values_out"], rec["values"] @ model.blocks[0].attn.per_head()["o"]
    )
    sigma = metrics.qk_spectrum(*(model.blocks[0].attn.per_head()[k] for k in "qk"))
    assert sigma.shape == (2, 8)


def test_init_seed_fixes_the_parameters():
    a, b, c = build(SMALL, 0), build(SMALL, 0), build(SMALL, 1)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))
    assert not torch.equal(a.bos, c.bos)


@pytest.mark.parametrize(
    "make",
    [
        lambda g: NopTask(8, 6, 0.0, 0.3, g),
        lambda g: BroadcastTask(8, 6, 1.0, g),
        lambda g: SwitchTask(8, 6, 0.5, "hard", g),
        lambda g: SwitchTask(8, 6, 0.5, "soft", g),
    ],
)
def test_task_generators_are_deterministic_under_their_seed(make):
    def draw(task_seed: int, data_seed: int):
        task = make(torch.Generator().manual_seed(task_seed))
        return task.sample(5, torch.Generator().manual_seed(data_seed))

    x1, y1, info1 = draw(0, 1)
    x2, y2, info2 = draw(0, 1)
    assert torch.equal(x1, x2) and torch.equal(y1, y2)
    assert all(torch.equal(info1[k], info2[k]) for k in info1)
    x3, y3, _ = draw(0, 2)
    assert not torch.equal(x3, x1)
    _, y4, _ = draw(5, 1)
    assert not torch.equal(y4, y1)


def test_task_targets_follow_their_definitions():
    gen = torch.Generator().manual_seed(0)
    nop = NopTask(8, 6, 0.5, 0.3, gen)
    x, y, info = nop.sample(64, torch.Generator().manual_seed(1))
    damped = info["damped"]
    torch.testing.assert_close(y[damped], 0.5 * x[damped])
    torch.testing.assert_close(y[~damped], x[~damped])
    assert torch.equal(damped, x @ nop.v > nop.lam)
    hard = SwitchTask(8, 6, 0.5, "hard", gen)
    x, y, info = hard.sample(16, torch.Generator().manual_seed(1))
    torch.testing.assert_close(y[info["off"]], x[info["off"]])
    assert (x[..., 0].abs() == hard.flag).all()
    bc = BroadcastTask(8, 6, 1.0, gen)
    x, y, info = bc.sample(4, torch.Generator().manual_seed(1))
    torch.testing.assert_close(bc.rot @ bc.rot.T, torch.eye(8), atol=1e-5, rtol=0)
    picked = x[torch.arange(4), info["jstar"]] @ bc.rot
    torch.testing.assert_close(y - x, picked[:, None].expand_as(x))


class Crashing:
    """A task whose sampler fails at its `after`-th call, as a killed job would stop."""

    def __init__(self, task, after: int):
        self.task, self.after, self.calls = task, after, 0

    def sample(self, batch, gen):
        self.calls += 1
        if self.calls == self.after:
            raise KeyboardInterrupt
        return self.task.sample(batch, gen)


def test_resume_is_bit_identical_to_an_uninterrupted_run(tmp_path):
    cfg = ToyConfig(width=8, layers=1, heads=1, max_len=6, bos=True, mlp=True)
    task = NopTask(8, 6, 0.0, 0.5, torch.Generator().manual_seed(3))
    tcfg = TrainConfig(steps=9, batch=4, warmup=3, eval_batch=8, log_every=2, checkpoint_every=3)
    seeds = Seeds(init=0, data=1, eval=2)
    full, full_curve = train(cfg, task, tcfg, seeds, tmp_path / "a.pt")
    with pytest.raises(KeyboardInterrupt):  # 1 evaluation batch, then killed in step 5
        train(cfg, Crashing(task, after=6), tcfg, seeds, tmp_path / "b.pt")
    assert torch.load(tmp_path / "b.pt", weights_only=True)["step"] == 3
    resumed, resumed_curve = train(cfg, task, tcfg, seeds, tmp_path / "b.pt")
    for (name, p), q in zip(full.state_dict().items(), resumed.state_dict().values(), strict=True):
        assert torch.equal(p, q), name
    assert full_curve.equals(resumed_curve)
    other, _ = train(cfg, task, tcfg, Seeds(init=0, data=9, eval=2), tmp_path / "c.pt")
    assert not torch.equal(other.bos, full.bos)


def test_fit_leaves_no_checkpoint(tmp_path):
    cfg = ToyConfig(width=8, layers=1, heads=1, max_len=6)
    task = NopTask(8, 6, 0.0, 0.5, torch.Generator().manual_seed(3))
    _, curve = fit(
        cfg,
        task,
        TrainConfig(steps=3, batch=2, eval_batch=4, log_every=1),
        Seeds(0, 1, 2),
        tmp_path,
        desc="t",
    )
    assert list(curve.step) == [1, 2, 3] and not list(tmp_path.iterdir())
    assert set(curve.precision) == {"float32"}  # the default, wherever bfloat16 is native


def test_replicate_seeds_shift_every_seed():
    seeds = Seeds(init=0, data=1, eval=2, task=3)
    assert seeds.replicate(0) == seeds
    assert seeds.replicate(2) == Seeds(init=2000, data=2001, eval=2002, task=2003)


def test_interventions_on_the_sink():
    """The reference's interventions: donors come from the next sequence of the batch."""
    attn = torch.tensor([[1.0, 0.0, 0.0], [0.8, 0.2, 0.0], [0.5, 0.25, 0.25]])[None, None]
    attn = attn.expand(2, 1, 3, 3)
    values = torch.arange(24.0).reshape(2, 1, 3, 4)
    a, v = intervention("zero sink value")(0, attn, values)
    assert (v[..., 0, :] == 0).all() and torch.equal(a, attn)
    assert torch.equal(v[..., 1:, :], values[..., 1:, :])
    _, v = intervention("donor sink value")(0, attn, values)
    assert torch.equal(v[0, :, 0], values[1, :, 0]) and torch.equal(v[1, :, 0], values[0, :, 0])
    _, v = intervention("donor non-sink value")(0, attn, values)
    assert torch.equal(v[0, :, 0], values[1, :, 1]) and torch.equal(v[1, :, 0], values[0, :, 1])
    a, _ = intervention("redirect sink attention")(0, attn, values)
    expected = torch.tensor([[0.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.5, 0.5]])
    torch.testing.assert_close(a[0, 0], expected)
    assert intervention("baseline") is None
    with pytest.raises(ValueError):
        intervention("no such thing")


def test_u1_model_is_the_reference_architecture():
    """No causal mask, LayerNorm with bias, bias-free projections; the BOS and positional
    vectors reach the attention input only, so a head that adds nothing returns the tokens."""
    cfg = u1_model_config({"width": 8, "length": 5})
    model = build(cfg, seed=0)
    ln, attn = model.blocks[0].ln1, model.blocks[0].attn
    assert ln.bias is not None and attn.q.bias is None and not attn.causal
    assert model.pos.shape == (6, 8) and model.bos.abs().max() < 0.2  # init std 0.02
    x = _x(length=5)
    _, records = model(x, record=True)
    assert (records[0]["attn"] > 0).all()  # every query sees every key
    assert (records[0]["hidden"][:, 0] == 0).all()  # the sink token's input is zero
    with torch.no_grad():
        attn.o.weight.zero_()
    out, _ = model(x)
    assert torch.equal(out, x)


def test_switch_tokens_lie_in_a_half_space_and_are_layernorm_invariant():
    task = SwitchTask(16, 6, 0.5, "hard", torch.Generator().manual_seed(0), shift=1.5)
    x, _, info = task.sample(32, torch.Generator().manual_seed(1))
    torch.testing.assert_close(x.mean(-1), torch.zeros(32, 6), atol=1e-6, rtol=0)
    torch.testing.assert_close(x.var(-1, unbiased=False), torch.ones(32, 6))
    assert (x[..., 1] == -1.5).all()
    assert torch.equal(x[..., 0] < 0, info["off"])
    torch.testing.assert_close(torch.nn.functional.layer_norm(x, (16,)), x, atol=1e-4, rtol=0)
    with pytest.raises(ValueError):
        SwitchTask(4, 6, 0.5, "hard", torch.Generator(), flag=2.0, shift=1.0)


def test_a_hand_built_sink_realises_the_hard_switch():
    """The hard switch is realisable by a sink: keys read the common coordinate, queries the
    flag, the BOS sits on the other side of the half-space and carries no value."""
    d, length = 16, 8
    task = SwitchTask(d, length, 0.5, "hard", torch.Generator().manual_seed(0))
    model = build(ToyConfig(width=d, layers=1, heads=1, max_len=length, bos=True), seed=0)
    attn = model.blocks[0].attn
    scale = 20.0 * d**0.5  # undoes the 1 / sqrt(d_head) of the scores
    keep = torch.eye(d)
    keep[0, 0] = keep[1, 1] = 0.0
    with torch.no_grad():
        model.bos.copy_(torch.zeros(d))
        model.bos[0], model.bos[1] = -1.0, 1.0  # zero mean: LayerNorm keeps its direction
        for lin in (attn.q, attn.k):
            lin.weight.zero_()
        attn.k.weight[0, 1] = 1.0  # key: the common coordinate
        attn.q.weight[0, 0], attn.q.weight[0, 1] = -scale, scale  # query: off > 0 > on
        attn.v.weight.copy_(keep)
        attn.o.weight.copy_(task.rot.T)
    x, y, info = task.sample(64, torch.Generator().manual_seed(1))
    out, records = model(x, record=True)
    assert torch.nn.functional.mse_loss(out, y) < 1e-6
    bos_mass = records[0]["attn"][:, 0, 1:, 0]
    assert bos_mass[info["off"]].min() > 0.999 and bos_mass[~info["off"]].max() < 1e-3


def test_late_slope_fits_the_last_fifth_of_training():
    step = np.arange(0, 1001, 100)
    loss = np.where(step < 800, 1.0, 1.0 - 0.002 * (step - 800))  # flat, then falls after 80 %
    curve = pd.DataFrame({"step": step, "eval_loss": loss})
    first, start, end, slope = late_slope(curve)
    assert (first, start, end) == (800, 1.0, pytest.approx(0.6))
    assert slope == pytest.approx(-2.0)  # per 1000 steps
    assert late_change(curve) == (
        "1 at step 800 -> 0.6 at step 1000, slope -2 per 1000 steps "
        "(fitted fall over the window 66.7% of the end loss: not converged)"
    )
    assert np.isnan(late_slope(curve.iloc[:1])[3])
    assert late_change(curve.iloc[:1]).endswith("(one logged step: convergence not measured)")


def test_late_change_calls_a_flat_end_converged():
    step = np.arange(0, 1001, 100)
    loss = np.where(step < 800, 1.0 - 0.001 * step, 0.2 - 0.00001 * (step - 800))
    curve = pd.DataFrame({"step": step, "eval_loss": loss})
    assert late_change(curve).endswith("of the end loss: converged)")  # 1 % fall over 200 steps


def test_convergence_control_over_runs():
    step = np.arange(0, 1001, 100)
    falling = np.where(step < 800, 1.0, 1.0 - 0.002 * (step - 800))  # 66.7 % fall: not converged
    flat = np.where(step < 800, 1.0 - 0.001 * step, 0.2 - 0.00001 * (step - 800))  # 1 %
    curves = pd.concat(
        pd.DataFrame({"step": step, "eval_loss": loss, "seed": seed, "precision": "float32"})
        for seed, loss in enumerate([falling, flat])
    )
    value, note, interval = convergence(curves, ["seed"])
    # judged at steps 800, 900 and 1000; the widest interval is at 800, where the run that
    # levels off at 800 is still falling (600-800) and the other has not yet started to
    at_800 = [100 * late_fall(c[c.step <= 800]) for _, c in curves.groupby("seed")]
    assert at_800 == pytest.approx([0.0, 100.0], abs=1e-9)
    assert value == pytest.approx(np.mean(at_800))
    assert note.endswith("reported: step 800, per run: -0.0, 100.0; training steps in float32")
    assert "as if training had ended at 80%, 90%, 100% of its steps" in note
    assert interval.basis == "seeds" and interval.n == 2 and interval.high > 5
    value, _, interval = convergence(curves[curves.seed == 1], ["seed"], "replicates")
    assert value == pytest.approx(100.0)  # one run: its worst end (800); it decides nothing
    assert (interval.low, interval.high, interval.basis) == (-np.inf, np.inf, "replicates")


def test_a_curve_flat_by_chance_at_its_end_is_not_converged():
    # every run falls steadily and pauses over its last fifth only: flat at the end, falling
    # as seen from 80 % and 90 % of training
    step = np.arange(0, 1001, 100)
    curves = pd.concat(
        pd.DataFrame(
            {
                "step": step,
                "eval_loss": np.where(step <= 800, 1.0 - 0.0008 * step, 0.36) + jitter,
                "seed": seed,
                "precision": "float32",
            }
        )
        for seed, jitter in enumerate([0.0, 0.001, -0.001])
    )
    end_only = [100 * late_fall(curve) for _, curve in curves.groupby("seed")]
    assert max(end_only) < CONVERGED_FALL * 100  # judged at the end alone: converged
    value, note, interval = convergence(curves, ["seed"])
    assert interval.low > CONVERGED_FALL * 100  # judged at three ends: not converged
    assert "reported: step 800" in note and "step 1000: 0.0 [-0.0, 0.0]" in note
    flat = curves.assign(eval_loss=0.36 + 0.001 * curves.seed)
    value, note, interval = convergence(flat, ["seed"])  # flat at every end: converged
    assert interval.high < CONVERGED_FALL * 100 and value == pytest.approx(0.0, abs=1e-9)


def test_the_convergence_control_over_training_ends_at_each_logged_step():
    # seed 0 falls linearly to step 500 and is flat after; seed 1 is flat throughout
    step = np.arange(0, 1001, 100)
    falling = np.maximum(1.0 - 0.0015 * step, 0.25)
    curves = pd.concat(
        pd.DataFrame({"step": step, "eval_loss": loss, "seed": seed})
        for seed, loss in enumerate([falling, np.full(len(step), 0.5)])
    )
    found = fall_over_training(curves, "seed", min_points=3)
    assert sorted(found.step.unique()) == list(range(200, 1001, 100))
    per_seed = found[found.run != "mean"].pivot(index="step", columns="run", values="late_fall")
    for end in (200, 600, 1000):  # as late_fall on the curve cut at `end`
        cut = curves[curves.step <= end]
        for seed in (0, 1):
            expected = 100 * late_fall(cut[cut.seed == seed])
            assert per_seed.loc[end, str(seed)] == pytest.approx(expected)
    assert per_seed.loc[200, "0"] == pytest.approx(100 * 0.15 / 0.7)  # still falling
    assert per_seed.loc[1000, "0"] == pytest.approx(0.0, abs=1e-9)
    assert per_seed["1"].to_numpy() == pytest.approx(0.0, abs=1e-9)
    mean = found[found.run == "mean"].set_index("step")
    assert mean.late_fall.to_numpy() == pytest.approx(per_seed.mean(axis=1).to_numpy())
    assert (mean.low <= mean.late_fall).all() and (mean.late_fall <= mean.high).all()


def test_solved_control_over_runs():
    runs = pd.DataFrame({"mse": [0.0005, 0.003], "null_mse": [0.1, 0.2]})  # 0.5 % and 1.5 %
    value, note, interval = solved(runs)
    assert value == pytest.approx(1.0)
    assert note.endswith("per run: 0.50, 1.50; at most 1% in 1 of 2 runs")
    assert interval.basis == "runs" and interval.n == 2 and interval.high > 1
    value, _, interval = solved(runs.iloc[:1])
    assert value == pytest.approx(0.5) and (interval.low, interval.high) == (-np.inf, np.inf)


def _nop_task(v: torch.Tensor, gamma: float = 0.0) -> NopTask:
    task = NopTask(v.numel(), 4, gamma, 0.5, torch.Generator().manual_seed(0))
    task.v = v / v.norm()
    return task


def test_nop_floor_of_a_gate_that_layernorm_keeps():
    """A gate direction orthogonal to the all-ones vector is decided by the normalised token:
    the floor is what LayerNorm drops from the damped half, p (1 + Var r) / d."""
    d = 16
    v = torch.zeros(d, dtype=torch.float64)
    v[0], v[1] = 1.0, -1.0
    expected = 0.5 * (1 + stats.chi(d - 1).var()) / d
    assert nop_mse_floor(_nop_task(v)) == pytest.approx(expected, rel=1e-2)
    assert nop_mse_floor(_nop_task(v, gamma=0.5)) == pytest.approx(expected / 4, rel=1e-2)


def test_nop_floor_grows_with_the_gate_direction_along_the_mean():
    d = 16
    orthogonal_gate = torch.zeros(d, dtype=torch.float64)
    orthogonal_gate[0], orthogonal_gate[1] = 1.0, -1.0
    tilted = orthogonal_gate.clone()
    tilted[2:] = 0.1  # a component along the all-ones direction, which LayerNorm removes
    low, high = nop_mse_floor(_nop_task(orthogonal_gate)), nop_mse_floor(_nop_task(tilted))
    assert high > low * 1.2
    assert nop_mse_floor(_nop_task(-tilted)) == pytest.approx(high, rel=1e-2)


REFERENCE_RECIPES = {  # docs/exhibit-reference.md; U1 and U2: the Unifying View reference code's
    "U1": {
        "recipe": {"width": 64, "length": 31, "gamma": 0.0, "p": 0.5},
        "train": {"batch": 1024, "lr": 3e-3, "weight_decay": 1e-4, "warmup": 0, "clip": None},
        "model": {"layers": 1, "heads": 1, "causal": False, "pos_emb": True, "bos": True},
        "model_off": ("bias", "mlp"),
    },
    "U2": {
        "recipe": {"width": 64, "length": 32, "alpha": 1.0, "bias": True},
        "train": {"batch": 1024, "lr": 5e-4, "weight_decay": 1e-4, "warmup": 0, "clip": None},
        "model": {"layers": 2, "heads": 1, "causal": False, "pos_emb": True, "mlp": True},
        "model_off": ("bias", "bos"),
    },
}


@pytest.mark.parametrize("toy", sorted(REFERENCE_RECIPES))
def test_default_recipe_is_the_reference(toy, default_config):
    """AdamW with PyTorch's default betas at the reference's settings; fewer steps at the
    default only, the reference's 30 000 at paper scale."""
    reference = REFERENCE_RECIPES[toy]
    recipe = default_config["toys"][toy]
    assert {k: recipe[k] for k in reference["recipe"]} == reference["recipe"]
    tcfg = TrainConfig(**recipe["train"])
    assert {k: getattr(tcfg, k) for k in reference["train"]} == reference["train"]
    assert tuple(tcfg.betas) == (0.9, 0.999)
    model = {"U1": u1, "U2": u2}[toy].model_config(recipe).asdict()
    assert {k: model[k] for k in reference["model"]} == reference["model"]
    assert not any(model[k] for k in reference["model_off"])
    assert model["norm_bias"]  # LayerNorm with gain and bias
    paper = load_config([REPO / "config" / "config.yaml", REPO / "config" / "paper.yaml"])
    assert paper["toys"][toy]["train"]["steps"] == 30000
    assert paper["toys"][toy]["train"]["batch"] == 1024
