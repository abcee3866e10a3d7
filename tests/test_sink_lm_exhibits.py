"""The small LMs pretrained with sink variants (S6, S7): sink-logit attention, training
determinism, their evaluation over held-out windows, and the S6 / S7 claims on crafted tables
with the measured value clearly on each side of the catalogue's threshold."""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from matplotlib.figure import Figure

from sinkscope.exhibits import s6, s7
from sinkscope.exhibits.registry import EXHIBITS
from sinkscope.scorecard import NOT_TESTABLE, judge, load_claims
from sinkscope.scorecard import verdict as scorecard_verdict
from sinkscope.streaming.pretrain import (
    build_model,
    corpus_bytes,
    load,
    load_untrained,
    save,
    sink_logit_attention,
    train,
)
from sinkscope.streaming.sink_eval import (
    attention_mass,
    eval_windows,
    first_token_mass,
    streaming_ppl,
)

ARCH = {"d_model": 16, "n_layers": 1, "n_heads": 2, "context": 16}
CHECKS = {claim["id"]: claim["check"] for claim in load_claims()}
CONTROLS = {  # the checks of the controls an exhibit measures
    c["measure"]: c["check"]
    for claim in load_claims()
    for c in claim.get("preconditions", [])
    if "measure" in c
}


def test_sink_logit_attention_known_answer():
    """S1's numbers through the attention function: a sink logit of 3 takes 77 % of the weight,
    and a zero sink logit gives softmax + 1: e^s / (1 + sum e^s)."""
    scores = torch.tensor([0.1, -0.2, 0.0, 0.2, -0.1, 0.0])
    query = torch.ones(1, 1, 1, 1)
    keys = scores.view(1, 1, 6, 1)
    values = torch.randn(1, 1, 6, 4)
    module = SimpleNamespace(num_key_value_groups=1, training=False, sink_logit=torch.tensor([3.0]))
    _, weights = sink_logit_attention(module, query, keys, values, None, scaling=1.0)
    assert f"{100 * (1 - weights.sum()):.0f}" == "77"
    module.sink_logit = torch.zeros(1)
    _, weights = sink_logit_attention(module, query, keys, values, None, scaling=1.0)
    assert torch.allclose(weights.flatten(), scores.exp() / (1 + scores.exp().sum()))
    module.sink_logit = None
    _, weights = sink_logit_attention(module, query, keys, values, None, scaling=1.0)
    assert torch.allclose(weights.flatten(), scores.softmax(-1))


def test_sink_logit_at_minus_infinity_is_vanilla():
    learned = build_model("learned_sink", ARCH, 0).eval()
    vanilla = build_model("vanilla", ARCH, 0).eval()
    for layer in learned.model.layers:
        layer.self_attn.sink_logit.data.fill_(-1e9)
    ids = torch.tensor([[5, 6, 7, 8]])
    assert torch.allclose(learned(input_ids=ids).logits, vanilla(input_ids=ids).logits, atol=1e-6)


def test_training_is_deterministic_and_checkpoints_round_trip(tmp_path):
    data, held = corpus_bytes("Emma Woodhouse, handsome, clever, and rich. " * 20, 0.1)
    assert len(held) > 0 and data.max() < 256
    seeds = {"init": 0, "data": 0}
    a, hist_a = train("learned_sink", data, ARCH, 3, 2, 1e-3, seeds)
    b, hist_b = train("learned_sink", data, ARCH, 3, 2, 1e-3, seeds)
    assert hist_a == hist_b
    path = tmp_path / "lm.pt"
    save(a, "learned_sink", ARCH, seeds["init"], path, {"rule": "test"})
    loaded, variant = load(path)
    ids = torch.tensor([[1, 2, 3]])
    assert variant == "learned_sink"
    assert torch.equal(loaded(input_ids=ids).logits, a(input_ids=ids).logits)
    assert (tmp_path / "lm.pt.prov.json").exists()


