"""The discrete-ops verdicts read their rows: each cause needs its proof, the export test's rule is replicated
from counts, rates come from a stratified sample, and "never flips" needs the seeds to bound the rate."""

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import torch

from exactness.compare.export_rule import export_test_rule
from exactness.compare.rates import wilson_interval
from exactness.engine import answers as engine_answers
from exactness.engine import candidates as engine_candidates
from exactness.engine import outputs as engine_outputs
from exactness.engine import verdicts
from exactness.engine.evidence import Defect, DefectSign, Evidence, Flips, Refuted, Undecided, Values, ValueState
from exactness.engine.rows import GraphRow, MarginRow, OutputRow, ScreenRow, SeedRow, frame
from exactness.engine.verdict_words import action_of, proof_of
from exactness.studies.discrete_ops import answers as discrete_ops_answers
from exactness.studies.discrete_ops import check, figures, findings, sentences, study
from exactness.studies.discrete_ops.study import Result

MODEL = "XLMForQuestionAnswering"


def _output(seed, output="y", **kw):
    base = dict(model=MODEL, shape_mode="static", seed=seed, output=output, floating=True, same_shape=True, numel=100,
                eager_f64_err=1e-7, ort_f64_err=2e-7, scale_ulp=6e-8, noise_bound=16e-7, within_noise=True)
    return OutputRow(**{**base, **kw})


def _seed(seed, passed=True, flipped=False, phase="calibration"):
    return SeedRow(MODEL, "static", seed, phase, "template", flipped, False, passed, "", False, "", "float64", 0.1)


def _margin(seed, flipped=0.0, margin_ulps=5.0, **kw):
    base = dict(model=MODEL, shape_mode="static", seed=seed, node="t", op_type="TopK", category="topk",
                matched_by="traced call number", decisions=13, min_margin_ulps=margin_ulps,
                exact_ties=int(margin_ulps == 0), match_verified=True, match_trusted=True, read_noise_ulps=2.0,
                flipped=flipped, flipped_margin_ulps=margin_ulps if flipped else float("nan"))
    return MarginRow(**{**base, **kw})


OPS = pd.DataFrame([{"model": MODEL, "shape_mode": "static", "node": "t", "op_type": "TopK", "category": "topk",
                     "scope": "qa", "reaches_outputs": ["idx"], "on_output_path": True, "can_flip": True}])


def _tables(outputs, seeds, margins, ops=OPS, screened=0):
    screen = frame([ScreenRow(MODEL, "static", s, "t", 13, 0.0, 100.0, 0, 0) for s in range(screened)], ScreenRow)
    screen = screen.assign(in_reach=screen.seed < 0) if len(screen) else screen
    return verdicts.ClassTables(pd.Series(vars(GraphRow(MODEL, "static"))), ops, screen, frame(margins, MarginRow),
                                frame(outputs, OutputRow), frame(seeds, SeedRow))


def test_an_output_beyond_the_float64_bound_is_a_defect_and_within_it_is_noise():
    quiet = _tables([_output(0, output="idx")], [_seed(0)], [_margin(0)], ops=OPS.iloc[:0])
    found = verdicts.verdict(quiet, verdicts.RatePolicy(), 16.0)
    assert found.cause is verdicts.Cause.NOTHING_REACHES
    assert (found.evidence.counted, found.evidence.values) == (0, Values(ValueState.CLEAN, 1, 0.125))
    # "remove the skip" rests on what supports it, not on a rate from a handful of seeds
    said = action_of(found)
    assert "remove the skip" in said and "no seed can flip" in said and "0.12 of the" in said
    failing = _tables([_output(0, output="idx")], [_seed(0, passed=False)], [], ops=OPS.iloc[:0])
    assert verdicts.verdict(failing, verdicts.RatePolicy(), 16.0).cause is verdicts.Cause.FLOAT_NOISE
    drifted = _tables([_output(0, ort_f64_err=1e-3, within_noise=False)], [_seed(0)], [], ops=OPS.iloc[:0])
    found = verdicts.verdict(drifted, verdicts.RatePolicy(), 16.0)
    assert found.cause is verdicts.Cause.DEFECT and found.defect_seed == 0
    defect = found.evidence.defect
    assert (defect.sign, defect.output, defect.ort_error, defect.times) == (DefectSign.BEYOND_NOISE, "y", 1e-3, 1e4)


def test_a_verdict_holds_decisions_and_the_word_layer_words_them():
    """A class's verdict holds no sentence, as a field or a property: `verdict_words` words it where a page is
    written (and `engine.verdicts` imports no word module: tests/test_import_structure.py)."""
    import dataclasses

    attributes = {f.name for f in dataclasses.fields(verdicts.ClassVerdict)} | set(vars(verdicts.ClassVerdict))
    assert not {"proof", "action", "refutation", "words"} & attributes
    cases = {"nothing reaches": _tables([_output(0, output="idx")], [_seed(0)], [_margin(0)], ops=OPS.iloc[:0]),
             "defect": _tables([_output(0, ort_f64_err=1e-3, within_noise=False)], [_seed(0)], [], ops=OPS.iloc[:0]),
             "tie": _tables([_output(0, output="idx", reached_by_flip=True, explained_by_flip=True)],
                            [_seed(0, flipped=True)], [_margin(0, 1, 0.0)])}
    found = {name: verdicts.verdict(t, verdicts.RatePolicy(), 16.0) for name, t in cases.items()}
    assert [v.cause for v in found.values()] == [verdicts.Cause.NOTHING_REACHES, verdicts.Cause.DEFECT,
                                                 verdicts.Cause.EXACT_TIE]
    assert all(proof_of(v) and action_of(v) for v in found.values())


def test_a_nan_on_one_side_is_a_defect_even_where_a_flip_follows():
    flipped = _tables([_output(0, output="idx", reached_by_flip=True, explained_by_flip=True, within_noise=None)],
                      [_seed(0, flipped=True)], [_margin(0, flipped=1, margin_ulps=0.0, reads_nonfinite_ort=13,
                                                               reads_nonfinite_ort_only=13)])
    found = verdicts.verdict(flipped, verdicts.RatePolicy(), 16.0)
    defect = found.evidence.defect
    assert found.cause is verdicts.Cause.DEFECT and defect.sign is DefectSign.NONFINITE_INPUT
    assert (defect.count, defect.of, defect.eager_count) == (13, 13, 0)


