"""The ulp-noise answer line: float noise when ORT is as close to float64 as eager float32 is, with the median
and worst noise in ulps of each tensor's RMS read from the noise table."""

import pandas as pd
import pytest

from exactness.compare.scale import rms_ulps
from exactness.studies.ulp_noise import answers


def _noise(diffs, rms):
    return pd.DataFrame({"seed": 0, "depth": range(len(diffs)), "tensor": [f"m.layer.{i}" for i in range(len(diffs))],
                         "label": "", "max_abs_diff": diffs,
                         "rel_rms": [d / r for d, r in zip(diffs, rms, strict=True)],
                         "median_ulp": 2.0, "p99_ulp": 9.0, "max_ulp": 30.0})


def _closer(eager, ort):
    return pd.DataFrame({"tensor": [f"m.layer.{i}" for i in range(len(eager))], "eager_vs_float64": eager,
                         "ort_vs_float64": ort})


def test_float_noise_with_the_median_and_worst_in_ulps_of_the_rms():
    noise = _noise([1e-7, 4e-6, 4e-9], [1.0, 2.0, 1e-3])
    (line,) = answers.answers(noise, _closer([1e-6, 1e-6, 1e-8], [2e-6, 1e-6, 1e-8]), "M", "static")
    ulps = pd.Series(rms_ulps(noise.max_abs_diff, noise.rel_rms))  # 0.84, 17 and 34 ulps of each tensor's RMS
    assert line.cause == "float noise" and line.subject == "M (static export)"
    assert line.rate == f"median {ulps.median():.0f}, worst {ulps.max():.0f} (m.layer.2) in each tensor's median draw"
    assert "4.0e-09 to 4.0e-06" in line.action
    # a second draw, noisier at m.layer.1: the medians move, and the worst single draw is named beside them
    louder = pd.concat([noise, _noise([1e-7, 4e-5, 4e-9], [1.0, 2.0, 1e-3]).assign(seed=1)], ignore_index=True)
    (line,) = answers.answers(louder, _closer([1e-6, 1e-6, 1e-8], [2e-6, 1e-6, 1e-8]), "M", "static")
    single = float(rms_ulps([4e-5], [4e-5 / 2.0])[0])
    assert line.rate.endswith(f"; {single:.0f} in the worst draw (m.layer.1, seed 1)")


def test_ort_far_beyond_eagers_own_float64_error_is_undecided_and_names_the_tensor():
    noise = _noise([1e-7, 4e-6], [1.0, 2.0])
    (line,) = answers.answers(noise, _closer([1e-8, 1e-6], [1e-6, 1e-6]), "M", "static")
    assert line.cause == "undecided" and "1 of 2 tensors" in line.proof and "m.layer.0" in line.proof


@pytest.mark.parametrize("closer", [pd.DataFrame(columns=["tensor", "eager_vs_float64", "ort_vs_float64"])])
def test_without_a_float64_run_nothing_is_claimed_and_exact_tensors_are_exact(closer):
    assert answers.answers(_noise([1e-7], [1.0]), closer, "M", "static")[0].cause == "undecided"
    assert answers.answers(_noise([0.0, 0.0], [1.0, 1.0]), closer, "M", "static")[0].cause == "exact"


def test_a_non_finite_tensor_against_float64_is_undecided_and_named_never_float_noise():
    noise = _noise([1e-7, 4e-6], [1.0, 2.0])
    (line,) = answers.answers(noise, _closer([1e-8, float("nan")], [1e-8, float("nan")]), "M", "static")
    assert line.cause == "undecided" and "m.layer.1 holds non-finite values" in line.proof
