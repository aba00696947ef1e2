"""The near-tie answer line per class: its cause, what to do and the rate per 40,000 with its interval, each
read from the checks, the screen and the defects."""

import re

import pandas as pd
import pytest

from exactness.compare.rates import wilson_interval
from exactness.studies.near_tie import answers

SEED_MODEL = "Wav2Vec2ConformerForPreTraining"


def _screen(model, n, below):
    return pd.DataFrame({"model": model, "seed": range(n), "min_gap": [1e-6] * below + [1e-2] * (n - below)})


def _checks(model, flipped, passed, aligned=None, ties=None):
    n = len(flipped)
    return pd.DataFrame({"model": model, "seed": range(n), "shape_mode": "static", "n_flipped_rows": flipped,
                         "test_rule_passed": passed, "aligned_ok": aligned or [True] * n,
                         "exact_tie": ties or [False] * n, "tie_aware_passed": True})


_DEFECTS = pd.DataFrame({"caught_by_tie_aware": [True, True], "caught_by_test_rule": [True, False]})


def _numbers(text):
    """The figures of a sentence, without the interval's level ("95%")."""
    return [float(x.replace(",", "")) for x in re.findall(r"\d[\d,]*\.?\d*(?:e-?\d+)?", text.replace("95%", ""))]


def test_flipped_near_ties_give_the_rate_as_one_in_n_with_its_interval_and_the_tie_aware_action():
    checks = _checks(SEED_MODEL, [1, 1, 1, 0], [False, False, True, True])
    (line,) = answers.answers(_screen(SEED_MODEL, 4000, 4), checks, pd.DataFrame(), _DEFECTS, 1e-4, 2e-5)
    low, high = wilson_interval(2, 4000)
    assert line.cause == "near-tie" and line.action.startswith("compare tie-aware") and line.verified
    assert line.failures_per_40000 == pytest.approx(20) and line.failures_low == pytest.approx(40000 * low)
    assert line.failures_high == pytest.approx(40000 * high)
    assert _numbers(line.rate)[:6] == pytest.approx([1, 2000, 1, 1 / low, 1, 1 / high], rel=0.05)
    assert line.rate.endswith("; 2 of 4,000 seeds)") and line.flips.endswith("; 3 of 4,000 seeds)")


def test_every_failure_an_exact_tie_is_called_so_and_an_unexplained_failure_is_undecided():
    ties = _checks(SEED_MODEL, [1, 1], [False, False], ties=[True, True])
    assert answers.answers(_screen(SEED_MODEL, 100, 2), ties, pd.DataFrame(), _DEFECTS, 1e-4, 2e-5)[0].cause == \
        "exact tie"
    bug = _checks(SEED_MODEL, [0, 1], [False, False])
    (line,) = answers.answers(_screen(SEED_MODEL, 100, 2), bug, pd.DataFrame(), _DEFECTS, 1e-4, 2e-5)
    assert line.cause == "undecided" and "1 of 2 failures" in line.proof and "bug" in line.action


def test_no_failure_in_few_seeds_is_undecided_with_the_seeds_that_decide_and_many_seeds_never_flip():
    few = answers.answers(_screen(SEED_MODEL, 200, 1), _checks(SEED_MODEL, [0], [True]), pd.DataFrame(), _DEFECTS,
                          1e-4, 2e-5)[0]
    assert few.cause == "undecided" and re.search(r"-p n_seeds \d+", few.action)
    assert "a lower bound" not in few.rate and few.rate.startswith("none in 200 seeds")
    many = answers.answers(_screen(SEED_MODEL, 200_000, 1), _checks(SEED_MODEL, [0], [True]), pd.DataFrame(),
                           _DEFECTS, 1e-4, 2e-5)[0]
    assert many.cause == "never flips" and many.failures_high < 15
    needed = int(re.search(r"-p n_seeds (\d+)", few.action).group(1))  # the count the action names decides
    enough, short = (answers.answers(_screen(SEED_MODEL, n, 1), _checks(SEED_MODEL, [0], [True]), pd.DataFrame(),
                                     _DEFECTS, 1e-4, 2e-5)[0] for n in (needed, needed - 1))
    assert (enough.cause, short.cause) == ("never flips", "undecided")