def test_flips_at_exact_ties_and_within_reach_are_ties_and_beyond_reach_a_defect():
    reached = [_output(0, output="idx", reached_by_flip=True, explained_by_flip=True, within_noise=None,
                       rule_mismatched=3), _output(0, output="y")]
    exact = verdicts.verdict(_tables(reached, [_seed(0, flipped=True)], [_margin(0, 1, 0.0)]), verdicts.RatePolicy(),
                             16.0)
    near = verdicts.verdict(_tables(reached, [_seed(0, flipped=True)], [_margin(0, 1, 3.0)]), verdicts.RatePolicy(),
                            16.0)
    far = verdicts.verdict(_tables(reached, [_seed(0, flipped=True)], [_margin(0, 1, 300.0)]), verdicts.RatePolicy(),
                           16.0)
    assert exact.cause is verdicts.Cause.EXACT_TIE and near.cause is verdicts.Cause.NEAR_TIE
    assert far.cause is verdicts.Cause.DEFECT and far.evidence.defect.sign is DefectSign.FLIP_BEYOND_REACH
    assert (far.evidence.defect.margin_ulps, far.evidence.defect.reach_ulps) == (300.0, 16.0)
    assert exact.exclude == ["idx"] and exact.compare == ["y"]  # only the output the flip moved is left out
    # a near-tie class whose flips include an exact tie says which seed, not "every failure a near-tie"
    both = verdicts.verdict(_tables(reached * 2, [_seed(0, flipped=True), _seed(181, flipped=True)],
                                    [_margin(0, 1, 3.0), _margin(181, 1, 0.0)]), verdicts.RatePolicy(), 16.0)
    assert both.cause is verdicts.Cause.NEAR_TIE and both.evidence.flips.tied_seeds == (181,)
    assert near.evidence.flips.tied_seeds == ()
    assert "1 of the 2 flipped seeds on exact ties (0 ulps: seed 181)" in proof_of(both)  # the words, once


def test_flips_that_move_no_output_beyond_the_tolerance_leave_every_output_compared():
    reached = [_output(0, output="idx", reached_by_flip=True, explained_by_flip=True, rule_mismatched=0),
               _output(0, output="y")]
    found = verdicts.verdict(_tables(reached, [_seed(0, flipped=True)], [_margin(0, 1, 0.0)]), verdicts.RatePolicy(),
                             16.0)
    assert found.cause is verdicts.Cause.EXACT_TIE and found.exclude == [] and found.compare == ["idx", "y"]
    assert action_of(found) == ("compare every output at the test's tolerance: no flip moved one beyond the test's "
                            "tolerance on 1 checked seed")
    noisy = verdicts.verdict(_tables(reached, [_seed(0, passed=False, flipped=True)], [_margin(0, 1, 0.0)]),
                             verdicts.RatePolicy(), 16.0)  # the test's rule fails on noise the flips did not make
    assert action_of(noisy).startswith("compare every output at a tolerance the noise needs (the export test's fails "
                                   "on 1 of 1 seeds)")


def test_never_flips_needs_enough_seeds_and_otherwise_says_how_many():
    policy = verdicts.RatePolicy(rate=1e-3)
    needed = policy.seeds_needed()
    assert policy.upper_bound(needed) < 1e-3 <= policy.upper_bound(needed - 1)
    few = verdicts.verdict(_tables([_output(0, output="idx")], [_seed(0)], [_margin(0)], screened=200), policy, 16.0)
    many = verdicts.verdict(_tables([_output(0, output="idx")], [_seed(0)], [_margin(0)], screened=needed), policy,
                            16.0)
    assert few.cause is verdicts.Cause.UNDECIDED and few.seeds_needed == needed and f"{needed:,}" in action_of(few)
    assert many.cause is verdicts.Cause.NEVER_FLIPS
    assert verdicts.RatePolicy().seeds_needed() == math.ceil(math.log(0.05) / math.log1p(-15 / 40000))


def test_the_rate_is_wilsons_when_every_candidate_is_checked_and_bounded_by_the_unchecked_otherwise():
    whole = verdicts.estimate(3, 30, 30, 2000)
    low, high = wilson_interval(3, 2000)
    assert (whole.per, whole.low, whole.high) == pytest.approx((60.0, 40000 * low, 40000 * high))
    # 10 of 40 candidates checked smallest margins first, 2 flipped: not a random sample, so between 2 and 32
    capped = verdicts.estimate(2, 10, 40, 2000)
    assert (capped.low, capped.high) == pytest.approx((2 / 2000 * 40000, 32 / 2000 * 40000))
    assert capped.per == pytest.approx(8 / 2000 * 40000)
    # its upper end counts every unchecked candidate as failing: said to be a worst case, never "95%"
    assert capped.worst_case and not whole.worst_case
    assert "worst case" in engine_answers.rate_words(capped) and "95%" not in engine_answers.rate_words(capped)
    assert "95%" in engine_answers.rate_words(whole) and "worst case" not in engine_answers.rate_words(whole)
    # failures beyond reach only from their own sample (calibration seeds there)
    beyond = verdicts.estimate(0, 10, 10, 2000, outside=(1, 8), size_out=1990)
    assert beyond.per == pytest.approx(1990 / 8 / 2000 * 40000) and beyond.high > beyond.per > beyond.low > 0


def test_exact_ties_sampled_in_seed_order_are_rated_from_the_sample_scaled_to_the_stratum():
    # 2,000 screened seeds, every one an exact tie, 40 checked in seed order, 24 flipped
    sampled = verdicts.estimate(0, 0, 0, 2000, sampled=(24, 40, 2000))
    low, high = wilson_interval(24, 40)
    assert (sampled.per, sampled.low, sampled.high) == pytest.approx((40000 * 24 / 40, 40000 * low, 40000 * high))
    assert (sampled.observed, sampled.checked) == (24, 40)
    # every tie flipped: the interval never reaches past the seeds that could still flip, nor below those seen
    every = verdicts.estimate(0, 0, 0, 2000, sampled=(40, 40, 2000))
    assert every.per == 40000 and every.high == 40000 and every.low == pytest.approx(40000 * wilson_interval(40, 40)[0])
    tight = verdicts.estimate(0, 0, 0, 50, sampled=(40, 40, 50))
    assert tight.low >= 40000 * 40 / 50
    # a sample that is the whole stratum is an exact count, as a stratum checked whole is
    whole = verdicts.estimate(1, 5, 5, 2000, sampled=(3, 40, 40))
    assert (whole.per, whole.low, whole.high) == pytest.approx(tuple(x for x in (
        40000 * 4 / 2000, 40000 * wilson_interval(4, 2000)[0], 40000 * wilson_interval(4, 2000)[1])))


