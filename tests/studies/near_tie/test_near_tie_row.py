"""The checks table's row: each group of columns from its helper, flattened in the declared order."""

import math

import torch

from exactness.compare.export_rule import RuleResult
from exactness.compare.tie_aware import TieAwareResult, top_two
from exactness.studies.near_tie import study as near_tie
from exactness.studies.near_tie.row import (
    PATH_COLUMNS,
    CheckRow,
    MinRow,
    NoiseFacts,
    Paths,
    WhatIf,
    aligned_facts,
    columns,
    gap_facts,
    perplexity_facts,
    rule_facts,
)


def _logits():
    # rows: a clear winner, an exact tie (both 1.0), a near tie; two groups of codes per frame
    return torch.tensor([[3.0, 1.0, 0.0], [1.0, 1.0, 0.5], [2.0, 2.0 + 2 ** -20, 0.0], [0.0, 0.5, 1.5]])


def test_gap_facts_find_the_smallest_gap_and_the_flipped_rows():
    gaps = top_two(_logits())
    facts = gap_facts(gaps, [2], TieAwareResult(float("inf"), {2: 2 ** -20}), torch.tensor([0, 0, 0, 2]), groups=2)
    assert facts.min_gap == 0.0 and facts.exact_tie and facts.n_flipped_rows == 1 and facts.flipped_rows == [2]
    assert not facts.flip_is_min_gap_row  # the exact tie (row 1) is the smallest gap, and it did not flip
    assert facts.max_flipped_gap == 2 ** -20 and facts.max_flip_margin == 2 ** -20
    assert not facts.usage_unchanged  # eager picked code 1 for row 2, ORT code 0
    none = gap_facts(gaps, [], TieAwareResult(float("inf")), gaps.top1_index, groups=2)
    assert math.isnan(none.max_flipped_gap) and none.max_flip_margin == 0.0 and none.usage_unchanged


def test_perplexity_rule_and_aligned_facts():
    p = perplexity_facts(100.0, 100.5, atol=1e-3, rtol=1e-3)
    assert (p.perplexity_shift, p.perplexity_allowed) == (0.5, 1e-3 + 0.1)
    outputs = {"codevector_perplexity": torch.tensor(100.0), "projected_states": torch.zeros(2)}
    moved = {"codevector_perplexity": torch.tensor(100.5), "projected_states": torch.zeros(2)}
    rule = rule_facts(RuleResult(False, "codevector_perplexity", never_compared=["projected_states"]), moved, outputs)
    assert not rule.test_rule_passed and rule.first_failing_output == "codevector_perplexity"
    assert rule.never_compared == ["projected_states"] and rule.skip_rule_passed
    aligned = aligned_facts(TieAwareResult(float("inf"), failing_outputs=["codevector_perplexity"]), moved, outputs,
                            atol=1e-3)
    assert not aligned.aligned_ok and aligned.aligned_failing == ["codevector_perplexity"]
    assert aligned.perplexity_needed_rtol == aligned.needed_rtol > 0


def _row(diffs: dict) -> CheckRow:
    gaps = top_two(_logits())
    outputs = {"codevector_perplexity": torch.tensor(1.0)}
    return CheckRow("M", 7, "static", Paths(), None, "float64, eager's codes forced", None,
                    gap_facts(gaps, [], TieAwareResult(float("inf")), gaps.top1_index, groups=2),
                    perplexity_facts(1.0, 1.0, 1e-3, 1e-3), rule_facts(RuleResult(True), outputs, outputs),
                    aligned_facts(TieAwareResult(float("inf")), outputs, outputs, 1e-3), NoiseFacts(0.0, 0.0),
                    WhatIf(), MinRow(1, 0.0), diffs)


def test_a_record_holds_the_declared_columns_in_order_then_one_per_output():
    record = _row({"loss": 0.5, "codevector_perplexity": 0.0}).record()
    assert list(record) == columns() + ["max_abs_diff_loss", "max_abs_diff_codevector_perplexity"]
    assert columns()[:3] == ["model", "seed", "shape_mode"] and columns()[3:8] == list(PATH_COLUMNS["checks"])
    assert record["build_path"] == "build" and record["fails_if_flipped"] is None
    assert isinstance(record["weights_path"], str) and type(record["weights_path"]) is str  # a plain value


def test_the_checks_table_has_the_declared_columns_even_without_a_check():
    assert list(near_tie.check_table([]).columns) == columns()
    table = near_tie.check_table([_row({"loss": 0.5}), _row({"loss": 0.25})])
    assert table.max_abs_diff_loss.tolist() == [0.5, 0.25] and table.seed.tolist() == [7, 7]