def test_the_untrained_lm_is_the_state_training_starts_from(tmp_path):
    """With a learning rate of 0 no step moves a weight: the LM trained so is the state its
    training started from, which `load_untrained` rebuilds from the checkpoint's init seed (and
    `load` from its weights); another seed draws other weights."""
    data, _ = corpus_bytes("It is a truth universally acknowledged. " * 20, 0.1)
    seeds = {"init": 3, "data": 0}
    model, _ = train("sink_token", data, ARCH, 2, 2, 0.0, seeds)
    path = tmp_path / "lm.pt"
    save(model, "sink_token", ARCH, seeds["init"], path, {"rule": "test"})
    untrained, variant = load_untrained(path)
    assert variant == "sink_token" and not untrained.training
    trained = load(path)[0].state_dict()
    assert all(torch.equal(w, trained[k]) for k, w in untrained.state_dict().items())
    other = build_model("sink_token", ARCH, 4).state_dict()
    assert not torch.equal(other["lm_head.weight"], trained["lm_head.weight"])


def test_eval_windows_cut_the_held_out_bytes():
    held = np.arange(100)
    windows = eval_windows(held, 64, 4, cache=8)
    assert windows.shape == (4, 16) and windows[1, 0] == 16
    with pytest.raises(ValueError, match="cache \\+ 2 = 10"):
        eval_windows(held, 64, 8, cache=8)  # windows of 8 bytes: nothing scored after the cache
    with pytest.raises(ValueError, match="holds out 100"):
        eval_windows(held, 400, 4, cache=8)


def test_sink_lm_evaluation_scores_the_same_text_bytes():
    """The sink-token model reads its sink token first, yet every variant is scored on the same
    text bytes of every window (those after the first cache + 1); the attention mass has one row
    per window and layer."""
    windows = torch.arange(40, 80).view(2, 20)
    scored = {}
    for variant in ("vanilla", "sink_token"):
        model = build_model(variant, ARCH, 0).eval()
        with torch.inference_mode():
            rows = streaming_ppl(model, variant, windows, cache=8, sinks=[0, 2], chunk=16)
            mass = attention_mass(model, variant, windows[:, :16])
        assert [(r["condition"], r["window"]) for r in rows] == [
            ("0+8", 0),
            ("2+6", 0),
            ("0+8", 1),
            ("2+6", 1),
        ]
        scored[variant] = {r["tokens"] for r in rows}
        assert [(r["window"], r["layer"]) for r in mass] == [(0, 0), (1, 0)]
        assert {r["variant"] for r in mass} == {variant}
        with torch.inference_mode():
            named = streaming_ppl(model, variant, windows, 8, [0, 2], 16, f"{variant}@init")
            named_mass = attention_mass(model, variant, windows[:, :16], f"{variant}@init")
        assert [r | {"variant": variant} for r in named] == rows  # the rows, named apart
        assert [r | {"variant": variant} for r in named_mass] == mass
    assert scored == {"vanilla": {20 - 1 - 8}, "sink_token": {20 - 1 - 8}}


class FixedAttention(torch.nn.Module):
    """A stand-in LM whose one layer returns the given attention (batch, heads, T, T)."""

    def __init__(self, attention: torch.Tensor):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.attention = attention

    def forward(self, input_ids, output_attentions):
        return SimpleNamespace(attentions=[self.attention])


