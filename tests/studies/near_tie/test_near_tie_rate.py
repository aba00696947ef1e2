import numpy as np
import pandas as pd
import pytest

from exactness.compare.rates import wilson_interval
from exactness.studies.near_tie import prediction
from exactness.studies.near_tie.rate import flip_probability


def test_wilson_interval_known_values():
    low, high = wilson_interval(15, 40000)
    assert low == pytest.approx(2.27e-4, rel=0.02) and high == pytest.approx(6.19e-4, rel=0.02)
    low, high = wilson_interval(0, 200)
    assert low == 0 and high == pytest.approx(0.0188, rel=0.02)


def test_flip_probability_is_the_empirical_tail():
    deltas = np.array([-3.0, -2.0, -1.0, 0.0, 1.0])
    assert flip_probability(np.array([0.0, 1.5, 5.0]), deltas).tolist() == [0.6, 0.4, 0.0]


def _tables():
    screen = pd.DataFrame({"model": ["m"] * 4, "seed": [0, 1, 2, 3], "min_gap": [0.0, 1e-6, 1e-3, 1e-2]})
    checks = pd.DataFrame({"model": ["m", "m"], "shape_mode": ["dynamic"] * 2, "seed": [0, 1],
                           "n_flipped_rows": [1, 0], "test_rule_passed": [False, True], "exact_tie": [True, False],
                           "fails_if_flipped": [True, True]})
    return screen, checks


def test_the_one_prediction_sums_flip_probabilities():
    screen, checks = _tables()
    deltas = {"m": np.array([-2e-6, -5e-7, 0.0, 5e-7])}  # two checked seeds' rows, two each
    row = prediction.predict(screen, checks, deltas, replicates=10).iloc[0]
    # P(delta < -0) = 0.5, P(delta < -1e-6) = 0.25, the two larger gaps never flip
    assert row.flips_at_run == pytest.approx(0.75) and row.failures_at_run == pytest.approx(0.75)
    assert row.measured_flips == 1 and row.measured_failures == 1


def test_seed_buckets_carry_the_seed_figures_in_our_columns():
    from exactness.studies.near_tie.rate import seed_buckets
    from exactness.studies.near_tie.sentences import rates_table

    row = seed_buckets().iloc[0]
    assert (row.screened, row.candidates, row.failed, row.flipped) == (40000, 273, 15, 17)
    assert (row.estimate.observed, row.estimate.seeds, row.estimate.exact) == (15, 40000, True)
    assert rates_table(seed_buckets()).rate[0] == "1 in 2,700 (95% 1 in 4,400 to 1 in 1,600; 15 of 40,000 seeds)"
    assert row.one_in == pytest.approx(2666.7, rel=1e-3)


def test_screen_summary_counts_candidates_and_exact_ties_per_class():
    from exactness.studies.near_tie.rate import screen_summary

    screen, _ = _tables()
    row = screen_summary(screen, 1e-5).iloc[0]
    assert (row.seeds, row.candidates, row.exact_ties, row.smallest_gap) == (4, 2, 1, 0.0)
    assert row.gap_median == pytest.approx(5.005e-4)


def test_flip_curve_puts_each_checked_seed_on_its_predicted_probability():
    from exactness.studies.near_tie.rate import flip_curve

    _, checks = _tables()
    checks = checks.assign(min_gap=[0.0, 1e-6], min_gap_ulps=[0.0, 2.0])
    curve = flip_curve(checks, {"m": np.array([-2e-6, -5e-7, 0.0, 5e-7])})
    assert curve.flipped.tolist() == [True, False] and curve.p_flip.tolist() == [0.5, 0.25]
    assert flip_curve(checks, {}).empty  # no noise law measured: no curve


def test_candidates_in_ulps_replace_the_absolute_threshold_in_the_summary():
    from exactness.studies.near_tie.rate import screen_summary

    screen, _ = _tables()
    screen = screen.assign(smallest_gap_ulps=[0.0, 50.0, 3.0, 1e5])
    assert screen_summary(screen, 1e-5).iloc[0].candidates == 2
    assert screen_summary(screen, 1e-5, threshold_ulps=10).iloc[0].candidates == 2  # seeds 0 and 2
    row = screen_summary(screen, 1e-5, threshold_ulps=100).iloc[0]
    assert row.candidates == 3 and row.gap_ulps_median == pytest.approx(26.5)
