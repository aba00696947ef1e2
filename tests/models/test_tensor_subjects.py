import pytest
import torch

from exactness.models import sources, tensor_subjects


def test_every_near_tie_class_and_every_dac_encoder_is_a_subject():
    names = tensor_subjects.names()
    assert "Wav2Vec2ConformerForPreTraining" in names and "DacEncoder-44khz" in names


def test_a_dac_encoder_builds_from_a_seed_with_its_audio():
    built, inputs = tensor_subjects.build("DacEncoder-tiny", 3), tensor_subjects.inputs("DacEncoder-tiny", 3)
    with torch.no_grad():
        out = built(**inputs)
    assert out.shape[0] == 1 and out.shape[-1] == inputs["input_values"].shape[-1] // 8
    named = tensor_subjects.named_tensors("DacEncoder-tiny", built)
    assert set(named.values()) == {"conv1", "block0", "encoder_output"}


def test_unknown_subjects_are_named():
    with pytest.raises(Exception, match="unknown DAC variant"):
        tensor_subjects.check("DacEncoder-48khz")
    with pytest.raises(sources.SubjectError, match="'?Bert'? is not registered in exactness.models.class_registry"):
        tensor_subjects.check("Bert")


def test_a_registered_class_and_your_builder_are_subjects_too(tmp_path):
    made = tensor_subjects.make("BitModel", 2)
    assert made.model.config.model_type == "bit" and set(made.inputs) == {"pixel_values"}
    assert tensor_subjects.named_tensors("BitModel", made.model) == {}  # every module output is still compared
    path = tmp_path / "mine.py"
    path.write_text("import torch\n\ndef build(seed):\n    return torch.nn.Linear(3, 2), {'input': torch.ones(4, 3)}\n")
    assert not tensor_subjects.make(f"{path}:build", 0).model.training
