"""The near-tie notebook's sentences and derived tables, from small hand-made tables."""

import pandas as pd
import pytest

from exactness import published
from exactness.studies.near_tie import check as near_tie_check
from exactness.studies.near_tie import cpu_kernel_sets as near_tie_kernels
from exactness.studies.near_tie import rate as near_tie_rate
from exactness.studies.near_tie import sentences as sentences
from exactness.studies.near_tie import study as near_tie
from exactness.workbook.parameter_rules import StudyParameterError

SEED_MODEL = "Wav2Vec2ConformerForPreTraining"


def _checks() -> pd.DataFrame:
    return pd.DataFrame({
        "model": [SEED_MODEL] * 4, "seed": [1, 2, 3, 4], "shape_mode": ["static"] * 4,
        "n_flipped_rows": [0, 1, 2, 1], "flip_is_min_gap_row": [False, True, False, True],
        "test_rule_passed": [True, False, False, True], "rule_forgiven": [False, False, False, True],
        "usage_unchanged": [True, False, True, True], "exact_tie": [False, True, False, False],
        "never_compared": [[], ["loss"], [], []], "tie_aware_passed": [True, True, False, True]})


def test_the_checks_sentence_counts_flips_failures_and_ties():
    assert sentences.checks_sentence(_checks()) == (
        "4 checks; 3 flipped (2 with exactly one row, 2 at the smallest-gap row); 2 failed the export test; 1 flip "
        "passed (usage unchanged: 2); exact ties among failures: 1.")
    assert sentences.checks_sentence(_checks().iloc[:0]).startswith("No seed fell below the threshold")


def test_the_seeds_candidates_are_quoted_only_at_its_threshold_and_class():
    screen = pd.DataFrame({"model": [SEED_MODEL] * 4, "seed": range(4)})
    gaps = pd.DataFrame({"model": [SEED_MODEL], "candidates": [1], "seeds": [4]})
    at_seed = sentences.candidates_sentence(screen, gaps, published.value("threshold"), 0.0, "gap < x")
    assert at_seed.startswith(f"4 seeds screened; candidates (gap < x): {SEED_MODEL} 1 (25.00%).")
    assert f"{published.value('candidates'):,.0f} of 40,000" in at_seed
    elsewhere = sentences.candidates_sentence(screen, gaps, 1e-4, 0.0, "gap < x")
    assert "The seed found" not in elsewhere


def test_rule_views_split_failed_checks_and_outputs_failing_alone():
    outputs = pd.DataFrame({"model": [SEED_MODEL] * 4, "seed": [1, 1, 2, 2], "shape_mode": ["static"] * 4,
                            "output": ["loss", "codevector_perplexity"] * 2, "passes_alone": [True, True, True, False]})
    views = near_tie_check.rule_views(_checks(), outputs)
    assert views.failed_or_forgiven.seed.tolist() == [2, 3, 4]
    assert views.failing_alone.seed.tolist() == [2]
    assert sentences.rule_sentence(_checks(), views.per_output) == (
        "The rule stopped before the last output in 1 of 4 checks; outputs failing on their own: 1 across all checks.")


def test_our_rates_sit_above_the_seeds_with_intervals_in_words():
    from exactness.compare.rates import estimate

    counted = pd.DataFrame({"model": [SEED_MODEL], "shape_mode": ["dynamic"], "screened": [2000], "failed": [1],
                            "failure_rate": [1 / 2000], "estimate": [estimate(1, 4, 4, 2000)]})
    rates = sentences.rates_table(counted)
    assert rates.rate[0] == "1 in 2,000 (95% 1 in 11,000 to 1 in 350; 1 of 2,000 seeds)"
    beside = sentences.rates_table(near_tie_rate.beside_investigation(counted))
    assert beside.model.tolist()[0] == SEED_MODEL and beside.model.tolist()[1].startswith("transformers #50575")
    assert beside.rate[0] == rates.rate[0] and beside.rate[1].endswith("15 of 40,000 seeds)")
    sentence = sentences.rate_sentence(rates, replays_example=False, seed_start=0, n_seeds=2000)
    assert "not our seeds 0 to 1999" in sentence and "the same recipe" not in sentence


