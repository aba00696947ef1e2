"""Exact ties: checked seeds whose smallest eager gap is 0, and why each one flipped or did not.

On an exact tie eager's argmax takes the first of the two tied codes (torch's argmax, and ONNX ArgMax with its
default `select_last_index=0`, both return the first maximum). If ORT computes the two logits bit-identical
too, its argmax takes the same first code: no flip, however close the tie. A tie flips only when ORT's rounding
separates the two logits with the second code ahead. Each seed's row on both sides says which happened.
"""

from __future__ import annotations

import pandas as pd

from exactness.workbook.findings import significant

COLUMNS = ["model", "seed", "shape_mode", "min_row", "ort_min_row_gap", "ort_bit_identical", "flipped_at_tie",
           "n_flipped_rows", "test_rule_passed", "why"]


def why(ort_gap: float, flipped_at_tie: bool) -> str:
    """One seed's tie in words, from ORT's top-1 minus top-2 logit (eager's two codes) at the tied row."""
    if ort_gap == 0:
        return ("both logits bit-identical on ORT too: both argmax take the first code, no flip" if not flipped_at_tie
                else "both logits bit-identical on ORT, yet the row flipped: not explained by the tie")
    if ort_gap < 0:
        return (f"ORT's rounding put the second code ahead by {significant(-ort_gap)}: flip" if flipped_at_tie
                else f"ORT put the second code ahead by {significant(-ort_gap)}, yet no flip: not explained")
    return (f"ORT's rounding kept the first code ahead by {significant(ort_gap)}: no flip" if not flipped_at_tie
            else f"ORT kept the first code ahead by {significant(ort_gap)}, yet the row flipped: not explained")


def exact_ties(checks: pd.DataFrame) -> pd.DataFrame:
    """One row per check with an exact tie: ORT's gap at the tied row, whether ORT also computed the two logits
    bit-identical, whether that row flipped, the test's verdict, and why."""
    if not len(checks):
        return pd.DataFrame(columns=COLUMNS)
    tied = checks[checks.exact_tie.astype(bool)]
    rows = []
    for r in tied.itertuples():
        flipped = bool(r.flip_is_min_gap_row)
        rows.append({"model": r.model, "seed": int(r.seed), "shape_mode": r.shape_mode, "min_row": int(r.min_row),
                     "ort_min_row_gap": float(r.ort_min_row_gap), "ort_bit_identical": r.ort_min_row_gap == 0,
                     "flipped_at_tie": flipped, "n_flipped_rows": int(r.n_flipped_rows),
                     "test_rule_passed": bool(r.test_rule_passed), "why": why(float(r.ort_min_row_gap), flipped)})
    return pd.DataFrame(rows, columns=COLUMNS)


def explained(ties: pd.DataFrame) -> pd.Series:
    """A tie is explained when its row flipped exactly when ORT put the second code ahead."""
    return (ties.ort_min_row_gap < 0) == ties.flipped_at_tie


