"""Planted defects that can be missed: graded sizes, and what each comparison catches on every seed."""

from __future__ import annotations

import pandas as pd

from exactness.runtimes import defects
from exactness.studies.near_tie.planted import DefectTally


def _rows(tie_aware: dict, rule: dict, seeds=(0, 1)) -> pd.DataFrame:
    return pd.DataFrame([{"seed": s, "kind": k, "tolerances": defects.tolerances(k), "required": defects.required(k),
                          "caught_by_tie_aware": tie_aware[k], "caught_by_test_rule": rule[k]}
                         for s in seeds for k in defects.DEFECTS])


def test_the_smallest_graded_defect_each_comparison_catches_is_measured():
    every = dict.fromkeys(defects.DEFECTS, True)
    tie_aware = {**every, "one_bias_1x": False}
    rule = {**every, "one_bias_1x": False, "one_bias_10x": False, "one_bias_100x": False}  # under the 5% allowance
    tally = DefectTally.of(_rows(tie_aware, rule))
    assert tally.planted == 12 and tally.required == 10  # the 1x ones are measured, not required
    assert tally.keeps and tally.tie_aware == 10 and tally.test_rule == 6
    assert tally.smallest_tie_aware == 10.0 and tally.smallest_test_rule != tally.smallest_test_rule  # NaN: none


def test_missing_a_required_defect_keeps_no_value_checks():
    every = dict.fromkeys(defects.DEFECTS, True)
    tally = DefectTally.of(_rows({**every, "one_bias_100x": False}, every))
    assert not tally.keeps and tally.tie_aware == tally.required - 2
    assert tally.smallest_tie_aware == 1.0  # the smallest size caught on every seed, though a larger one was missed


def test_a_size_caught_on_some_seeds_only_is_not_called_never_caught():
    from exactness.studies.near_tie import findings, sentences

    every = dict.fromkeys(defects.DEFECTS, True)
    missed = {**every, "one_bias_1x": False, "one_bias_10x": False, "one_bias_100x": False}
    planted = pd.concat([_rows(every, every, seeds=(0,)), _rows(every, missed, seeds=(1,))], ignore_index=True)
    checks = pd.DataFrame({"n_flipped_rows": [0, 1], "tie_aware_passed": [True, True],
                           "test_rule_passed": [True, False]})
    words = sentences.tie_aware_sentence(checks, planted, 1e-5)
    caught = "no graded size on every seed, only 3 of the 6 size-seed plantings"  # all three sizes on seed 0
    assert f"the export test's rule catches {caught}" in words
    assert f"and {caught})." in findings.tie_aware_finding(checks, planted, 1e-5).claim
    never = sentences.tie_aware_sentence(checks, _rows(every, missed, seeds=(1,)), 1e-5)
    assert "rule catches no graded size." in never
