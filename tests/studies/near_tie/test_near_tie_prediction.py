"""Predicted failures per 40,000 seeds with bootstrap intervals, and the calibration against measured counts."""

import numpy as np
import pandas as pd
import pytest

from exactness.studies.near_tie import prediction
from exactness.studies.near_tie import sentences as near_tie_sentences

MODEL = "Wav2Vec2ConformerForPreTraining"
ROWS = 4


def _tables(n_seeds=2000, small=(0.0, 1e-6, 2e-6), measured_failures=1, checks=3):
    """A screen whose seeds 0..len(small)-1 have small gaps (the rest never flip), `checks` checked seeds with
    4 rows of gap noise each, and every simulated flip failing."""
    gaps = list(small) + [1.0] * (n_seeds - len(small))
    screen = pd.DataFrame({"model": MODEL, "seed": range(n_seeds), "min_gap": gaps})
    noise = np.tile([-1.5e-6, -5e-7, 0.0, 5e-7], checks)  # P(delta < 0) = 1/2, < -1e-6 = 1/4, < -2e-6 = 0
    checked = pd.DataFrame({"model": MODEL, "seed": range(checks), "n_flipped_rows": [1] + [0] * (checks - 1),
                            "test_rule_passed": [i >= measured_failures for i in range(checks)],
                            "fails_if_flipped": True})
    return screen, checked, {MODEL: noise}


def test_the_point_prediction_is_the_sum_of_flip_probabilities_scaled_to_40000():
    screen, checks, deltas = _tables()
    row = prediction.predict(screen, checks, deltas, replicates=200).iloc[0]
    # per 2,000 seeds: 1/2 + 1/4 + 0 failures expected
    assert row.failures_at_run == pytest.approx(0.75) and row.failures_per_scale == pytest.approx(15.0)
    assert row.failures_per_scale_low <= 15 <= row.failures_per_scale_high
    assert row.failures_at_run_low <= 1 <= row.failures_at_run_high and row.near_seeds == 2


def test_the_interval_is_reproducible_and_widens_with_fewer_checked_seeds():
    screen, checks, deltas = _tables()
    first = prediction.predict(screen, checks, deltas, replicates=300)
    pd.testing.assert_frame_equal(first, prediction.predict(screen, checks, deltas, replicates=300))
    few_screened = prediction.predict(*_tables(n_seeds=200), replicates=300).iloc[0]
    many = first.iloc[0]
    # a screen of 200 seeds knows the density near zero ten times less well: a wider interval per 40,000
    assert (few_screened.failures_per_scale_high - few_screened.failures_per_scale_low
            > many.failures_per_scale_high - many.failures_per_scale_low)


def test_noise_rows_that_do_not_split_into_checks_are_refused():
    screen, checks, deltas = _tables()
    with pytest.raises(ValueError, match="does not split into 3 checked seeds"):
        prediction.predict(screen, checks, {MODEL: deltas[MODEL][:-1]})


def test_measured_far_above_the_prediction_falls_outside_and_says_so():
    screen, checks, deltas = _tables(measured_failures=3, checks=12)
    checks["test_rule_passed"] = [False] * 12  # 12 failures where under one is expected
    predicted = prediction.predict(screen, checks, deltas, replicates=300)
    table = prediction.calibration(predicted)
    assert not table.inside_at_run.iloc[0]
    text = near_tie_sentences.calibration_sentence(predicted)
    assert "OUTSIDE the interval" in text and "in 0 of 1 class" in text and "needs a run of at least" in text


def test_a_paper_scale_run_judges_the_target_from_its_first_seeds():
    # 40,000 seeds; the first 2,000 hold the small gaps that predict 15 per 40,000
    screen, checks, deltas = _tables(n_seeds=40000)
    predicted = prediction.predict(screen, checks, deltas, from_seeds=2000, replicates=200)
    assert predicted.predicted_from.iloc[0] == 2000 and predicted.failures_per_scale.iloc[0] == pytest.approx(15.0)
    near = prediction.calibration(predicted.assign(measured_failures=10))
    assert near.paper_scale.iloc[0] and near.within_target.iloc[0] and near.factor.iloc[0] == pytest.approx(1.5)
    assert "target met" in near_tie_sentences.calibration_sentence(predicted.assign(measured_failures=10))
    far = near_tie_sentences.calibration_sentence(predicted.assign(measured_failures=60))
    assert "Target (the count predicted from the first" in far and ") missed: " in far and "a factor 4.0" in far


