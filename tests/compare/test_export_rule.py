import re

import numpy as np
import pandas as pd
import pytest
import torch

from exactness.compare.export_rule import OutputCount, count, export_test_rule, judge, names_match
from exactness.engine import verdicts
from planted_outputs import planted_case


def _outputs(perplexity=92.1406, states_changed=0, total=1000):
    states = torch.zeros(total)
    states[:states_changed] = 0.5
    return {"codevector_perplexity": torch.tensor(perplexity), "projected_quantized_states": states,
            "projected_states": torch.ones(10)}


def _torch_outcome(actual, expected, atol=1e-3, rtol=1e-3) -> bool:
    """The outcome of the export test's check as torch decides it: one assert_close over the dicts, its error
    forgiven when the message's element count is under 5% (the oracle the counts must agree with)."""
    try:
        torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol)
    except AssertionError as error:
        found = re.findall(r"Mismatched elements: (\d+) / (\d+)", str(error))
        return bool(found) and int(found[0][0]) / int(found[0][1]) < 0.05
    return True


def test_identical_outputs_pass():
    assert export_test_rule(_outputs(), _outputs())


def test_a_scalar_gets_no_allowance():
    result = export_test_rule(_outputs(perplexity=91.2174), _outputs())
    assert not result and result.first_mismatch == "codevector_perplexity"
    assert result.never_compared == ["projected_quantized_states", "projected_states"]


def test_the_first_mismatch_under_five_percent_is_forgiven_and_hides_the_rest():
    actual = _outputs(states_changed=40)  # 4% of elements
    actual["projected_states"] = torch.full((10,), 100.0)  # a real defect after it in sorted order
    result = export_test_rule(actual, _outputs())
    assert result.passed and result.forgiven
    assert result.first_mismatch == "projected_quantized_states"
    assert result.never_compared == ["projected_states"]
    assert _torch_outcome(actual, _outputs())  # torch's own error is the forgiven one


def test_five_percent_or_more_fails():
    assert not export_test_rule(_outputs(states_changed=50), _outputs())


def test_keys_are_checked_in_sorted_order():
    actual = _outputs(perplexity=1.0, states_changed=500)
    assert export_test_rule(actual, _outputs()).first_mismatch == "codevector_perplexity"


def test_key_sets_that_differ_fail_before_any_value():
    actual = _outputs(states_changed=10)  # a forgivable mismatch first in sorted order
    del actual["projected_states"]
    result = export_test_rule(actual, _outputs())
    assert not result and result.first_mismatch == "projected_states"
    assert not _torch_outcome(actual, _outputs())


def test_skip_semantics_only_check_names():
    assert names_match(_outputs(perplexity=0.0), _outputs())
    assert not names_match({"a": torch.ones(1)}, _outputs())


def test_the_count_is_torchs_isclose_in_the_outputs_own_dtype():
    # 1 + 1e-3 * 1 is the float32 tolerance at 1.0; the element at float32's next value past it is outside in
    # float32 arithmetic, and the rule must count what assert_close counts
    expected = torch.ones(4)
    edge = torch.tensor(1 + 2e-3, dtype=torch.float32)
    actual = torch.stack([edge, torch.nextafter(edge, torch.tensor(10.0)), edge, torch.tensor(1.0)])
    counted = count("x", actual, expected, 1e-3, 1e-3).not_close
    assert counted == int((~torch.isclose(actual, expected, rtol=1e-3, atol=1e-3)).sum())


def _rows(actual: dict, expected: dict) -> pd.DataFrame:
    """The discrete-ops study's output rows for the same outputs: the counts verdicts.rule_passes reads."""
    rows = []
    for name, wanted in expected.items():
        got = actual[name]
        same_shape = got.shape == wanted.shape
        same_dtype = got.dtype == wanted.dtype
        rows.append({"output": name, "numel": wanted.numel(), "zero_dim": wanted.dim() == 0,
                     "same_shape": same_shape, "same_dtype": same_dtype,
                     "rule_mismatched": count(name, got, wanted, 1e-3, 1e-3).not_close})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("seed", range(400))
def test_counts_judge_as_torch_and_the_export_test_decide(seed):
    actual, expected = planted_case(np.random.default_rng(seed))
    real = _torch_outcome(actual, expected)
    assert export_test_rule(actual, expected).passed == real
    assert verdicts.rule_passes(_rows(actual, expected)) == real


def test_an_output_of_another_shape_or_dtype_gets_no_allowance():
    assert not judge([OutputCount("a", 1000, 0, comparable=False)]).passed
    assert judge([OutputCount("a", 1000, 49), OutputCount("b", 10, 10)]).passed  # forgiven, b never judged
    assert not judge([OutputCount("a", 1000, 50)]).passed
    assert not judge([OutputCount("a", 1, 1, zero_dim=True)]).passed
