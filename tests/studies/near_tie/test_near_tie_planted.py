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
