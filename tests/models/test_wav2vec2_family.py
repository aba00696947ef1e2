import pytest
import torch

from exactness.models import wav2vec2_family as family


@pytest.mark.parametrize("model", family.MODELS)
@pytest.mark.parametrize("seed", [0, 7, 123456, 2**32 - 1])
def test_vectorised_inputs_equal_the_testers_own_loops(model, seed):
    fast, plain = family.tester_inputs(model, seed), family.tester_inputs_plain(model, seed)
    assert torch.equal(fast["input_values"], plain["input_values"])
    assert torch.equal(fast["attention_mask"], plain["attention_mask"])
    assert torch.equal(family.tester_input_values(model, seed), plain["input_values"])  # the screen's: no mask


def test_the_reused_twister_carries_nothing_from_one_seed_to_the_next():
    first = family.tester_inputs("UniSpeechForPreTraining", 5)
    family.tester_inputs("UniSpeechForPreTraining", 2**40 + 3)
    again = family.tester_inputs("UniSpeechForPreTraining", 5)
    assert all(torch.equal(first[k], again[k]) for k in first)


def test_inputs_follow_the_tester_shapes_scales_and_mask_rule():
    inputs = family.tester_inputs("Wav2Vec2ConformerForPreTraining", 3)
    values, mask = inputs["input_values"], inputs["attention_mask"]
    assert values.shape == (13, 1024) and values.dtype == torch.float32
    assert 16 < values.max() < 32 and values.min() >= 0  # the conformer tester scales by vocab_size (32)
    assert family.tester_inputs("Wav2Vec2ForPreTraining", 3)["input_values"].max() < 1
    # random_attention_mask (transformers 5.23.0) attends the first position of every row, not the last
    assert set(mask.unique().tolist()) == {0, 1} and bool((mask[:, 0] == 1).all())
    assert not bool((mask[:, -1] == 1).all())


def test_less_flaky_settings_set_every_norm_eps_to_one():
    model = family.build_model("Wav2Vec2ConformerForPreTraining", 0)
    norms = [m for m in model.modules() if type(m).__name__.endswith(("LayerNorm", "GroupNorm", "BatchNorm1d"))]
    assert norms and all(m.eps == 1.0 for m in norms)
    assert not model.training


def test_same_seed_same_weights_different_seed_different_weights():
    a, b, c = (family.build_model("UniSpeechForPreTraining", s) for s in (5, 5, 6))
    assert torch.equal(a.quantizer.weight_proj.weight, b.quantizer.weight_proj.weight)
    assert not torch.equal(a.quantizer.weight_proj.weight, c.quantizer.weight_proj.weight)


def test_argmax_rows_match_the_seed_for_the_conformer():
    assert family.argmax_rows("Wav2Vec2ConformerForPreTraining") == (13, 14, 2)  # 364 rows, as in seed 000
    assert family.argmax_rows("UniSpeechForPreTraining") == (13, 35, 2)  # stride 3 in its robust tester


def test_unispeech_sat_pretraining_never_calls_its_quantizer():
    # transformers 5.23.0: UniSpeechSatForPreTraining.forward returns no quantized states and no perplexity.
    assert not family.quantizer_is_called("UniSpeechSatForPreTraining")
    assert family.quantizer_is_called("Wav2Vec2ConformerForPreTraining")


def test_unknown_model_names_the_known_ones():
    with pytest.raises(family.UnknownModelError, match="known models: Wav2Vec2ForPreTraining"):
        family.spec("BertForPreTraining")


@pytest.mark.parametrize("model", ["Wav2Vec2ConformerForPreTraining", "UniSpeechForPreTraining"])
def test_the_plain_recipe_rebuilds_the_same_model_and_inputs(model):
    namespace = {"seed": 17}
    exec(family.plain_recipe(model), namespace)  # noqa: S102 - the recipe is this library's own text
    built, inputs = family.build_model(model, 17), family.tester_inputs(model, 17)
    assert torch.equal(namespace["input_values"], inputs["input_values"])
    assert torch.equal(namespace["attention_mask"], inputs["attention_mask"])
    for (name, a), (_, b) in zip(namespace["model"].state_dict().items(), built.state_dict().items(), strict=True):
        assert torch.equal(a, b), name


def test_the_plain_recipe_rebuilds_the_same_weights_inputs_and_mask():
    assert family.plain_recipe_matches("Wav2Vec2ForPreTraining", 4) == {"weights": True, "inputs": True}
    assert "attention_mask[:, 0] = 1" in family.plain_recipe("Wav2Vec2ForPreTraining")