def test_candidates_sample_exact_ties_in_seed_order_and_take_the_rest_smallest_margins_first():
    rows = [(0, 0.0, 0), (1, 3.0, 0), (2, 0.0, 0), (3, 0.0, 0), (4, 1.0, 0), (5, 0.0, 0), (6, 99.0, 0),
            (7, float("nan"), 2), (8, 0.0, 0)]
    screen = pd.DataFrame([{"seed": s, "min_margin_ulps": m, "reads_nonfinite": n} for s, m, n in rows])
    # reach 16: seeds 6 is beyond; ties 0 2 3 5 8, others 4 1 and the non-finite 7 (first)
    assert engine_candidates.candidates(screen, 16.0, exclude={0}, cap=10, tie_checks=3) == [1, 2, 3, 4, 7]
    assert engine_candidates.candidates(screen, 16.0, exclude={0}, cap=3, tie_checks=3) == [2, 3, 7]
    assert engine_candidates.candidates(screen, 16.0, exclude=set(), cap=10, tie_checks=0) == [1, 4, 7]
    assert engine_candidates.candidates(screen, 16.0, exclude={0}) == [1, 2, 3, 4, 5, 7, 8]  # no cap: every one
    assert engine_candidates.in_reach(screen, 16.0) == {0: True, 1: True, 2: True, 3: True, 4: True, 5: True,
                                                        6: False, 7: True, 8: True}


def test_a_flip_among_values_that_are_not_finite_is_a_defect_not_a_tie():
    both_nan = _tables([_output(0, output="idx", reached_by_flip=True, explained_by_flip=True, within_noise=None)],
                       [_seed(0, flipped=True)], [_margin(0, 1, float("nan"), flipped_nonfinite=13)])
    found = verdicts.verdict(both_nan, verdicts.RatePolicy(), 16.0)
    assert found.cause is verdicts.Cause.DEFECT and found.evidence.defect.sign is DefectSign.FLIP_AMONG_NONFINITE


def test_a_nan_eager_itself_makes_is_the_models_defect_judged_after_every_export_sign():
    def sign(outputs, margins=(), passed=False, ops=OPS):
        found = verdicts.verdict(_tables(outputs, [_seed(0, passed=passed, flipped=bool(margins))], list(margins),
                                         ops=ops), verdicts.RatePolicy(), 16.0)
        return found.evidence.defect.sign if found.cause is verdicts.Cause.DEFECT else found.cause

    # NaN at the same places on both sides: not close under the rule, whatever ORT computes
    nan = _output(0, nan_in_eager=7, rule_mismatched=7)
    assert sign([nan], ops=OPS.iloc[:0]) is DefectSign.NAN_IN_EAGER
    # NaN in eager alone (ORT's ReduceMax skips a NaN that torch's amax keeps): the model's too, never the export's
    assert sign([_output(0, nan_in_eager=4, nonfinite_mismatch=4, within_noise=True)],
                ops=OPS.iloc[:0]) is DefectSign.NAN_IN_EAGER
    # what ORT alone makes non-finite is the export's, said first
    assert sign([_output(0, nan_in_eager=7, nonfinite_mismatch=3, nonfinite_by_export=3)],
                ops=OPS.iloc[:0]) is DefectSign.NONFINITE_OUTPUT
    # an export defect at an op outranks eager's NaN in another output, on the same seed or another
    far = _margin(0, 1, 300.0)  # a verified, finite flip 300 ulps from a tie
    assert sign([_output(0, output="idx", reached_by_flip=True, explained_by_flip=True, within_noise=None)],
                [far]) is DefectSign.FLIP_BEYOND_REACH
    assert sign([_output(0, output="idx", reached_by_flip=True, explained_by_flip=True, within_noise=None),
                 _output(0, output="z", nan_in_eager=2)], [far]) is DefectSign.FLIP_BEYOND_REACH
    # a flip among values eager itself reads a NaN in: no tie, and the model's; without eager's NaN: the export's
    flipped = [_output(0, output="idx", reached_by_flip=True, explained_by_flip=True, within_noise=None)]
    eager_too = _margin(0, 1, float("nan"), flipped_nonfinite=13, flipped_nan_eager=13,
                        reads_nonfinite_eager=13, reads_nonfinite_ort=13)
    assert sign(flipped, [eager_too]) is DefectSign.NAN_IN_EAGER
    ort_alone = _margin(0, 1, 3.0, flipped_nonfinite=1, reads_nonfinite_eager=1, reads_nonfinite_ort=1)
    assert sign(flipped, [ort_alone]) is DefectSign.FLIP_AMONG_NONFINITE
    # one call flipping twice, once among eager's NaN and once on finite values far from a tie: the export's
    mixed = _margin(0, 2, 300.0, flipped_nonfinite=1, flipped_nan_eager=1, reads_nonfinite_eager=1,
                    reads_nonfinite_ort=1)
    assert sign(flipped, [mixed]) is DefectSign.FLIP_BEYOND_REACH
    # forcing ORT's choices cannot explain eager's own NaN away: the model's, not "not explained"
    assert sign([_output(0, output="idx", reached_by_flip=True, explained_by_flip=False, within_noise=None,
                         nan_in_eager=3)], [_margin(0, 1, 0.0)]) is DefectSign.NAN_IN_EAGER
    found = verdicts.verdict(_tables(flipped, [_seed(0, flipped=True)], [eager_too]), verdicts.RatePolicy(), 16.0)
    assert (found.evidence.defect.eager_count, found.evidence.defect.op_type) == (13, "TopK")
    # a NaN the 5% allowance forgives is said to be forgiven, not to be within the tolerance
    forgiven = verdicts.verdict(_tables([_output(0, nan_in_eager=1, rule_mismatched=1)], [_seed(0, passed=True)],
                                        [], ops=OPS.iloc[:0]), verdicts.RatePolicy(), 16.0)
    assert "allowance" in action_of(forgiven) and "within its tolerance" not in action_of(forgiven)


