import math

import pytest
import torch
from transformers import DacConfig

from exactness.models import dac


def test_published_variants_have_consistent_hops():
    assert [dac.config(v).hop_length for v in ("16khz", "24khz", "44khz")] == [320, 320, 512]


def test_ratios_set_after_construction_are_caught():
    config = DacConfig()
    config.downsampling_ratios = [2, 4, 5, 8]
    with pytest.raises(dac.DacConfigError, match="hop_length 512 != product of downsampling_ratios"):
        dac.check_config(config)


def test_feature_extractor_hop_must_match():
    from transformers import DacFeatureExtractor

    with pytest.raises(dac.DacConfigError, match="feature extractor hop_length 512 != model hop 320"):
        dac.check_config(dac.config("16khz"), DacFeatureExtractor(hop_length=512))


def test_unknown_variant_and_init_are_named():
    with pytest.raises(dac.DacConfigError, match="known: 16khz, 24khz, 44khz, tiny"):
        dac.config("48khz")
    with pytest.raises(dac.DacConfigError, match="unknown init 'xavier'"):
        dac.template("tiny", 0, "xavier")


def test_variants_share_one_checkpoint_and_leave_the_template_alone():
    plain = dac.template("tiny", 0)
    before = {k: v.clone() for k, v in plain.state_dict().items()}
    weights = {v: dac.effective_weights(dac.build_variant(plain, v)) for v in dac.VARIANTS}
    assert all(torch.equal(before[k], v) for k, v in plain.state_dict().items())
    reference = weights["weight_norm"]
    assert all(torch.equal(weights["folded_fp32"][k], reference[k]) for k in reference)  # same kernel, same device
    diff = max(float((weights["folded_fp64"][k].double() - reference[k].double()).abs().max()) for k in reference)
    assert 0 < diff < 1e-6  # a float64 fold rounds a few weights differently


def test_weight_norm_is_recomputed_every_forward():
    model = dac.build_variant(dac.template("tiny", 0), "weight_norm")
    assert hasattr(model.encoder.conv1.parametrizations.weight, "original1")  # torch's own (g, v) weight norm
    stored = dac.build_variant(dac.template("tiny", 0), "folded_fp32")
    assert not hasattr(stored.encoder.conv1, "parametrizations")


@pytest.mark.parametrize("variant", dac.VARIANTS)
def test_shared_runs_hold_one_copy_of_the_weights_and_give_the_stored_runs_numbers(variant):
    plain = dac.template("tiny", 0, "variance_preserving")
    shared, stored = dac.build_variant(plain, variant, shared=True), dac.build_variant(plain, variant)
    own = {p.data_ptr() for p in plain.parameters()}
    big = {layer.weight.data_ptr() for layer in dac.weight_normed_layers(plain)}
    assert big <= {p.data_ptr() for p in shared.parameters()}  # v is the template's weight, not a copy
    assert not big & {p.data_ptr() for p in stored.parameters()}
    copied = [p for p in shared.parameters() if p.data_ptr() not in own]
    assert all(p.dtype == (torch.float64 if variant == "float64" else torch.float32) for p in copied)
    a, b = dac.effective_weights(shared), dac.effective_weights(stored)
    assert all(torch.equal(a[k], b[k]) and a[k].dtype == b[k].dtype for k in b)
    audio = dac.audio("tiny", 0.1, 0).to(next(iter(b.values())).dtype)
    with torch.no_grad():
        x, y = shared.encode(audio), stored.encode(audio)
        assert torch.equal(x.quantized_representation, y.quantized_representation)
        assert torch.equal(shared.decode(x.quantized_representation).audio_values,
                           stored.decode(y.quantized_representation).audio_values)


def test_audio_is_deterministic_and_bounded():
    a, b = dac.audio("tiny", 0.25, 3), dac.audio("tiny", 0.25, 3)
    assert torch.equal(a, b) and a.shape == (1, 1, 2000) and a.abs().max() <= 1


def test_config_checks_pass_the_published_variants_and_catch_the_stale_hop():
    rows = dac.config_checks()
    assert [r["result"] for r in rows[:3]] == ["consistent"] * 3
    assert "hop_length 512 != product" in rows[3]["result"]


def test_a_run_reading_an_earlier_runs_tensors_bit_for_bit_is_its_twin_and_one_ulp_anywhere_breaks_it():
    models = {v: dac.build_variant(dac.template("tiny", 0, "variance_preserving"), v, shared=True)
              for v in ("float64", "weight_norm", "folded_fp32", "folded_fp64")}
    assert dac.twin_runs(models) == {"folded_fp32": "weight_norm"}
    path, name, last = list(dac.forward_state(models["folded_fp32"]))[-1]  # the walk's very end
    assert not path.startswith("encoder")
    with torch.no_grad():
        last.view(-1)[0] = torch.nextafter(last.view(-1)[0], torch.tensor(math.inf, dtype=last.dtype))
    assert dac.twin_runs(models) == {}
