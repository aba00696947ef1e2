"""The near-tie findings follow the tables: tables that contradict a claim change its verdict and its words."""

import pandas as pd
import pytest

from exactness.findings import VERDICTS
from exactness.studies import near_tie, near_tie_findings
from exactness.studies.near_tie_findings import (
    SEED_MODEL,
    candidates_finding,
    class_finding,
    failure_causes,
    noise_finding,
    poisson_interval,
    prediction_finding,
    tie_aware_finding,
    tolerance_finding,
)

OTHER = "UniSpeechForPreTraining"


def _checks(model=SEED_MODEL, flipped=(1, 0), passed=(False, True), aligned=None, ties=None):
    n = len(flipped)
    aligned, ties = aligned or (True,) * n, ties or (False,) * n
    return pd.DataFrame({"model": [model] * n, "seed": list(range(n)), "shape_mode": ["dynamic"] * n,
                         "n_flipped_rows": list(flipped), "test_rule_passed": list(passed),
                         "aligned_ok": list(aligned), "exact_tie": list(ties), "min_gap": [0.0] * n,
                         "tie_aware_passed": [True] * n})


def _rates(model=SEED_MODEL, failed=1, screened=2000, checked=2, below=2):
    return pd.DataFrame([{"model": model, "shape_mode": "dynamic", "screened": screened, "failed": failed,
                          "checked": checked, "below_threshold": below}])


def test_failures_that_are_flipped_ties_are_named_so_and_the_seed_rate_is_compared():
    finding = class_finding(SEED_MODEL, _checks(), _rates(failed=1))
    assert "the one failure is a flipped near-tie" in finding.claim
    assert finding.verdict == "reproduced" and "section 5" in finding.seed
    assert "1 failures in 2,000 seeds, 1 in 2,000" in finding.ours


def test_a_failure_without_a_flip_is_reported_as_a_possible_bug():
    checks = _checks(flipped=(0, 0), passed=(False, True))
    finding = class_finding(SEED_MODEL, checks, _rates(failed=1))
    assert "possible bug" in finding.claim and "without any flipped code" in finding.claim
    assert finding.verdict == "differs" and "possible bug" in finding.why


def test_a_flip_that_stays_apart_with_ort_codes_forced_is_not_a_tie():
    checks = _checks(flipped=(1, 0), passed=(False, True), aligned=(False, True))
    causes = failure_causes(checks).iloc[0]
    assert (causes.flipped_near_tie, causes.flip_not_aligned, causes.no_flip) == (0, 1, 0)
    assert "still differ with ORT's codes forced" in class_finding(SEED_MODEL, checks, _rates()).claim


def test_a_rate_far_from_the_seeds_differs_and_a_zero_shows_what_was_expected():
    many = _checks(flipped=(1,) * 40, passed=(False,) * 40, aligned=(True,) * 40)
    assert class_finding(SEED_MODEL, many, _rates(failed=40, checked=40, below=40)).verdict == "differs"
    none = class_finding(SEED_MODEL, _checks(flipped=(0, 0), passed=(True, True)), _rates(failed=0))
    assert none.verdict == "reproduced" and "no check failed" in none.claim
    assert "at the seed's rate 0.75 were expected" in none.ours


def test_other_classes_carry_no_seed_figure():
    finding = class_finding(OTHER, _checks(model=OTHER), _rates(model=OTHER))
    assert finding.verdict == "new" and finding.seed == ""


def test_capped_checks_make_the_rate_not_comparable():
    finding = class_finding(SEED_MODEL, _checks(flipped=(0,), passed=(True,), aligned=(True,), ties=(False,)),
                            _rates(failed=0, checked=1, below=4))
    assert finding.verdict == "not comparable" and "only 1 of 4 candidates checked" in finding.claim


def _screen(n_below, n=2000, model=SEED_MODEL):
    return pd.DataFrame({"model": model, "seed": range(n), "min_gap": [1e-6] * n_below + [1e-2] * (n - n_below)})


