import pytest
import torch

from exactness.models.quantizer_logits import FastLogits, plain_logits

SCREENED = ["Wav2Vec2ForPreTraining", "Wav2Vec2ConformerForPreTraining", "UniSpeechForPreTraining"]


@pytest.mark.parametrize("model", SCREENED)
@pytest.mark.slow
def test_fast_logits_are_bit_identical_to_the_full_build_and_forward(model):
    fast = FastLogits(model)
    seeds = [0, 1, 2, 99, 1371433937] + list(range(1000, 1015))
    for seed in seeds:
        assert torch.equal(fast(seed), plain_logits(model, seed)), f"{model} seed {seed}"


def test_plain_logits_refuse_a_class_without_argmax():
    with pytest.raises(RuntimeError, match="never calls its quantizer"):
        plain_logits("UniSpeechSatForPreTraining", 0)
