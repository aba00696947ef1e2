"""Exact ties: each one's flip is explained by ORT's values of the two tied logits, or named as unexplained."""

import pandas as pd

from exactness.studies.near_tie import sentences as near_tie_sentences
from exactness.studies.near_tie import ties as near_tie_ties


def _checks(ort_gaps, flipped):
    n = len(ort_gaps)
    return pd.DataFrame({"model": "m", "seed": range(n), "shape_mode": "dynamic", "exact_tie": True,
                         "min_row": 7, "ort_min_row_gap": ort_gaps, "flip_is_min_gap_row": flipped,
                         "n_flipped_rows": [int(f) for f in flipped], "test_rule_passed": [not f for f in flipped]})


def test_a_tie_kept_exact_on_ort_does_not_flip_and_one_separated_with_the_second_ahead_does():
    ties = near_tie_ties.exact_ties(_checks([0.0, -4.8e-7, 6e-7], [False, True, False]))
    assert ties.ort_bit_identical.tolist() == [True, False, False]
    assert near_tie_ties.explained(ties).all()
    assert ties.flipped_at_tie.tolist() == [False, True, False]
    shown = near_tie_sentences.with_tie_why(ties)
    assert list(shown.columns) == [*near_tie_ties.COLUMNS, "why"]  # the report's table: the numbers, then why
    why = shown.why.tolist()
    assert "no flip" in why[0] and "second code ahead" in why[1] and "kept the first code" in why[2]
    text = near_tie_sentences.ties_sentence(ties)
    assert text.startswith("3 checked seeds had an exact tie") and "1 of 3 tied rows flipped" in text
    assert "On 1 ORT also computed the two tied logits bit-identical" in text
    assert "every tie flipped exactly when ORT put the second code ahead" in text


def test_a_flip_that_the_tie_does_not_explain_is_named():
    ties = near_tie_ties.exact_ties(_checks([0.0, 5e-7], [True, False]))
    text = near_tie_sentences.ties_sentence(ties)
    assert "did not follow that rule" in text and "bit-identical on ORT, yet the row flipped" in text
    assert "every tie flipped exactly" not in text


def test_seeds_without_a_tie_are_left_out():
    checks = _checks([0.0, 1e-6], [False, False]).assign(exact_tie=[True, False])
    assert near_tie_ties.exact_ties(checks).seed.tolist() == [0]
    none = near_tie_sentences.with_tie_why(near_tie_ties.exact_ties(checks.iloc[[1]]))
    assert none.columns[-1] == "why" and none.why.dtype == object  # a text column even with no tie
    assert near_tie_sentences.ties_sentence(near_tie_ties.exact_ties(checks.iloc[[1]])) == \
        "No checked seed had an exact tie (gap 0)."


def test_many_tied_seeds_are_counted_per_class_not_listed_one_by_one():
    checks = pd.concat([_checks([0.0] * 5, [False] * 5),
                        _checks([0.0] * 3, [False] * 3).assign(model="n", seed=[10, 11, 12])])
    text = near_tie_sentences.ties_sentence(near_tie_ties.exact_ties(checks))
    assert text.startswith("8 checked seeds had an exact tie (gap 0: m 5, n 3; e.g. m 0, m 1, m 2; every one in")
    assert "n 12" not in text
