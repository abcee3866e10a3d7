"""The streaming evaluation on a tiny random model of every causal-LM architecture transformers
ships (enumerated from its own registry, tests/tiny_models.py): the full-cache NLL equals the
model's own loss, and the fast evaluation equals the token-by-token loop under a sinks + window
policy, or the architecture is refused by a UserError that names it."""

from __future__ import annotations

import pytest
import tiny_models
import torch

from sinkscope.errors import UserError
from sinkscope.streaming import nll_fast, nll_loop, parse

TOL = 1e-4  # as tests/test_streaming.py: float32 rounding of two orders of the same sums
POLICY = "2+6"  # 2 sinks, 6 recent: the window slides 15 times over the stream
STREAM = 24
# one architecture per positional scheme (rotate-half, partial, interleaved and partial,
# interleaved with NoPE layers and a logit scale, ALiBi twice, learned, learned sink logits)
SCHEMES = ["llama", "gpt_neox", "glm4", "cohere2", "mpt", "bloom", "opt", "gpt_oss"]

pytestmark = pytest.mark.usefixtures("one_thread")


def streams_exactly_or_is_refused(model_type: str) -> str:
    """'refused' or 'exact'; fails on any other outcome."""
    try:
        model = tiny_models.tiny_causal_lm(model_type)
    except tiny_models.Unbuildable as reason:
        pytest.skip(str(reason))
    ids = tiny_models.text_inputs(1, STREAM)["input_ids"][0]
    try:
        full = nll_fast(model, ids, parse("full"), chunk=7)
        loop = nll_loop(model, ids, parse(POLICY))
        fast = nll_fast(model, ids, parse(POLICY), chunk=7)
    except UserError as error:
        assert repr(model_type) in str(error), str(error)
        return "refused"
    with torch.no_grad():
        loss = model(input_ids=ids[None], labels=ids[None]).loss
    assert abs(full.mean().item() - loss.item()) <= TOL, model_type
    assert (fast - loop).abs().max().item() <= TOL, model_type
    return "exact"


@pytest.mark.parametrize("model_type", SCHEMES)
def test_each_positional_scheme_streams_exactly(model_type):
    assert streams_exactly_or_is_refused(model_type) == "exact"


@pytest.mark.heavy
@pytest.mark.parametrize("model_type", tiny_models.causal_lm_types())
def test_every_architecture_streams_exactly_or_is_refused_by_name(model_type):
    streams_exactly_or_is_refused(model_type)


def test_a_rotation_other_than_the_models_is_refused():
    """GLM-4 read as rotate-half RoPE: its own keys show the pairing is not that one."""
    from sinkscope.streaming import positions

    model = tiny_models.tiny_causal_lm("glm4")
    real = positions.positional_scheme(model)
    wrong = type(real)("rope", real.rotary_fraction)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(positions, "positional_scheme", lambda model: wrong)
        with pytest.raises(UserError, match="'glm4'.*keys of layer 0 do not follow"):
            nll_fast(model, tiny_models.text_inputs(1, 8)["input_ids"][0], parse("1+3"))