def test_a_capped_check_says_the_rate_is_a_range_up_to_every_unchecked_candidate():
    checks = _checks(SEED_MODEL, [1], [False])
    found = answers.answers(_screen(SEED_MODEL, 1000, 5), checks, pd.DataFrame(), _DEFECTS, 1e-4, 2e-5,
                            immune=["UniSpeechSatForPreTraining"])
    assert [a.subject for a in found] == [SEED_MODEL, "UniSpeechSatForPreTraining"]
    # 1 of 5 candidates checked: the four unchecked may all fail, as discrete_ops says of its unchecked candidates
    assert "only 1 of 5 candidates checked" in found[0].rate and "the upper end a worst case" in found[0].rate
    assert found[1].cause == "nothing reaches" and found[1].failures_per_40000 == 0
    assert found[1].rate == "never (no argmax runs)" and found[1].flips == "never (no discrete op can flip)"
    # UniSpeechSat is not on the export test's skip list: nothing to remove
    assert "remove the skip" not in found[1].action


def test_without_a_verified_tie_aware_comparison_the_action_excludes_what_a_flip_changed():
    checks = _checks(SEED_MODEL, [1], [False]).assign(tie_aware_passed=False)
    outputs = pd.DataFrame({"model": SEED_MODEL, "seed": 0, "shape_mode": "static",
                            "output": ["codevector_perplexity", "projected_quantized_states", "projected_states"],
                            "passes_alone": [False, True, True], "n_mismatched": [1, 16, 0]})
    (line,) = answers.answers(_screen(SEED_MODEL, 100, 1), checks, outputs, _DEFECTS, 1e-4, 2e-5)
    # as the discrete-ops engine says: what a flip moved beyond the tolerance goes, even where the 5% allowance
    # would forgive it (16 of 7,280 elements)
    assert line.action == ("compare projected_states; exclude codevector_perplexity, projected_quantized_states "
                           "(or compare them tie-aware)")
    assert line.verified is False


def test_unispeechsats_skip_reason_from_50575_is_set_against_its_forward():
    (line,) = answers.answers(_screen(SEED_MODEL, 10, 0).iloc[:0], pd.DataFrame(), pd.DataFrame(), pd.DataFrame(),
                              1e-4, 2e-5, immune=["UniSpeechSatForPreTraining"])
    assert line.cause == "nothing reaches" and "has the same argmax" in line.proof and "does not hold" in line.proof


def test_candidates_left_unchecked_widen_the_rate_to_a_worst_case_as_in_discrete_ops():
    """One rate estimate for both studies: 4 of 10 candidates checked, one failing; the six unchecked may all fail."""
    from exactness.compare.rates import PER, estimate

    checks = _checks(SEED_MODEL, [1, 0, 0, 0], [False, True, True, True])
    (line,) = answers.answers(_screen(SEED_MODEL, 2000, 10), checks, pd.DataFrame(), _DEFECTS, 1e-4, 2e-5)
    expected = estimate(1, 4, 10, 2000)
    assert expected.worst_case and not expected.exact
    assert (line.failures_per_40000, line.failures_low, line.failures_high) == (expected.per, expected.low,
                                                                                 expected.high)
    assert line.failures_high == pytest.approx(PER * 7 / 2000) and line.failures_low == pytest.approx(PER / 2000)


def test_each_class_excludes_only_what_its_own_flips_moved():
    other = "Wav2Vec2ForPreTraining"
    checks = pd.concat([_checks(SEED_MODEL, [1], [False]), _checks(other, [1], [False])]).assign(
        tie_aware_passed=False)
    outputs = pd.DataFrame({"model": [SEED_MODEL] * 3 + [other] * 3, "seed": 0, "shape_mode": "static",
                            "output": ["codevector_perplexity", "projected_quantized_states", "projected_states"] * 2,
                            "passes_alone": [False, True, True] * 2, "n_mismatched": [1, 16, 0, 1, 0, 0]})
    screen = pd.concat([_screen(SEED_MODEL, 100, 1), _screen(other, 100, 1)])
    found = {a.subject: a for a in answers.answers(screen, checks, outputs, _DEFECTS, 1e-4, 2e-5)}
    assert "exclude codevector_perplexity, projected_quantized_states" in found[SEED_MODEL].action
    assert found[other].action.startswith("compare projected_quantized_states, projected_states; exclude "
                                          "codevector_perplexity")