def test_an_infinity_eager_makes_and_ort_changes_is_the_exports_and_eagers_nan_the_models():
    def row(eager, ort):
        found = OutputRow(MODEL, "static", 0, "y", True, True)
        engine_outputs.compare_output(found, np.array(ort, np.float32), torch.tensor(eager, dtype=torch.float32),
                                      None, 1e-3, 1e-3)
        return found.nonfinite_by_export, found.nan_in_eager

    inf, nan = float("inf"), float("nan")
    assert row([-inf, 1.0], [-3.4028235e38, 1.0]) == (1, 0)  # a max over a masked window: ORT's MaxPool differs
    assert row([-inf, 1.0], [-inf, 1.0]) == (0, 0)  # the same mask on both sides: close under the rule
    assert row([nan, 1.0], [1.0, 1.0]) == (0, 1) and row([nan, 1.0], [nan, 1.0]) == (0, 1)
    assert row([1.0, 1.0], [nan, 1.0]) == (1, 0)


def test_a_flip_downstream_of_another_is_not_judged_by_its_margin():
    reached = [_output(0, output="idx", reached_by_flip=True, explained_by_flip=True, within_noise=None,
                       rule_mismatched=3)]
    cascade = _margin(0, 1, 300.0, match_verified=False)  # reads other values after an upstream flip
    found = verdicts.verdict(_tables(reached, [_seed(0, flipped=True)], [cascade]), verdicts.RatePolicy(), 16.0)
    assert found.cause is verdicts.Cause.NEAR_TIE


def test_never_flips_needs_the_values_proven_too():
    failing = _tables([_output(0, output="y")], [_seed(0, passed=False)], [_margin(0)],
                      screened=verdicts.RatePolicy().seeds_needed() + 10)
    found = verdicts.verdict(failing, verdicts.RatePolicy(), 16.0)
    assert found.cause is verdicts.Cause.FLOAT_NOISE and found.evidence.values.state is ValueState.FAILING
    assert (found.evidence.failing, found.evidence.checked) == (1, 1)


@pytest.mark.parametrize("actual, expected", [
    ({"a": torch.tensor([1.0] * 100), "b": torch.tensor(2.0)},
     {"a": torch.tensor([1.0] * 100), "b": torch.tensor(2.5)}),
    ({"a": torch.tensor([1.0] * 99 + [9.0]), "b": torch.tensor(2.5)},
     {"a": torch.tensor([1.0] * 100), "b": torch.tensor(9.0)}),  # forgiven first: b is never compared
    ({"a": torch.tensor([1.0] * 90 + [9.0] * 10)}, {"a": torch.tensor([1.0] * 100)}),
    ({"a": torch.tensor([float("nan")] * 2 + [1.0] * 98)}, {"a": torch.tensor([float("nan")] * 2 + [1.0] * 98)}),
    ({"a": torch.tensor(1.0)}, {"a": torch.tensor(1.0005)}),
    ({"a": torch.tensor([1001, 2001, 3001])}, {"a": torch.tensor([1000, 2000, 3000])}),  # integers get atol/rtol too
    ({"a": torch.tensor([1, 2, 9])}, {"a": torch.tensor([1, 2, 3])}),
])
def test_the_rule_from_counts_is_the_export_tests_rule(actual, expected):
    rows = []
    for name in expected:
        row = OutputRow(MODEL, "static", 0, name, expected[name].is_floating_point(), True)
        engine_outputs.compare_output(row, actual[name].numpy(), expected[name], None, 1e-3, 1e-3)
        rows.append(row)
    assert verdicts.rule_passes(frame(rows, OutputRow)) == bool(export_test_rule(actual, expected))


def test_counts_taken_at_a_rules_tolerances_judge_as_the_rule_applied_to_the_tensors():
    """A checkout's rule widens the tolerances where an output is half precision: counted at `rule.tolerances` (as
    the discrete-ops check counts), the rule from counts is the rule applied; counted at the test's own, it is not."""
    from exactness.compare.export_rule import Rule

    rule = Rule("newer", half_tolerance=1e-2)
    expected = {"a": torch.tensor([1.0] * 100, dtype=torch.float16)}
    actual = {"a": torch.tensor([1.0] * 90 + [1.005] * 10, dtype=torch.float16)}  # 10% off by 5e-3
    applied = bool(rule.applied(actual, expected, 1e-3, 1e-3))
    judged = []
    for atol, rtol in (rule.tolerances(expected, 1e-3, 1e-3), (1e-3, 1e-3)):
        row = OutputRow(MODEL, "static", 0, "a", True, True)
        engine_outputs.compare_output(row, actual["a"].numpy(), expected["a"], None, atol, rtol)
        judged.append(verdicts.rule_passes(frame([row], OutputRow), rule))
    assert applied and judged == [True, False]
    # a half-precision output the rule leaves out widens nothing: the tolerances are those of what it compares
    picked = Rule("newer", left_out=frozenset({"idx"}), half_tolerance=1e-2)
    mixed = {"a": torch.ones(4), "idx": torch.ones(2, dtype=torch.float16)}
    assert picked.tolerances(mixed, 1e-3, 1e-3) == (1e-3, 1e-3)
    assert picked.tolerances({"idx": mixed["idx"]}, 1e-3, 1e-3) == (1e-2, 1e-2)  # alone, it is compared


def test_a_planted_defect_after_a_forgiven_output_is_not_caught():
    rows = frame([_output(0, output="a", rule_mismatched=2), _output(0, output="b")], OutputRow)
    assert not verdicts.planted_defect_caught(rows, "b")  # the rule stops at a, forgives it, never compares b
    assert verdicts.planted_defect_caught(rows, "a")


def _result(found):
    return Result(frame([], GraphRow), OPS, frame([], ScreenRow), frame([], MarginRow), frame([], OutputRow),
                  frame([], SeedRow), [], found)


