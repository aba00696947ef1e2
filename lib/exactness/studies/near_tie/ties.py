"""Exact ties: checked seeds whose smallest eager gap is 0, and whether each one flipped.

On an exact tie eager's argmax takes the first of the two tied codes (torch's argmax, and ONNX ArgMax with its
default `select_last_index=0`, both return the first maximum). If ORT computes the two logits bit-identical
too, its argmax takes the same first code: no flip, however close the tie. A tie flips only when ORT's rounding
separates the two logits with the second code ahead. Each seed's row on both sides says which happened.
"""

from __future__ import annotations

import pandas as pd

COLUMNS = ["model", "seed", "shape_mode", "min_row", "ort_min_row_gap", "ort_bit_identical", "flipped_at_tie",
           "n_flipped_rows", "test_rule_passed"]


def exact_ties(checks: pd.DataFrame) -> pd.DataFrame:
    """One row per check with an exact tie: ORT's gap at the tied row, whether ORT also computed the two logits
    bit-identical, whether that row flipped, and the test's verdict (`sentences.tie_why` says why)."""
    if not len(checks):
        return pd.DataFrame(columns=COLUMNS)
    tied = checks[checks.exact_tie.astype(bool)]
    rows = []
    for r in tied.itertuples():
        flipped = bool(r.flip_is_min_gap_row)
        rows.append({"model": r.model, "seed": int(r.seed), "shape_mode": r.shape_mode, "min_row": int(r.min_row),
                     "ort_min_row_gap": float(r.ort_min_row_gap), "ort_bit_identical": r.ort_min_row_gap == 0,
                     "flipped_at_tie": flipped, "n_flipped_rows": int(r.n_flipped_rows),
                     "test_rule_passed": bool(r.test_rule_passed)})
    return pd.DataFrame(rows, columns=COLUMNS)


def explained(ties: pd.DataFrame) -> pd.Series:
    """A tie is explained when its row flipped exactly when ORT put the second code ahead."""
    return (ties.ort_min_row_gap < 0) == ties.flipped_at_tie