def test_the_summary_counts_and_sets_the_seeds_rate_beside_ours():
    screen = pd.DataFrame({"min_gap": [1e-6, 1e-3, 2e-6]})
    rates = pd.DataFrame({"model": [SEED_MODEL], "failure_rate": [0.5]})
    defects = pd.DataFrame({"caught_by_tie_aware": [True, False, True]})
    summary = near_tie.summary_values(screen, _checks(), rates, defects, 1e-5, ["UniSpeechSatForPreTraining"])
    assert summary == {"seeds_screened": 3, "candidates": 2, "checks": 4, "flips": 3, "failures": 2,
                       "failure_rate": {SEED_MODEL: {"ours": 0.5, "seed": published.value("failure_rate")}},
                       "tie_aware_passes": 3, "defects_caught": 2, "defects_required": 3,
                       "never_argmax": ["UniSpeechSatForPreTraining"]}
    two_modes = pd.DataFrame({"model": [SEED_MODEL] * 2, "shape_mode": ["static", "dynamic"],
                              "failure_rate": [0.5, 0.1]})
    summary = near_tie.summary_values(screen, _checks(), two_modes, defects, 1e-5, [])
    assert summary["failure_rate"][SEED_MODEL]["ours"] == 0.5  # the first shape mode's, as the answers state
    # candidates chosen in ulps are counted in ulps, as the run chose them
    ulps_screen = screen.assign(smallest_gap_ulps=[5.0, 2.0, 50.0], min_gap=[1e-6, 1e-6, 1e-6])  # all 3 below 1e-5
    in_ulps = near_tie.summary_values(ulps_screen, _checks(), rates, defects, 1e-5, [], threshold_ulps=10.0)
    assert in_ulps["candidates"] == 2 and in_ulps["failures"] == summary["failures"]


def test_defects_go_on_each_classs_first_checked_seeds():
    checks = pd.DataFrame({"model": ["A", "A", "A", "B"], "seed": [5, 7, 9, 2]})
    assert near_tie.defect_seeds(checks, 2) == {"A": [5, 7], "B": [2]}


def test_a_kernel_set_that_does_not_exist_is_refused_with_the_study_error():
    with pytest.raises(StudyParameterError):
        near_tie_kernels.check_available(["no_such_kernel_set"])
    near_tie_kernels.check_available(["native"])


def test_caption_counts_come_from_the_tables_they_caption():
    import pandas as pd

    from exactness.studies.near_tie import sentences as report

    checks = pd.DataFrame({"n_flipped_rows": [0, 2, 1, 0], "test_rule_passed": [True, False, True, True],
                           "perplexity_shift": [0.0, -0.5, 0.01, 0.2], "perplexity_allowed": [0.1] * 4})
    assert report.outcomes_caption(checks) == "2 of 4 flipped, 1 failed the export test."
    assert report.allowance_caption(checks).endswith("2 of 4, 1 of them with a flipped code.")
    curve = pd.DataFrame({"flipped": [1, 0, 0], "p_flip": [0.6, 0.2, 0.05]})
    assert report.flip_curve_caption(curve) == "1 of 3 checked seeds flipped, 0.85 predicted."
    calibration = pd.DataFrame({"inside_at_run": [True, False, True]})
    assert report.calibration_caption(calibration) == "2 of 3 classes measured inside."


def test_the_rates_table_refuses_a_row_without_its_estimate():
    """A table worded already, set beside #50575's row, would show that row without a rate: refused, not blank."""
    from exactness.compare.rates import estimate

    counted = pd.DataFrame({"model": [SEED_MODEL], "screened": [2000], "estimate": [estimate(1, 4, 4, 2000)]})
    worded = sentences.rates_table(counted)
    with pytest.raises(ValueError, match="a row without one"):
        sentences.rates_table(near_tie_rate.beside_investigation(worded))
    assert sentences.rates_table(pd.DataFrame()).empty
