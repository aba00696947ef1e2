import pytest
import torch

from exactness.models import wav2vec2_family as family
from exactness.models.rng_replay import ReplayError, make_plan
from exactness.models.seed_rebuild import Rebuilder, weight_norm_magnitudes
from exactness.runtimes import eager_capture

SCREENED = ["Wav2Vec2ForPreTraining", "Wav2Vec2ConformerForPreTraining", "UniSpeechForPreTraining"]


@pytest.mark.parametrize("model", SCREENED)
def test_every_tensor_and_the_forward_equal_a_plain_build(model):
    rebuild = Rebuilder(model)
    for seed in (0, 7, 1371433937, 1000, 3):
        plain = family.build_model(model, seed)
        reused = rebuild(seed)
        plain_state, reused_state = plain.state_dict(), reused.state_dict()
        assert list(plain_state) == list(reused_state)
        for name, tensor in plain_state.items():
            assert torch.equal(tensor, reused_state[name]), f"{model} seed {seed}: {name}"
        inputs = family.tester_inputs(model, seed)
        eager, again = (eager_capture.run(m, inputs, capture=False).outputs for m in (plain, reused))
        assert all(torch.equal(eager[k], again[k]) for k in eager), f"{model} seed {seed}"


def test_weight_norm_magnitude_is_recomputed_not_refused():
    template = family.build_model("Wav2Vec2ForPreTraining", 0)
    derived = weight_norm_magnitudes(template)
    assert list(derived) == ["wav2vec2.encoder.pos_conv_embed.conv.parametrizations.weight.original0"]
    magnitude = next(iter(derived))
    build = lambda: family.construct("Wav2Vec2ForPreTraining")  # noqa: E731
    with pytest.raises(ReplayError, match="neither one recorded draw"):
        make_plan(build, [magnitude])  # computed, not drawn
    with pytest.raises(ReplayError, match="not the given function"):  # a wrong function is caught
        make_plan(build, [magnitude, derived[magnitude][0]], derived={magnitude: (derived[magnitude][0], torch.abs)})
