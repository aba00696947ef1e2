import pandas as pd
import pytest

from exactness.models import dac
from exactness.studies import dac_propagation as propagation


@pytest.fixture(scope="module")
def propagated():
    plain = dac.template("tiny", 0, "variance_preserving")
    return propagation.propagate(plain, dac.audio("tiny", 0.25, 0))


def test_layers_follow_the_seed_naming():
    labels = [label for label, _, _ in propagation.layers(dac.template("tiny", 0))]
    assert labels[:5] == ["encoder.Conv1", "encoder.Block0.res_unit1", "encoder.Block0.res_unit2",
                          "encoder.Block0.res_unit3", "encoder.Block0"]
    assert "encoder.Snake1" in labels and labels[-1] == "decoder.Conv2"


def test_fold_in_float32_is_bit_identical_to_recomputing(propagated):
    table, _ = propagated
    same = table[(table.variant == "folded_fp32") & (table.against == "weight_norm")]
    assert (same.max_abs_err == 0).all()


def test_a_float64_fold_propagates_a_growing_error(propagated):
    table, _ = propagated
    chain = table[(table.variant == "folded_fp64") & (table.against == "weight_norm")].set_index("layer")
    assert chain.loc["encoder.Conv1", "max_abs_err"] > 0
    assert chain.loc["encoder.Conv2", "max_abs_err"] > chain.loc["encoder.Conv1", "max_abs_err"]
    assert chain.loc["encoder.Block0", "growth"] == pytest.approx(
        chain.loc["encoder.Block0", "max_abs_err"] / chain.loc["encoder.Conv1", "max_abs_err"])
    assert pd.isna(chain.loc["decoder.Conv1", "growth"])  # the decoder starts a new chain from identical codes
    assert (chain.rel_err == chain.max_abs_err / chain.act_rms).all()


def test_codes_margins_and_codec(propagated):
    table, extra = propagated
    codes = propagation.code_agreement({v: r["codes"] for v, r in extra["results"].items()})
    assert set(codes.variant) == set(dac.VARIANTS) and (codes.fraction_differing.between(0, 1)).all()
    margins = propagation.code_margins(extra["models"]["weight_norm"], dac.audio("tiny", 0.25, 0))
    assert len(margins) == 4 and (margins.min_margin >= 0).all()
    codec = propagation.codec_errors(extra, dac.audio("tiny", 0.25, 0)).set_index("variant")
    assert codec.loc["float64", "decoded_vs_float64"] == 0 and codec.loc["folded_fp64", "decoded_vs_float64"] > 0


def test_encoder_growth_and_the_seed_table(propagated):
    table, _ = propagated
    table = table.assign(init="variance_preserving")
    growth = propagation.encoder_growth(table).loc["variance_preserving"]
    chain = table[(table.variant == "folded_fp64") & (table.against == "weight_norm")].set_index("layer")
    assert growth.encoder_error == chain.loc["encoder.Conv2", "max_abs_err"]
    assert growth.amplification == pytest.approx(growth.encoder_error / chain.loc["encoder.Conv1", "max_abs_err"])
    beside = propagation.beside_seed(table)
    assert beside.loc["encoder.Conv2", "seed_002"] == 2.75e-2 and "variance_preserving" in beside.columns