def test_answers_and_findings_read_the_verdicts():
    tie = verdicts.verdict(_tables([_output(0, output="idx", reached_by_flip=True, explained_by_flip=True,
                                            within_noise=None, rule_mismatched=1)], [_seed(0, flipped=True)],
                                   [_margin(0, 1, 0.0)]), verdicts.RatePolicy(), 16.0)
    (answer,) = discrete_ops_answers.answers(_result([tie]))
    assert answer.cause == "exact tie" and answer.exclude == ["idx"]
    assert answer.rate.startswith("none in 1 seed: at most 1 in ") and answer.rate.endswith("(95% bound)")
    assert answer.flips == "1 in 1 (95% 1 in 4.8 to 1 in 1; 1 of 1 seed)"  # flips apart from failures
    found = findings.findings(_result([tie]))
    assert "1 exact tie" in found[0].claim
    assert np.isnan(verdicts.reach_ulps(float("nan"), 16.0, 4.0, float("nan")))
    assert verdicts.reach_ulps(2.0, 16.0, 4.0, 1024.0) == 16.0 and verdicts.reach_ulps(10.0, 16.0, 4.0, 1.0) == 40.0


def test_a_screen_with_no_seed_in_reach_states_its_rate_over_every_screened_seed():
    # 2,000 seeds screened, none within reach of a tie: no candidate checked, only the calibration seed beyond reach
    quiet = verdicts.verdict(_tables([_output(0, output="idx")], [_seed(0)], [_margin(0)], screened=2000),
                             verdicts.RatePolicy(), 16.0)
    (answer,) = discrete_ops_answers.answers(_result([quiet]))
    assert quiet.failures.checked == 0 and quiet.failures.seeds == 2000
    assert answer.rate == "none in 2,000 seeds: at most 1 in 670 (95% bound)", answer.rate
    shown = figures.failure_rates([quiet])
    assert [t.get_text() for t in shown.axes[0].get_yticklabels()] == [MODEL]
    plt.close(shown)
    assert engine_answers.rate_words(verdicts.estimate(0, 0, 0, 0)) == "not measured"


def test_none_is_said_of_the_checked_seeds_alone_where_seeds_that_could_fail_were_left_unchecked():
    capped = verdicts.estimate(0, 45, 100, 2000)  # 100 within reach, 45 checked (the cap)
    assert engine_answers.rate_words(capped) == "none in 45 checked of 2,000 seeds: at most 1 in 36 (worst-case bound)"
    sampled = verdicts.estimate(0, 0, 0, 2000, sampled=(0, 40, 248))  # 40 of 248 exact ties checked
    assert engine_answers.rate_words(sampled).startswith("none in 40 checked of 2,000 seeds: at most 1 in ")
    whole = verdicts.estimate(0, 100, 100, 2000)  # every seed within reach checked
    # the one bound the verdict itself uses (one-sided exact), not a second method for the same 0 of 2,000
    assert engine_answers.rate_words(whole) == "none in 2,000 seeds: at most 1 in 670 (95% bound)"


def test_a_run_of_two_shape_modes_names_each_line_by_its_mode():
    import dataclasses

    tie = verdicts.verdict(_tables([_output(0, output="idx")], [_seed(0)], [_margin(0)]), verdicts.RatePolicy(), 16.0)
    both = [tie, dataclasses.replace(tie, shape_mode="dynamic")]
    assert [a.subject for a in discrete_ops_answers.answers(_result(both))] == [f"{tie.model} ({tie.shape_mode})",
                                                                    f"{tie.model} (dynamic)"]
    assert [a.subject for a in discrete_ops_answers.answers(_result([tie]))] == [tie.model]
    claim = findings.findings(_result(both))[0].claim
    assert claim.startswith(f"2 exports (1 class in {tie.shape_mode} and dynamic), none of them decided"), claim


def test_candidates_left_unchecked_widen_the_bound_a_no_flip_verdict_rests_on():
    policy = verdicts.RatePolicy(rate=1e-3)
    screened = policy.seeds_needed() + 100
    tables = _tables([_output(0, output="idx")], [_seed(0, phase="candidates")], [_margin(0)], screened=screened)
    tables.screen["in_reach"] = tables.screen.seed < 30  # 30 candidates, one checked
    found = verdicts.verdict(tables, policy, 16.0)
    assert found.cause is verdicts.Cause.UNDECIDED and found.evidence.undecided is Undecided.TOO_FEW_SEEDS
    assert (found.evidence.unchecked, found.evidence.size_in) == (29, 30)
    tables.screen["in_reach"] = tables.screen.seed < 1  # the one candidate is the one checked
    assert verdicts.verdict(tables, policy, 16.0).cause is verdicts.Cause.NEVER_FLIPS


def test_a_defect_says_whether_the_export_tests_rule_passes_it_all_the_same():
    drifted = _tables([_output(0, ort_f64_err=1e-3, within_noise=False)], [_seed(0, passed=True)], [],
                      ops=OPS.iloc[:0])
    found = verdicts.verdict(drifted, verdicts.RatePolicy(), 16.0)
    assert found.cause is verdicts.Cause.DEFECT and (found.evidence.passing, found.evidence.checked) == (1, 1)
    assert "rule passes on 1 of 1 checked seed all the same" in proof_of(found)  # the words, once


def test_a_nonzero_flips_where_the_two_sides_select_other_elements():
    from exactness.engine import margins

    eager = np.array([[0, 1], [1, 0]])  # torch: one row per selected element
    ort = np.array([[0, 1], [0, 1]])  # ONNX: one row per dimension, (0, 0) and (1, 1)
    changed = margins.flipped_decisions("nonzero", eager, ort, shape=(2, 2))
    assert changed.tolist() == [True, True, True, True]
    same = margins.flipped_decisions("nonzero", eager, eager.T, shape=(2, 2))
    assert not same.any() and same.size == 4


def test_the_float64_reference_draws_what_eager_drew_and_chooses_what_it_chose():
    class Noisy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(4, 6)

        def forward(self, x):
            h = self.proj(x) + torch.rand(5, 6)  # a draw, then a choice that reads it
            return {"pick": h.argmax(-1), "h": h}

    from exactness.runtimes import discrete_recorder

    torch.manual_seed(0)
    model, inputs = Noisy().eval(), {"x": torch.randn(5, 4)}
    raw, records = discrete_recorder.record(model, inputs, seed=3)
    reference, note = check._float64_reference(model, inputs, records)
    assert reference is not None and "forced" in note
    assert torch.equal(reference["pick"], raw["pick"])
    assert (reference["h"] - raw["h"].double()).abs().max() < 1e-6  # the same draw, in float64


