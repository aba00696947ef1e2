import pytest

from exactness.models import dac
from exactness.studies import dac_batching as batching


@pytest.fixture(scope="module")
def tiny():
    return dac.template("tiny", 0, "variance_preserving")


def test_receptive_field_from_the_architecture_matches_the_float64_gradient(tiny):
    field = batching.receptive_field(tiny.config)
    measured = batching.measured_receptive_field(dac.build_variant(tiny, "float64"), 4000, 250)
    assert measured["last_sample"] - measured["first_sample"] == field["span_samples"]
    assert abs(measured["right_samples"] - field["one_side_samples"]) <= field["hop"]


def test_padding_changes_only_a_tail_within_the_receptive_field(tiny):
    model = dac.build_variant(tiny, "folded_fp32")
    table, curves = batching.compare(model, [dac.audio("tiny", 0.5, 1), dac.audio("tiny", 0.3, 2)])
    short = table[(table["clip"] == 1) & (table["cause"] == "padding")].set_index("stage")
    field = batching.receptive_field(tiny.config)
    assert 0 < short.loc["latent", "first_diff_from_end"] <= field["one_side_frames"] + 1
    assert short.loc["latent", "max_diff_before"] < 1e-4 < short.loc["latent", "max_diff_in_tail"]
    longest = table[(table["clip"] == 0) & (table["cause"] == "padding")]
    assert (longest.first_diff_from_end == 0).all() and longest.bit_identical_before.all()  # not padded at all
    assert (1, "latent", "batch size") in curves


def test_samples_past_a_hop_multiple_are_dropped(tiny):
    model = dac.build_variant(tiny, "folded_fp32")
    table = batching.hop_drop(model, [800, 803, 808])
    assert table.dropped_samples.tolist() == [0, 3, 0] and table.hop.iloc[0] == 8
