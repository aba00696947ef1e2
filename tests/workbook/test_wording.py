"""The one shape of a rate, a bound, a count and a plural on every page."""

import re

from exactness.workbook import wording

SHAPE = re.compile(r"^1 in [\d,.]+ \(95% (1 in [\d,.]+|none) to 1 in [\d,.]+; [\d,]+ of [\d,]+ seeds?\)$")


def test_a_rate_is_one_in_n_with_its_interval_and_count():
    for k, n in [(1, 2000), (2, 2000), (36, 40), (40, 40), (15, 40000)]:
        assert SHAPE.match(wording.rate(k, n)), wording.rate(k, n)
    assert wording.rate(2, 2000) == "1 in 1,000 (95% 1 in 3,600 to 1 in 270; 2 of 2,000 seeds)"


def test_none_is_a_bound_and_says_so():
    assert wording.rate(0, 8) == "none in 8 seeds: at most 1 in 3.2 (95% bound)"  # one-sided: 1 - 0.05 ** (1 / 8)
    assert wording.rate(0, 2000, high=0.01, low=0.0, point=0.0, worst_case=True, checked=150) == \
        "none in 150 checked of 2,000 seeds: at most 1 in 100 (worst-case bound)"


def test_a_sample_names_what_was_checked_and_a_worst_case_is_no_95_interval():
    text = wording.rate(3, 2000, low=3 / 2000, high=40 / 2000, point=6 / 2000, worst_case=True, checked=150)
    assert text == "1 in 330 (from 1 in 670 to 1 in 50, the upper end a worst case; 3 in 150 checked of 2,000 seeds)"


def test_one_in_never_prints_infinity_or_zero_and_plurals_follow_the_count():
    assert wording.one_in(0.0) == "none" and wording.one_in(float("nan")) == "none" and wording.one_in(1.0) == "1 in 1"
    assert wording.one_in(0.97) == "1 in 1" and wording.one_in(0.9) == "1 in 1.1"
    assert wording.plural(1, "seed") == "1 seed" and wording.plural(2000, "seed") == "2,000 seeds"
    assert wording.plural(3, "class", "classes") == "3 classes"
