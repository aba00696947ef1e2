import torch

from exactness.models import wav2vec2_family as family
from exactness.runtimes import eager_capture


def test_capture_records_module_outputs_without_changing_the_forward():
    model = family.build_model("Wav2Vec2ConformerForPreTraining", 0)
    inputs = family.tester_inputs("Wav2Vec2ConformerForPreTraining", 0)
    plain = eager_capture.run(model, inputs, capture=False)
    captured = eager_capture.run(model, inputs)
    for name in plain.outputs:
        assert torch.equal(plain.outputs[name], captured.outputs[name])
    assert captured.modules["quantizer.weight_proj"][0].shape == (13, 14, 640)
    assert len(captured.modules) > 50


def test_forced_codes_change_the_decision_and_nothing_upstream():
    model = family.build_model("Wav2Vec2ConformerForPreTraining", 0)
    inputs = family.tester_inputs("Wav2Vec2ConformerForPreTraining", 0)
    eager = eager_capture.run(model, inputs)
    codes = eager.modules["quantizer.weight_proj"][0].reshape(-1, 320).argmax(-1)
    same = eager_capture.run(model, inputs, capture=False, force_codes=codes)
    for name in eager.outputs:
        assert torch.equal(same.outputs[name], eager.outputs[name])
    codes[0] = (codes[0] + 1) % 320
    moved = eager_capture.run(model, inputs, capture=False, force_codes=codes)
    assert torch.equal(moved.outputs["projected_states"], eager.outputs["projected_states"])
    assert not torch.equal(moved.outputs["projected_quantized_states"], eager.outputs["projected_quantized_states"])


def test_the_forward_is_seeded_as_the_export_test_seeds_it():
    # UniSpeechForPreTraining draws a Bernoulli mask in eval mode; the export test seeds torch with 1234 first
    model = family.build_model("UniSpeechForPreTraining", 0)
    inputs = family.tester_inputs("UniSpeechForPreTraining", 0)
    first, second = eager_capture.run(model, inputs, False), eager_capture.run(model, inputs, False)
    assert torch.initial_seed() == eager_capture.EXPORT_TEST_FORWARD_SEED
    assert all(torch.equal(first.outputs[n], second.outputs[n]) for n in first.outputs)


def test_outputs_are_flattened_under_the_exporters_names_whatever_the_forward_returns():
    import dataclasses

    from exactness.runtimes.eager_capture import flatten_outputs

    a, b = torch.zeros(1), torch.ones(1)

    @dataclasses.dataclass
    class Out:
        logits: torch.Tensor
        extra: tuple

    assert list(flatten_outputs(a)) == ["output"]
    assert list(flatten_outputs((a, (b, None, a)))) == ["0", "1.0", "1.2"]
    assert list(flatten_outputs({"x": a, "y": (b, a), "z": None})) == ["x", "y.0", "y.1"]
    assert list(flatten_outputs({"x": {"a": a, "b": (b,)}, "y": [{"c": a}]})) == ["x.a", "x.b.0", "y.0.c"]
    assert list(flatten_outputs(Out(a, (b,)))) == ["logits", "extra.0"]