def test_each_answer_states_the_flip_rate_and_the_seeds_it_comes_from():
    def stated(**fields):
        return engine_answers.flip_words(verdicts.ClassVerdict("M", "static", verdicts.Cause.EXACT_TIE, **fields))

    ties = stated(counted=1, screened=2000, candidates=2000, checked_candidates=40, ties=2000,
                  flips=verdicts.estimate(0, 0, 0, 2000, sampled=(24, 40, 2000)))
    assert ties == ("Flips counted over 2,000 seeds screened (2,000 of those seeds exact ties); 40 of the 2,000 "
                    "within reach of a tie checked.")
    # the checked seeds a flip count is over: the candidates, and those beyond reach (calibration seeds)
    calibrated = stated(counted=1, screened=2000, candidates=86, checked_candidates=86, checked=93,
                        flips=verdicts.estimate(3, 3, 93, 2000))
    assert calibrated.endswith("86 of the 86 within reach of a tie checked, and 7 seeds beyond reach checked too.")
    tied = verdicts.ClassVerdict("M", "static", verdicts.Cause.EXACT_TIE, counted=1, screened=2000,
                                 flips=verdicts.estimate(0, 0, 0, 2000, sampled=(24, 40, 2000)))
    assert engine_answers.flip_rate(tied) == "1 in 1.7 (95% 1 in 2.2 to 1 in 1.4; 24 in 40 checked of 2,000 seeds)"
    none = stated(counted=1, screened=2000, flips=verdicts.estimate(0, 0, 0, 2000))
    assert none == "No flip in 2,000 seeds screened; none within reach of a tie."
    assert stated(counted=0, checked=8) == ""  # the flips column says never, with why
    unflippable = verdicts.ClassVerdict("M", "static", verdicts.Cause.NOTHING_REACHES, checked=8)
    assert engine_answers.flip_rate(unflippable) == "never (no discrete op can flip)"
    clean = Evidence(values=Values(ValueState.CLEAN, 8, 0.5))
    nothing = verdicts.ClassVerdict("M", "static", verdicts.Cause.NOTHING_REACHES, evidence=clean)
    assert proof_of(nothing).startswith("no discrete op that can flip reaches an output")
    assert engine_answers.flip_words(nothing) == ""  # its proof opens with it: said once
    # the seeds the failure rate is over travel with the line, so the index can set one study's beside another's
    rated = verdicts.ClassVerdict("M", "static", verdicts.Cause.NOTHING_REACHES, evidence=clean,
                                  failures=verdicts.estimate(0, 8, 8, 8))
    assert engine_answers.answer(rated, "M").seeds == 8 and engine_answers.answer(nothing, "M").seeds == 0


def _planted_counts(ort: torch.Tensor, eager: torch.Tensor) -> OutputRow:
    row = OutputRow(MODEL, "static", 0, "y", True, True)
    engine_outputs.compare_output(row, ort.numpy(), eager, None, 1e-3, 1e-3)
    return row


def test_graded_planted_defects_are_measured_against_the_tests_own_rule():
    eager = torch.linspace(-1, 1, 100, dtype=torch.float32).reshape(4, 25)
    row = _planted_counts(eager.clone(), eager)
    # ORT equal to eager: moved by exactly the tolerance sits on its edge (the sum's rounding decides each one);
    # by 10x none is close; one NaN is one element
    assert 0 <= row.planted_few_1x <= 3
    assert (row.planted_few_10x, row.planted_few_100x, row.planted_nan) == (3, 3, 1)
    assert row.planted_shift == 100  # the neighbours differ by 0.02, beyond the tolerance
    rows = frame([row], OutputRow)
    # 3 or 1 of 100 elements is under the test's 5% allowance: even 100x the tolerance passes the rule
    for column in ("planted_few_1x", "planted_few_10x", "planted_few_100x", "planted_nan"):
        assert not verdicts.planted_defect_caught(rows, "y", column)
    assert verdicts.planted_defect_caught(rows, "y", "planted_shift")
    small = frame([_planted_counts(eager[:1, :20].clone(), eager[:1, :20])], OutputRow)  # 3 of 20 is 15%
    assert verdicts.planted_defect_caught(small, "y", "planted_few_10x")
    edge = int(small.planted_few_1x.iloc[0])
    assert verdicts.planted_defect_caught(small, "y", "planted_few_1x") == (edge / 20 >= 0.05)
    found = verdicts.verify(pd.concat([rows, small.assign(output="z")]), ["y", "z"])
    assert found.planted == 2 and found.caught["planted_few_100x"] == 1 and found.smallest is None
    assert "3 elements off by 100x the tolerance on 1 of 2" in engine_answers.catch_words(found)


def test_an_integer_output_gets_no_planted_defect():
    row = OutputRow(MODEL, "static", 0, "ids", False, True)
    engine_outputs.compare_output(row, np.array([1, 2, 3]), torch.tensor([1, 2, 3]), None, 1e-3, 1e-3)
    assert row.planted_few_1x == row.planted_shift == -1
    assert verdicts.verify(frame([row], OutputRow), ["ids"]).planted == 0