def test_first_token_mass_and_sink_rate_known_answer():
    """Over 4 queries, head 0 gives the first token 0.5 after query 0 (which can see only it):
    alpha = (1 + 3 x 0.5) / 4 = 0.625, a sink head (> 0.3); head 1 gives it 0 after query 0:
    alpha = 0.25, not one. Mass 0.4375, sink rate 50 %, no weight left on a sink logit."""
    rows = torch.tensor([[1.0, 0, 0, 0], [0.5, 0.5, 0, 0], [0.5, 0.25, 0.25, 0], [0.5, 0, 0, 0.5]])
    other = torch.tensor([[1.0, 0, 0, 0], [0, 1, 0, 0], [0, 0.5, 0.5, 0], [0, 0, 0.5, 0.5]])
    model = FixedAttention(torch.stack([rows, other])[None])
    (row,) = first_token_mass(model, torch.zeros(1, 4, dtype=torch.long))
    assert row["window"] == 0 and row["layer"] == 0
    assert row["first_token_mass"] == pytest.approx(0.4375)
    assert row["first_token_share"] == pytest.approx(0.4375)  # no sink logit: the same
    assert row["first_token_sink_rate"] == 50 and row["sink_logit_mass"] == pytest.approx(0)


def test_first_token_share_is_renormalised_over_the_real_keys():
    """The same heads with a sink logit that takes half of every query's weight (query 0 too):
    the mass on the first token halves (0.21875), its share of the real keys' attention stays
    0.4375, and the sink logit's weight is 0.5."""
    rows = torch.tensor([[1.0, 0, 0, 0], [0.5, 0.5, 0, 0], [0.5, 0.25, 0.25, 0], [0.5, 0, 0, 0.5]])
    other = torch.tensor([[1.0, 0, 0, 0], [0, 1, 0, 0], [0, 0.5, 0.5, 0], [0, 0, 0.5, 0.5]])
    model = FixedAttention(0.5 * torch.stack([rows, other])[None])
    (row,) = first_token_mass(model, torch.zeros(1, 4, dtype=torch.long))
    assert row["first_token_mass"] == pytest.approx(0.21875)
    assert row["first_token_share"] == pytest.approx(0.4375)
    assert row["sink_logit_mass"] == pytest.approx(0.5)


# --- the exhibit functions on crafted tables ----------------------------------------------------


def written(tmp_path, name: str, frame: pd.DataFrame) -> str:
    path = tmp_path / f"{name}.parquet"
    frame.to_parquet(path)
    return str(path)