def test_candidates_compare_with_the_seed_only_at_its_threshold():
    checks = _checks(ties=(True, False))
    same = candidates_finding(_screen(14), checks, 1.5e-5)
    assert same.verdict == "reproduced" and "273 candidates" in same.seed
    assert "1 checked seeds had an exact tie (gap 0), 1 of them flipped" in same.claim
    assert candidates_finding(_screen(80), checks, 1.5e-5).verdict == "differs"
    other = candidates_finding(_screen(14), checks, 1e-4)
    assert other.verdict == "not comparable" and "other threshold" in other.why
    assert candidates_finding(_screen(14, model=OTHER), checks, 1.5e-5).verdict == "new"


def test_poisson_interval_is_central_and_covers_zero_for_small_means():
    assert poisson_interval(0.15) == (0, 1)
    assert poisson_interval(10.0) == (4, 17)  # the central 95% of Poisson(10)


def _prediction(measured_flips):
    return pd.DataFrame([{"model": SEED_MODEL, "predicted_flips": 2.0, "measured_flips": measured_flips,
                          "predicted_failures": 1.5, "measured_failures": min(measured_flips, 1)}])


def test_prediction_verdict_follows_the_poisson_interval():
    assert "predicts the rate" in prediction_finding(_prediction(3)).claim
    missed = prediction_finding(_prediction(12)).claim
    assert "does not predict the rate in 1 of 1 classes" in missed and SEED_MODEL in missed


def _noise(scale):
    return pd.DataFrame({"model": SEED_MODEL, "label": ["conv_features", "extract_features", "logits"],
                         "passing": [2.3e-6 * scale, 1.9e-6 * scale, 9.5e-6 * scale], "seed_000_median": 0.0})


def test_noise_is_reproduced_within_a_factor_and_differs_beyond():
    assert noise_finding(_noise(1.2)).verdict == "reproduced"
    louder = noise_finding(_noise(20))
    assert louder.verdict == "differs" and "not all within" in louder.claim
    assert noise_finding(_noise(1).assign(model=OTHER)) is None  # the seed measured the conformer only


def _tolerance(median, worst):
    return pd.DataFrame([{"model": SEED_MODEL, "simulated_flips": 5, "rtol_one_flip_median": median,
                          "rtol_one_flip_worst": worst}])


def test_tolerance_quotes_each_class_median_and_compares_orders_of_magnitude():
    same = tolerance_finding(_tolerance(3e-3, 9e-3))
    assert same.verdict == "reproduced" and "median 0.0030" in same.claim
    assert tolerance_finding(_tolerance(1e-5, 2e-5)).verdict == "differs"


def test_tie_aware_claim_turns_when_a_defect_slips_through():
    checks = _checks()
    defects = pd.DataFrame({"caught_by_tie_aware": [True, False], "caught_by_test_rule": [True, True]})
    assert "does not keep value checks" in tie_aware_finding(checks, defects, 1e-5).claim
    assert "keeps value checks" in tie_aware_finding(checks, defects.assign(caught_by_tie_aware=True), 1e-5).claim


def test_findings_are_three_to_seven_valid_records_and_reexported():
    assert near_tie.findings is near_tie_findings.findings
    checks = _checks().assign(logit_noise=1e-6)
    out = near_tie.findings(_screen(14), checks, _rates(), _prediction(1), _noise(1), _tolerance(3e-3, 9e-3),
                            pd.DataFrame({"caught_by_tie_aware": [True], "caught_by_test_rule": [False]}), 1.5e-5,
                            2e-6, ["UniSpeechSatForPreTraining"])
    assert 3 <= len(out) <= 7 and all(f.verdict in VERDICTS for f in out)
    assert out[0].claim.startswith(SEED_MODEL) and "UniSpeechSatForPreTraining never calls" in out[1].claim


@pytest.mark.parametrize("k", [0, 3])
def test_class_finding_never_prints_inf(k):
    finding = class_finding(OTHER, _checks(model=OTHER), _rates(model=OTHER, failed=k))
    assert "inf" not in finding.claim and "inf" not in finding.ours