def test_a_miss_is_split_into_the_small_samples_share_and_the_noise_laws_share():
    # 40,000 seeds: the first 2,000 hold two small gaps (15 per 40,000 predicted from them), the rest 20 exact
    # ties (each P = 1/2); 42 failures measured
    gaps = [0.0, 1e-6] + [1.0] * 1998 + [0.0] * 20 + [1.0] * 37980
    screen = pd.DataFrame({"model": MODEL, "seed": range(40000), "min_gap": gaps})
    checks = pd.DataFrame({"model": MODEL, "seed": [0, 1, 2000], "n_flipped_rows": [1, 0, 1],
                           "test_rule_passed": [False, True, False], "fails_if_flipped": True})
    checks = pd.concat([checks, pd.DataFrame({"model": MODEL, "seed": range(2001, 2061), "n_flipped_rows": 0,
                                              "test_rule_passed": [False] * 40 + [True] * 20,
                                              "fails_if_flipped": True})], ignore_index=True)
    deltas = {MODEL: np.tile([-1.5e-6, -5e-7, 0.0, 5e-7], len(checks))}
    reasons = prediction.miss_reasons(screen, checks, deltas).iloc[0]
    # first seeds: 0.75 per 2,000 = 15 per 40,000; everything: 0.75 + 20 * 0.5 = 10.75 per 40,000
    assert reasons.predicted_first == pytest.approx(15.0) and reasons.predicted_all == pytest.approx(10.75)
    assert reasons.sample_factor == pytest.approx(15 / 10.75) and reasons.measured_per_scale == 42
    assert reasons.law_factor == pytest.approx(10.75 / 42)
    predicted = prediction.predict(screen, checks, deltas, from_seeds=2000, replicates=100)
    text = near_tie_sentences.calibration_sentence(predicted, pd.DataFrame([reasons]))
    assert ") missed: " in text and "Why:" in text and "x0.26 of the measured count" in text


def test_one_forecast_serves_both_laws_counting_a_seed_once_and_ignoring_gaps_no_noise_reaches():
    noise = np.array([[-0.3, -0.1, 0.0, 0.1, 0.2]])
    gaps = np.array([[0.05, 0.2, 5.0], [10.0, 11.0, 12.0]])
    (held,) = prediction.forecast(gaps, noise, np.array([0.5]), [len(gaps)], np.random.default_rng(0), 50,
                                  resample_seeds=False)
    assert held.flips.expected == pytest.approx(0.4)  # P(noise < -0.05) = 2 of 5; the second seed never flips
    assert held.every_row_flips.expected == pytest.approx(1 - (1 - 0.4) * (1 - 0.2))
    assert held.every_row_failures.expected == pytest.approx(0.5 * held.every_row_flips.expected)
    # one row a seed: the laws coincide; a seed's own measured chance of failing replaces the mean
    (one,) = prediction.forecast(gaps[:, :1], noise, np.array([0.5]), [2], np.random.default_rng(0), 50,
                                 known=np.array([1.0, np.nan]))
    assert one.every_row_flips == one.flips and one.failures.expected == pytest.approx(0.4)
    assert one.flips.low <= one.flips.expected <= one.flips.high


def test_a_nan_move_in_the_noise_flips_nothing_and_leaves_the_rest_of_the_law():
    gaps = np.array([[0.05, 0.2, 5.0]])
    clean = prediction.forecast(gaps, np.array([[-0.3, -0.1, 0.0, 0.1, 0.2]]), np.array([1.0]), [1],
                                np.random.default_rng(0), 20, resample_seeds=False)[0]
    with_nan = prediction.forecast(gaps, np.array([[-0.3, -0.1, 0.0, 0.1, np.nan]]), np.array([1.0]), [1],
                                   np.random.default_rng(0), 20, resample_seeds=False)[0]
    assert with_nan.flips.expected == clean.flips.expected == pytest.approx(0.4)


def test_a_scale_asked_twice_is_one_prediction_with_one_interval():
    noise = np.array([[-0.3, -0.1, 0.0, 0.1, 0.2]] * 4)
    gaps = np.array([[0.05], [0.2], [0.01], [3.0]] * 50)
    at_scale, at_run, other = prediction.forecast(gaps, noise, np.array([0.5]), [40_000, 40_000, 2_000],
                                                  np.random.default_rng(0), 200)
    assert at_scale == at_run  # the same number, shown as a rate and as a count, has one interval
    alone = prediction.forecast(gaps, noise, np.array([0.5]), [40_000], np.random.default_rng(0), 200)[0]
    assert alone == at_scale and other.flips.expected == pytest.approx(at_scale.flips.expected / 20)
