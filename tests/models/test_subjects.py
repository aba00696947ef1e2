import pytest
import torch

from exactness.models import subjects


def test_every_near_tie_class_and_every_dac_encoder_is_a_subject():
    assert "Wav2Vec2ConformerForPreTraining" in subjects.names() and "DacEncoder-44khz" in subjects.names()


def test_a_dac_encoder_builds_from_a_seed_with_its_audio():
    built, inputs = subjects.build("DacEncoder-tiny", 3), subjects.inputs("DacEncoder-tiny", 3)
    with torch.no_grad():
        out = built(**inputs)
    assert out.shape[0] == 1 and out.shape[-1] == inputs["input_values"].shape[-1] // 8
    assert set(subjects.named_tensors("DacEncoder-tiny", built).values()) == {"conv1", "block0", "encoder_output"}


def test_unknown_subjects_are_named():
    with pytest.raises(Exception, match="unknown DAC variant"):
        subjects.check("DacEncoder-48khz")
    with pytest.raises(Exception, match="known models"):
        subjects.check("Bert")