def test_a_skip_reason_is_refuted_from_the_runs_own_rows():
    from exactness import published
    from exactness.engine import verdict_words
    from exactness.engine.evidence import Refuted

    random, tie = published.Claim(published.RANDOM_DRAW), published.Claim(published.EXACT_TIE, "ArgMax")
    no_random = pd.DataFrame({"category": ["argmax"], "node": ["n"]})
    drawn = pd.DataFrame({"category": ["random"], "node": ["r"]})
    assert verdicts.refuted(random, verdicts.Cause.NEAR_TIE, no_random, {"ArgMax"}) is Refuted.NO_RANDOM_OP
    assert verdicts.refuted(random, verdicts.Cause.NEAR_TIE, drawn, {"ArgMax"}) is Refuted.OTHER_CAUSE
    assert verdicts.refuted(random, verdicts.Cause.RANDOM_DRAW, drawn, set()) is None
    # noise over the tolerance claimed, the test passing on every checked seed: the noise is real, its size is not
    noise = published.Claim(published.FLOAT_NOISE)
    assert verdicts.refuted(noise, verdicts.Cause.NOTHING_REACHES, no_random, set(), passes=True) \
        is Refuted.WITHIN_TOLERANCE
    assert verdicts.refuted(noise, verdicts.Cause.NOTHING_REACHES, no_random, set()) is Refuted.OTHER_CAUSE
    words = verdict_words.refutation(Refuted.WITHIN_TOLERANCE, noise, verdicts.Cause.NOTHING_REACHES, 1)
    assert words.startswith("the skip claims float noise over the test's tolerance; measured: float noise within it")
    # the ops table refutes a random draw even where the flips leave the cause undecided
    assert verdicts.reason_holds(random, verdicts.Cause.UNDECIDED, set(), no_random) is False
    assert verdicts.reason_holds(random, verdicts.Cause.UNDECIDED, set(), drawn) is None
    assert verdicts.refuted(random, verdicts.Cause.UNDECIDED, no_random, set()) is Refuted.NO_RANDOM_OP
    assert verdicts.refuted(tie, verdicts.Cause.DEFECT, no_random, set()) is Refuted.DEFECT_NOT_TIE
    # the words, once: what each refutation says, with the pass that made the defect
    words = verdict_words.refutation(Refuted.NO_RANDOM_OP, random, verdicts.Cause.NEAR_TIE, len(no_random))
    assert "no random op" in words and "1 discrete ops, none random" in words
    words = verdict_words.refutation(Refuted.DEFECT_NOT_TIE, tie, verdicts.Cause.DEFECT, 1, "no_op[2] Add(x, 0)")
    assert "not a tie broken differently" in words and "made by no_op[2] Add(x, 0)" in words
    assert verdict_words.refutation(None, random, verdicts.Cause.RANDOM_DRAW, 1) == ""


def test_the_summary_carries_each_defects_stage_pass_and_errors():
    from exactness.causes import Stage
    from exactness.engine.places import Kind, Localization, Reproduction, StageProof, Symptom

    proof = StageProof(Stage.ORT_OPTIMIZER, "Pad_Fusion", Symptom(1.4e-3, 50.0, 0, "y"), Symptom(1.1e-7, 0.1, 0, "y"),
                       reproduction=Reproduction("", True))
    spot = Localization("BitModel", "static", 1, "embedder.pad", Kind.OPTIMIZATION, proof=proof)
    result = _result([])
    result.localizations = [spot]
    (defect,) = study.summary_values(result, 3)["defects"].values()
    assert defect == {"seed": 1, "stage": Stage.ORT_OPTIMIZER.value, "pass": "Pad_Fusion", "error_with": 1.4e-3,
                      "error_without": 1.1e-7, "reproduces": True}
    # seeds asked beside what each class ran: a class stopped early ran fewer
    result.verdicts = [verdicts.ClassVerdict("BitModel", "static", verdicts.Cause.DEFECT, screened=1,
                                             checked=1)]
    assert study.summary_values(result, 3)["seeds_asked"] == 3
    assert study.summary_values(result, 3)["seeds_run"] == {"BitModel": {"screened": 1, "checked": 1}}
    result.verdicts.append(verdicts.ClassVerdict("BitModel", "dynamic", verdicts.Cause.DEFECT, screened=2))
    both = study.summary_values(result, 3)  # two shape modes: one entry each, neither overwriting the other
    assert set(both["seeds_run"]) == set(both["causes"]) == {"BitModel (static)", "BitModel (dynamic)"}
    shown = sentences.defects(result)
    assert "made by ONNX Runtime pass Pad_Fusion (error from float64 0.0014 with it, 1.1e-07 without)" in shown.sentence


def test_the_skip_reason_finding_says_why_each_refuted_reason_does_not_hold():
    tapas = verdicts.ClassVerdict("TapasForQuestionAnswering", "static", verdicts.Cause.DEFECT, skip_reason="tied",
                                  reason_holds=False, refuted=Refuted.DEFECT_NOT_TIE, refuted_claim="an exact tie")
    held = verdicts.ClassVerdict(MODEL, "static", verdicts.Cause.EXACT_TIE, skip_reason="tied", reason_holds=True)
    claim = findings.skip_reasons(_result([tapas, held])).claim
    assert "holds for 1 of 2" in claim
    assert ("not for TapasForQuestionAnswering (the skip claims an exact tie that ORT breaks another way, but what ORT "
            "computes there is a defect, not a tie broken differently)") in claim


def test_the_float64_table_and_its_sentence_judge_the_same_outputs():
    from types import SimpleNamespace

    rows = [  # a tied class: its flipped output is far from float64 but judged by forcing, not by the bound
        dict(model="Tied", seed=0, output="idx_logits", within_noise=None, ort_f64_err=5.0),
        dict(model="Tied", seed=0, output="logits", within_noise=True, ort_f64_err=1e-7),
        dict(model="Drifted", seed=0, output="y", within_noise=False, ort_f64_err=1e-3)]
    outputs = pd.DataFrame([{**r, "floating": True, "noise_bound": 1.6e-6, "eager_f64_err": 1e-7, "scale_ulp": 1e-7}
                            for r in rows])
    section = sentences.noise(SimpleNamespace(outputs=outputs))
    table = section.frame.set_index("model")
    assert table.loc["Tied", "worst_over_bound"] < 1 and table.loc["Tied", "flipped"] == 1
    assert table.loc["Drifted", "worst_over_bound"] > 16 and table.loc["Drifted", "beyond"] == 1
    assert section.sentence.endswith("1 of 2 classes; beyond it (each a defect below): Drifted.")


def test_a_random_draw_outside_every_module_is_placed_and_a_draw_reaching_every_output_leaves_nothing_to_compare():
    from exactness.engine import verdict_words

    drawn = Evidence(draws=("RandomUniformLike",), draw_scopes=("",))
    proof = verdict_words.proof(verdicts.Cause.RANDOM_DRAW, drawn)
    assert proof == "RandomUniformLike in the model's own forward (outside every module) on an output path"
    assert verdict_words.action(verdicts.Cause.RANDOM_DRAW, drawn, [], ["y"]).startswith("nothing is left to compare")
    assert verdict_words.action(verdicts.Cause.RANDOM_DRAW, drawn, ["x"], ["y"]).startswith("compare the outputs")


