import math

import pytest

from exactness.workbook import parameter_rules
from exactness.workbook.parameter_rules import AtLeast, EachOf, Matches, OneOf, Positive, RunFolder, problems


@pytest.mark.parametrize("value", [0, -3, math.nan, math.inf, "1", True, None])
def test_at_least_one_refuses_zero_negatives_non_finite_and_non_numbers(value):
    assert AtLeast(1).problem(value) is not None


def test_at_least_accepts_its_minimum_and_names_what_the_minimum_means():
    assert AtLeast(0, "0 means one per core").problem(0) is None
    assert AtLeast(0, "0 means one per core").problem(-1) == "must be at least 0 (0 means one per core), got -1"


@pytest.mark.parametrize("value", [0, 0.0, -1e-4, math.nan, math.inf, -math.inf, True])
def test_positive_refuses_zero_negative_nan_and_infinity(value):
    assert Positive().problem(value) is not None


def test_positive_accepts_a_small_positive_float():
    assert Positive().problem(1e-30) is None


def test_one_of_lists_every_choice_so_a_typo_is_fixed_from_the_message():
    message = OneOf(("a", "b", "c"), "model").problem("d")
    assert message == "names an unknown model 'd'; choose one of a, b, c"
    assert OneOf(("a",)).problem("a") is None


def test_each_of_refuses_empty_lists_repeats_and_bad_items_in_one_message():
    rule = EachOf(OneOf(("a", "b"), "model"))
    assert rule.problem([]) == "must not be empty"
    assert rule.problem(["a", "a", "b", "b"]) == "lists a, b more than once"
    assert rule.problem(["a", "z"]) == "names an unknown model 'z'; choose one of a, b"
    assert rule.problem("a") == "must be a list, got 'a'"
    assert rule.problem(["b", "a"]) is None


def test_each_of_may_allow_empty_lists_and_repeats():
    assert EachOf(AtLeast(0), allow_empty=True).problem([]) is None
    assert EachOf(Positive(), allow_repeats=True).problem([0.5, 0.5]) is None
    assert EachOf(AtLeast(0)).problem([1, -2]) == "item -2 must be at least 0, got -2"


def test_problems_name_the_parameter_and_where_its_value_came_from():
    rules = {"n_seeds": AtLeast(1), "threshold": Positive()}
    found = problems(rules, {"n_seeds": 0, "threshold": 1e-4, "other": -1}, {"n_seeds": "-p"})
    assert found == ["n_seeds (from -p) must be at least 1, got 0"]


def test_a_whole_number_rule_refuses_fractions_and_an_upper_bound_says_why():
    seed = AtLeast(0, maximum=2**63 - 1, whole=True, why_maximum="signed 64-bit")
    assert seed.problem(1.5) == "must be a whole number, got 1.5"
    assert seed.problem(2**64) == f"must be at most {2**63 - 1:g} (signed 64-bit), got {2**64}"
    assert EachOf(seed, allow_empty=True).problem([3, 1.5]) == "item 1.5 must be a whole number, got 1.5"


def test_each_of_can_require_several_items():
    assert EachOf(Positive(), min_items=2).problem([0.5]) == "must list at least 2 items, got 1"


def test_matches_describes_what_was_expected():
    rule = Matches(r"|tcp://[^:]+:\d+", "empty or tcp://host:port")
    assert rule.problem("") is None and rule.problem("tcp://node1:8786") is None
    assert rule.problem("garbage") == "must be empty or tcp://host:port, got 'garbage'"


def test_a_run_folder_is_empty_latest_or_an_absolute_path_to_a_run(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "manifest.json").write_text("{}")
    assert RunFolder().problem("") is None and RunFolder().problem("latest") is None
    assert RunFolder().problem(str(tmp_path / "run")) is None
    assert "not a run folder" in RunFolder().problem(str(tmp_path))
    assert "absolute path" in RunFolder().problem("outputs/near_tie/x")


class _Counted:
    """A value that counts how often it is compared: the repeat check must hash, not compare every pair."""

    comparisons = 0

    def __init__(self, value):
        self.value = value

    def __eq__(self, other):
        _Counted.comparisons += 1
        return isinstance(other, _Counted) and other.value == self.value

    def __hash__(self):
        return hash(self.value)

    def __repr__(self):
        return f"seed {self.value}"


def test_the_repeat_check_is_linear_in_the_list_and_still_names_each_repeat():
    values = [_Counted(i) for i in range(20_000)] + [_Counted(7), _Counted(7), _Counted(19_999)]
    _Counted.comparisons = 0
    problem = EachOf(Positive()).problem([v.value + 1 for v in values])
    assert problem == "lists 8, 20000 more than once"
    assert parameter_rules._repeated(values) == ["seed 7", "seed 19999"]
    assert _Counted.comparisons < 50  # a few per repeat; a check of every pair makes 200 million