def read_back(tmp_path, exhibit: str, tables: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """The tables as the claims and figure jobs see them: written to parquet and read back."""
    assert list(tables) == list(EXHIBITS[exhibit].tables)
    return {name: pd.read_parquet(written(tmp_path, name, t)) for name, t in tables.items()}


N_WINDOWS = 12


def window_table(offsets: dict[str, dict[int, float]]) -> pd.DataFrame:
    """Per variant, kept tokens and window: mean NLL = a window's own level (shared by every
    condition, as on real text) + the condition's offset + a little noise; 20 bytes each."""
    rng = np.random.default_rng(0)
    level = rng.normal(1.5, 0.2, N_WINDOWS)
    return pd.DataFrame(
        [
            {
                "variant": variant,
                "sinks": k,
                "condition": f"{k}+{8 - k}",
                "window": w,
                "tokens": 20,
                "nll": level[w] + offset + rng.normal(0, 0.002),
            }
            for variant, by_sinks in offsets.items()
            for k, offset in by_sinks.items()
            for w in range(N_WINDOWS)
        ]
    )


def attention_table(levels: dict[str, float]) -> pd.DataFrame:
    """Per variant, window and layer (2 layers): the first token's share of the real keys'
    attention around a level, its mass before renormalising (0.7 of the share for the learned
    sink, whose logit takes 0.3); the sink rate (% of heads above 0.3) 100 in layer 1 where the
    level is above 0.3, else 0."""
    rng = np.random.default_rng(1)
    return pd.DataFrame(
        [
            {
                "variant": variant,
                "window": w,
                "layer": layer,
                "first_token_share": (share := level + rng.normal(0, 0.02)),
                "first_token_mass": share * (0.7 if variant == "learned_sink" else 1.0),
                "first_token_sink_rate": 100.0 * layer * (level > 0.3),
                "sink_logit_mass": 0.3 if variant == "learned_sink" else 0.0,
            }
            for variant, level in levels.items()
            for w in range(N_WINDOWS)
            for layer in (0, 1)
        ]
    )


def history(variant: str, emergence: bool) -> pd.DataFrame:
    """Three logged steps; with `emergence`, the sinks measured at the second and the last."""
    found = pd.DataFrame({"step": range(3), "loss": [5.0, 4.0, 3.0], "tokens": [10, 20, 30]})
    if emergence:
        found["first_token_mass"] = [np.nan, 0.2, 0.4]
        found["first_token_sink_rate"] = [np.nan, 10.0, 30.0]
    return found.assign(variant=variant)


# each LM at its initialisation (the claims' nulls): no kept token helps, no sink heads
UNTRAINED_OFFSETS = dict.fromkeys([0, 1, 2, 4], 0.0)
UNTRAINED_LEVEL = 0.05


def sink_lm_tables(tmp_path, offsets, levels, emergence=False, untrained=None):
    """S6's and S7's tables from evaluation tables of the variants of `offsets` and `levels`,
    and of each one at its initialisation (`untrained`: its offsets and levels, by default those
    of an LM with no sink)."""
    variants = list(offsets)
    histories = [written(tmp_path, f"{v}_history", history(v, emergence)) for v in variants]
    nulls = untrained or (
        {f"{v}@init": UNTRAINED_OFFSETS for v in offsets},
        {f"{v}@init": UNTRAINED_LEVEL for v in levels},
    )
    inputs = {
        "ppl": written(tmp_path, "ppl_in", window_table(offsets | nulls[0])),
        "attention": written(tmp_path, "attention_in", attention_table(levels | nulls[1])),
        "histories": histories,
    }
    s6_tables = s6.tables({k: inputs[k] for k in ("ppl", "histories")}, {})
    s7_tables = s7.tables({k: inputs[k] for k in ("ppl", "attention")}, {})
    return read_back(tmp_path, "S6", s6_tables), read_back(tmp_path, "S7", s7_tables)


SETTINGS = {"arch": ARCH, "steps": 3, "cache": 8, "scale": "t"}


def verdict(found, claim: str) -> bool | None:
    """The scorecard's judgement of a measured claim (or control) against its catalogue check."""
    measured = found[claim]
    interval = measured.interval
    assert interval.low <= measured.value <= interval.high
    assert interval.n == N_WINDOWS and interval.basis == "bootstrap over windows"
    return judge(CHECKS[claim], interval.low, interval.high)


def note_number(note: str, label: str) -> float:
    return float(re.search(rf"{label} (-?[\d.]+)", note).group(1))


# the paper's pattern: vanilla and zero sink need several kept tokens, the sink token one, the
# learned sink none; the vanilla LM has a first-token sink that the learned sink removes
PAPER_LIKE = {
    "vanilla": {0: 1.0, 1: 0.1, 2: 0.02, 4: 0.0},
    "zero_sink": {0: 2.0, 1: 0.08, 2: 0.01, 4: 0.0},
    "sink_token": {0: 1.5, 1: 0.0, 2: 0.0, 4: 0.0},
    "learned_sink": {0: 0.0, 1: 0.0, 2: 0.0, 4: 0.0},
}
# the other side of every threshold
OPPOSITE = {
    "vanilla": {0: 0.0, 1: 0.0, 2: 0.0, 4: 0.0},
    "zero_sink": {0: 0.0, 1: 0.0, 2: 0.0, 4: 0.0},
    "sink_token": {0: 1.5, 1: 0.1, 2: 0.05, 4: 0.0},
    "learned_sink": {0: 0.8, 1: 0.1, 2: 0.0, 4: 0.0},
}


def test_s6_s7_claims_on_the_papers_side(tmp_path):
    s6_tables, s7_tables = sink_lm_tables(
        tmp_path, PAPER_LIKE, {"vanilla": 0.6, "learned_sink": 0.1, "sink_token": 0.05}
    )
    summary = s6_tables["ppl"].set_index(["variant", "sinks"])
    assert summary.loc[("vanilla", 1), "tokens"] == 20 * N_WINDOWS
    assert summary.loc[("vanilla", 1), "windows"] == N_WINDOWS
    levels = s6_tables["windows"].query("variant == 'vanilla' and sinks == 4").nll.mean()
    assert summary.loc[("vanilla", 4), "ppl"] == pytest.approx(np.exp(levels))

    found = s6.claims(s6_tables, SETTINGS)
    assert set(found) == set(s6.RATIOS)
    assert found["S6.vanilla_needs_several"].value == pytest.approx(np.exp(0.1), abs=2e-3)
    assert found["S6.zero_sink_needs_several"].value == pytest.approx(np.exp(0.08), abs=2e-3)
    assert found["S6.sink_token_one_suffices"].value == pytest.approx(1.0, abs=2e-3)
    assert verdict(found, "S6.vanilla_needs_several") is True
    assert verdict(found, "S6.zero_sink_needs_several") is True
    assert verdict(found, "S6.sink_token_one_suffices") is True
    drawn = s6_tables["ratios"].set_index("claim")  # the figure's: the claims' own intervals
    for claim, measured in found.items():
        assert drawn.loc[claim, ["value", "low", "high"]].tolist() == pytest.approx(
            [measured.value, measured.interval.low, measured.interval.high]
        )
    assert found["S6.vanilla_needs_several"].model == f"byte-level Llama {ARCH}, 3 steps"
    note = found["S6.vanilla_needs_several"].note
    assert note_number(note, "ratio 1 vs 4 kept") == pytest.approx(
        found["S6.vanilla_needs_several"].value, abs=1e-4
    )
    ppl = [float(p) for p in re.search(r"vanilla PPL ([\d. /]+) with", note).group(1).split(" / ")]
    assert ppl == pytest.approx(summary.loc["vanilla"].ppl.tolist(), abs=1e-3)
    assert f"{20 * N_WINDOWS} held-out bytes in {N_WINDOWS} windows" in note

    found = s7.claims(s7_tables, SETTINGS)
    assert found["S7.first_token_mass_falls"].value == pytest.approx(-0.5, abs=0.02)
    assert found["S7.vanilla_sink_rate"].value == pytest.approx(50)  # 1 of 2 layers
    assert found["S7.streams_without_sinks"].value == pytest.approx(1.0, abs=2e-3)
    assert found["S7.vanilla_window_ratio"].value == pytest.approx(np.exp(1.0), abs=0.01)
    assert verdict(found, "S7.first_token_mass_falls") is True
    assert verdict(found, "S7.streams_without_sinks") is True
    # the controls, judged as the catalogue's preconditions judge them
    for control in ("S7.vanilla_sink_rate", "S7.vanilla_window_ratio"):
        interval = found[control].interval
        assert judge(CONTROLS[control], interval.low, interval.high) is True
    note = found["S7.first_token_mass_falls"].note
    assert note_number(note, "learned_sink - vanilla") == pytest.approx(
        found["S7.first_token_mass_falls"].value, abs=1e-4
    )
    assert note_number(note, "vanilla") == pytest.approx(0.6, abs=0.02)
    assert note_number(found["S7.vanilla_sink_rate"].note, "vanilla") == pytest.approx(50)
    assert "with first-token share > 0.3 over 12 windows" in found["S7.vanilla_sink_rate"].note
    assert isinstance(s6.figure(s6_tables, {"title": "t", "scale": "t"}), Figure)
    assert isinstance(s7.figure(s7_tables, {"title": "t", "scale": "t"}), Figure)
    # logged without the sinks' emergence: no panels, the line below names them
    assert s6_tables["emergence"].empty
    fig = s6.figure(s6_tables, {"title": "t", "scale": "t"})
    assert sum(ax.get_visible() for ax in fig.axes) == 3  # training, streaming, the claims
    assert fig.get_supxlabel().replace("\n", " ").startswith("no sinks measured")


def test_s6_emergence_of_the_sinks_over_training(tmp_path):
    offsets = {v: PAPER_LIKE[v] for v in ("vanilla", "sink_token")}
    s6_tables, _ = sink_lm_tables(tmp_path, offsets, {"vanilla": 0.6}, emergence=True)
    found = s6_tables["emergence"]
    assert list(found.columns) == [
        "variant",
        "step",
        "tokens",
        "first_token_mass",
        "first_token_sink_rate",
    ]
    assert found.step.tolist() == [1, 2, 1, 2] and found.tokens.tolist() == [20, 30, 20, 30]
    share, rate = s6.figure(s6_tables, {"title": "t", "scale": "t"}).axes[3:5]
    assert share.get_title() == "Emergence: first-token attention share"
    for panel, threshold in ((share, 0.3), (rate, 0.0)):
        *curves, line = panel.lines
        assert [list(curve.get_ydata()) for curve in curves][0] in ([0.2, 0.4], [10.0, 30.0])
        assert list(line.get_ydata()) == [threshold] * 2 and line.get_linestyle() == ":"


def test_s7_a_first_token_mass_lowered_by_the_sink_logit_alone_is_no_fall(tmp_path):
    """The same share of the real keys' attention in both models (0.6): the learned sink's raw
    mass is 0.42, lower by the weight its logit takes, but the claim's share does not fall."""
    offsets = {v: PAPER_LIKE[v] for v in ("vanilla", "learned_sink")}
    _, s7_tables = sink_lm_tables(tmp_path, offsets, {"vanilla": 0.6, "learned_sink": 0.6})
    found = s7.claims(s7_tables, SETTINGS)
    assert found["S7.first_token_mass_falls"].value == pytest.approx(0.0, abs=0.02)
    assert verdict(found, "S7.first_token_mass_falls") is not True
    note = found["S7.first_token_mass_falls"].note
    assert note_number(note, "counted\\): learned_sink") == pytest.approx(0.42, abs=0.02)


def test_s6_s7_claims_on_the_other_side(tmp_path):
    s6_tables, s7_tables = sink_lm_tables(
        tmp_path, OPPOSITE, {"vanilla": 0.1, "learned_sink": 0.3, "sink_token": 0.05}
    )
    found = s6.claims(s6_tables, SETTINGS)
    assert found["S6.vanilla_needs_several"].value == pytest.approx(1.0, abs=2e-3)
    assert found["S6.sink_token_one_suffices"].value == pytest.approx(np.exp(0.1), abs=2e-3)
    for claim in s6.RATIOS:
        assert verdict(found, claim) is False, claim
    found = s7.claims(s7_tables, SETTINGS)
    assert found["S7.first_token_mass_falls"].value == pytest.approx(0.2, abs=0.02)
    assert verdict(found, "S7.first_token_mass_falls") is False
    assert verdict(found, "S7.streams_without_sinks") is False
    assert found["S7.streams_without_sinks"].value == pytest.approx(np.exp(0.8), abs=0.01)
    for control in ("S7.vanilla_sink_rate", "S7.vanilla_window_ratio"):
        interval = found[control].interval
        assert judge(CONTROLS[control], interval.low, interval.high) is False, control
    assert "ratio 0 vs 4 kept 2.2" in found["S7.streams_without_sinks"].note


def test_s6_measures_only_the_variants_it_has(tmp_path):
    offsets = {v: PAPER_LIKE[v] for v in ("vanilla", "sink_token", "learned_sink")}
    s6_tables, _ = sink_lm_tables(tmp_path, offsets, {"vanilla": 0.6, "learned_sink": 0.1})
    assert "S6.zero_sink_needs_several" not in s6.claims(s6_tables, SETTINGS)


@pytest.mark.parametrize(
    ("offsets", "levels", "control"),
    [
        (
            PAPER_LIKE,
            {"vanilla": 0.1, "learned_sink": 0.05},
            "the vanilla LM has first-token sinks",
        ),
        (
            PAPER_LIKE | {"vanilla": {0: 0.0, 1: 0.1, 2: 0.02, 4: 0.0}},
            {"vanilla": 0.6, "learned_sink": 0.1},
            "the vanilla LM degrades with 0 kept tokens",
        ),
    ],
    ids=["no-sink-heads", "no-window-degradation"],
)
def test_s6_s7_claims_are_not_testable_without_the_vanillas_sink(
    tmp_path, offsets, levels, control
):
    """The controls: without first-token sink heads in the vanilla LM, or without its
    degradation with 0 kept tokens, the claims that need them cannot be judged."""
    s6_tables, s7_tables = sink_lm_tables(tmp_path, offsets, levels)
    found = s6.claims(s6_tables, SETTINGS) | s7.claims(s7_tables, SETTINGS)
    measured = {claim: m.record() for claim, m in found.items()}
    claims = {claim["id"]: claim for claim in load_claims()}
    judged = [
        claim
        for claim in found
        if claim in claims
        and any(c["control"].startswith(control) for c in claims[claim]["preconditions"])
    ]
    assert len(judged) >= 4
    for claim in judged:
        verdict, reason = scorecard_verdict(claims[claim], measured, "default")
        assert verdict == NOT_TESTABLE and control in reason, claim


def test_s6_s7_nulls_are_each_lm_at_its_initialisation(tmp_path):
    """The claims' nulls come from the `<variant>@init` rows: no kept token helps an untrained
    LM (ratios 1 up to the windows' noise) and it has no sink head (rate 0, exactly, in every
    resample). The sink-token row's null passes its own check, 1 +- 0.003, but the controls
    measured on the same nulls lack their phenomenon, so every row could have failed; the
    figures draw the trained LMs only."""
    from sinkscope.scorecard import null_passes

    s6_tables, s7_tables = sink_lm_tables(
        tmp_path, PAPER_LIKE, {"vanilla": 0.6, "learned_sink": 0.1, "sink_token": 0.05}
    )
    found = s6.claims(s6_tables, SETTINGS) | s7.claims(s7_tables, SETTINGS)
    for claim in [*s6.RATIOS, *s7.RATIOS]:
        null = found[claim].null
        assert null.value == pytest.approx(1.0, abs=2e-3), claim
        assert null.note.startswith("each LM at its initialisation (<variant>@init")
        variant = (s6.RATIOS | s7.RATIOS)[claim][0]
        assert f"{variant}@init PPL " in null.note
    rate = found["S7.vanilla_sink_rate"].null
    assert rate.value == 0 and (rate.interval.low, rate.interval.high) == (0, 0)
    assert "vanilla@init 0.0" in rate.note and "vanilla 50.0" not in rate.note
    fall = found["S7.first_token_mass_falls"].null
    assert fall.value == pytest.approx(0.0, abs=0.02)
    assert "learned_sink@init - vanilla@init" in fall.note
    null = found["S6.sink_token_one_suffices"].null
    check = CHECKS["S6.sink_token_one_suffices"]
    assert judge(check, null.interval.low, null.interval.high) is True  # alone it would pass
    measured = {claim: m.record() for claim, m in found.items()}
    for claim in load_claims():
        if claim["exhibit"] in ("S6", "S7"):
            assert null_passes(claim, measured) is False, claim["id"]
    streaming = s6.figure(s6_tables, {"title": "t", "scale": "t"}).axes[1]
    assert [line.get_label() for line in streaming.lines] == list(PAPER_LIKE)
    where = s7.figure(s7_tables, {"title": "t", "scale": "t"}).axes[0]
    assert not [line for line in where.lines if "@init" in line.get_label()]
