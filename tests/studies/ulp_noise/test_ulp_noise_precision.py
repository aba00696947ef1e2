"""ulp noise in another precision: in ulps of that precision, and which side is farther from float64."""

from __future__ import annotations

import torch

from exactness.runtimes.sides import Precision
from exactness.studies.ulp_noise import precision
from exactness.studies.ulp_noise import sentences as ulp_noise_sentences


def test_a_precisions_ulp_is_float32s_scaled_by_the_dropped_bits():
    x = torch.tensor([1.0, 3.0, 1e-3])
    float32_ulp = torch.nextafter(x, torch.full_like(x, float("inf"))) - x
    assert torch.equal(precision.ulp_in(x, Precision.TF32_CONV), float32_ulp * 2.0 ** 13)
    assert precision.ulp_in(torch.tensor([1.0]), Precision.BF16).item() == 2.0 ** -7


def test_tf32_noise_is_a_few_of_its_ulps_and_farther_from_float64_than_float32():
    noise = precision.precision_noise("Wav2Vec2ConformerForPreTraining", [0], ["tf32-conv"])
    table = precision.per_tensor(noise)
    changed = table[table.max_abs_diff > 0]
    assert len(changed) > 10
    assert changed.median_ulp.median() < 4  # rounding, in TF32's own ulps
    assert (changed.other_vs_float64 > changed.fp32_vs_float64).mean() > 0.8
    first = table[table.tensor.str.endswith("conv_layers.0.conv")]
    assert (first.max_abs_diff == 0).all()  # one input channel: kept in float32, as cuDNN keeps it
    assert "ulps of the tensor's RMS" in ulp_noise_sentences.precision_sentence(table)