def test_the_overview_counts_only_decided_classes_as_proven():
    from exactness.studies.discrete_ops import findings

    def of(model, cause):
        return verdicts.ClassVerdict(model, "static", cause)

    decided = _result([of("A", verdicts.Cause.EXACT_TIE), of("B", verdicts.Cause.DEFECT)])
    assert "2 classes, each with its cause proven in this run" in findings.overview(decided).claim
    mixed = _result([of("A", verdicts.Cause.EXACT_TIE), of("B", verdicts.Cause.UNDECIDED),
                     of("C", verdicts.Cause.UNDECIDED)])
    claim = findings.overview(mixed).claim
    assert "1 with its cause proven in this run, 2 undecided: 2 undecided; 1 exact tie" in claim
    assert "each" not in claim
    failed = _result([of("A", verdicts.Cause.EXACT_TIE), of("B", verdicts.Cause.NO_EXPORT)])
    assert "1 with its cause proven in this run, 1 not run:" in findings.overview(failed).claim


def test_the_flips_section_says_which_explained_flips_read_a_value_ort_alone_broke():
    result = _result([])
    result.outputs = frame([_output(0, output="idx", reached_by_flip=True, explained_by_flip=True),
                            _output(1, output="idx", reached_by_flip=True, explained_by_flip=True)], OutputRow)
    result.margins = frame([_margin(0, 1.0), _margin(1, 1.0, flipped_nonfinite=1)], MarginRow)
    words = sentences.flips(result).sentence
    assert words.startswith("Forcing ORT's choices on eager explains every output on 2 of 2 flipped seeds; on 1 of")
    assert f"({MODEL}) a flipped decision weighed a value ORT alone made non-finite" in words
    # a call that read a non-finite value elsewhere than at its flipped decision, or eager's own NaN, is no defect's
    for row in (_margin(1, 1.0, reads_nonfinite_ort_only=2), _margin(1, 1.0, flipped_nonfinite=1, flipped_nan_eager=1)):
        result.margins = frame([_margin(0, 1.0), row], MarginRow)
        assert sentences.flips(result).sentence.endswith("on 2 of 2 flipped seeds.")


def test_a_defects_answer_leads_with_its_own_proof_and_a_ties_with_its_flips():
    def line(cause):
        shown = Evidence(defect=Defect(1, "y", DefectSign.NONFINITE_OUTPUT, count=3, of=8), checked=40,
                         flips=Flips(40, 40, ("ArgMax",), True, 0.0, 16.0, ()))
        found = verdicts.ClassVerdict("M", "static", cause, counted=1, screened=300, candidates=300,
                                      checked_candidates=40, checked=40, flips=verdicts.estimate(40, 40, 40, 300),
                                      evidence=shown)
        return engine_answers.answer(found, "M").proof

    assert line(verdicts.Cause.DEFECT).startswith("Seed 1: y is non-finite on one side only in 3 of 8 values. Flips "
                                                  "counted over 300 seeds screened")
    assert line(verdicts.Cause.EXACT_TIE).startswith("Flips counted over 300 seeds screened")


def test_a_localizations_remedy_is_typed_and_worded_in_one_place():
    from exactness.causes import Stage
    from exactness.engine import place_words
    from exactness.engine.places import Kind, Localization, Remedy, Reproduction, StageProof

    proof = StageProof(Stage.ORT_OPTIMIZER, "Pad_Fusion", provider="", reproduction=Reproduction("", True))
    spot = Localization("BitModel", "static", 1, "embedder.pad", Kind.OPTIMIZATION, proof=proof)
    assert spot.remedy == Remedy(Stage.ORT_OPTIMIZER, "Pad_Fusion", reproduces=True)
    shown = place_words.table([spot])
    columns = list(shown.columns)
    assert columns[columns.index("stage_proof") + 1] == "remedy" and "stage_remedy" not in columns
    worded = shown.remedy.iloc[0]
    assert 'disabled_optimizers=["Pad_Fusion"]' in worded and "(it reproduces here)" in worded
    assert place_words.remedy(Remedy(Stage.MODEL)).startswith("the model's, not the export's")
    assert place_words.remedy(Remedy(Stage.NOT_SHOWN)) == place_words.remedy(None) == ""


def test_the_investigations_class_counts_its_quantizer_flips_beside_the_investigations_count():
    """The default run's finding for #50575's class: seeds whose quantizer argmax flipped, over the seeds screened,
    beside the investigation's count, and 'not comparable' while seeds within reach went unchecked."""
    import dataclasses

    from exactness import published

    seed_model = findings.SEED_MODEL
    decided = verdicts.verdict(_tables([_output(0, output="idx")], [_seed(0)], [_margin(0)], screened=2000),
                               verdicts.RatePolicy(), 16.0)
    mine = dataclasses.replace(decided, model=seed_model, screened=40_000, candidates=3, checked_candidates=3)
    ops = pd.DataFrame([{**OPS.iloc[0].to_dict(), "model": seed_model, "node": "q", "op_type": "ArgMax",
                         "category": "argmax", "scope": "wav2vec2.quantizer"}])
    margins = frame([_margin(s, flipped=f, model=seed_model, node="q", op_type="ArgMax", category="argmax")
                     for s, f in ((1, 1.0), (2, 0.0), (3, 2.0), (3, 1.0))], MarginRow)

    def found(verdict, ops=ops, margins=margins):
        result = Result(frame([], GraphRow), ops, frame([], ScreenRow), margins, frame([], OutputRow),
                        frame([], SeedRow), [], [verdict])
        return findings.seed_class_rate(result)

    counted = found(mine)
    assert counted.ours == "2 in 40000"  # seeds 1 and 3 flipped (3 twice: one seed)
    expected = findings.rate_verdict(2, 40_000, int(published.value("flips")), int(published.value("seeds_screened")))
    assert counted.verdict == expected[0] and counted.why == expected[1]
    unchecked = found(dataclasses.replace(mine, checked_candidates=2))
    assert unchecked.verdict == "not comparable" and "only 2 of 3 seeds within reach" in unchecked.why
    assert found(mine, ops=ops.iloc[:0]).verdict == "not comparable"  # the argmax not matched: no count
    assert found(dataclasses.replace(mine, model="Other")) is None
