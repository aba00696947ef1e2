"""The DAC propagation answer lines: per init and fold, exact / within rounding / codes flip, read from the
weights, propagation and codes tables."""

import pandas as pd

from exactness.studies.dac_propagation import answers
from exactness.studies.dac_propagation.study import ENCODER_OUTPUT


def _tables(fp64_weight=1.2e-7, fp64_error=5.1e-6, fp64_codes=0.0):
    rows = []
    for init in ("default", "variance_preserving"):
        rows += [{"init": init, "variant": "folded_fp32", "max_abs_diff": 0.0},
                 {"init": init, "variant": "folded_fp64", "max_abs_diff": fp64_weight}]
    weights = pd.DataFrame(rows)
    propagated = pd.DataFrame([{"init": i, "variant": v, "against": "weight_norm", "layer": layer,
                                "max_abs_err": 0.0 if v == "folded_fp32" else e}
                               for i in ("default", "variance_preserving") for v in ("folded_fp32", "folded_fp64")
                               for layer, e in (("encoder.Conv1", 1e-8), (ENCODER_OUTPUT, fp64_error))])
    codes = pd.DataFrame([{"init": i, "variant": v, "fraction_differing": fp64_codes if v == "folded_fp64" else 0.0}
                          for i in ("default", "variance_preserving") for v in ("folded_fp32", "folded_fp64")])
    margins = pd.DataFrame({"init": ["default", "variance_preserving"], "min_margin": [3.9e-5, 4.6e-4]})
    return weights, propagated, codes, margins


def test_a_float32_fold_is_exact_and_a_float64_fold_within_rounding_with_its_encoder_error():
    found = answers.answers(*_tables(), ["default", "variance_preserving"])
    assert [(a.subject, a.cause) for a in found] == [
        ("default, folded in float32", "exact"), ("default, folded in float64", "within rounding"),
        ("variance_preserving, folded in float32", "exact"), ("variance_preserving, folded in float64",
                                                              "within rounding")]
    assert found[1].rate == "5.1e-06; 0% of code frames" and "1.2e-07" in found[1].proof
    assert "3.9e-05" in found[1].proof and "4.6e-04" in found[3].proof


def test_a_changed_code_is_called_a_flip_with_its_share():
    found = answers.answers(*_tables(fp64_codes=0.02), ["default"])
    assert found[1].cause == "codes flip" and found[1].rate.endswith("2.0% of code frames")
