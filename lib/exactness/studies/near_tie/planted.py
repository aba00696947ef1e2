"""What the planted defects measured, read from the defects table once for every sentence and answer."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd


@dataclass(frozen=True)
class DefectTally:
    """What the planted defects measured: the required ones (every ungraded one, graded ones of 10 tolerances and
    more) caught by each comparison, and the smallest graded defect each caught on every seed it was planted on."""

    required: int
    tie_aware: int
    test_rule: int
    planted: int
    smallest_tie_aware: float  # tolerances; NaN when no graded size was caught everywhere
    smallest_test_rule: float
    graded_test_rule: int = 0  # graded plantings (a size on a seed) the export test's rule caught
    graded: int = 0  # graded plantings

    @classmethod
    def of(cls, defects: pd.DataFrame) -> DefectTally:
        if not len(defects):
            return cls(0, 0, 0, 0, float("nan"), float("nan"))
        needed = defects[defects.required.astype(bool)] if "required" in defects else defects

        def smallest(column: str) -> float:
            if "tolerances" not in defects:
                return float("nan")
            graded = defects[defects.tolerances.notna()]
            sizes = [size for size, group in graded.groupby("tolerances") if group[column].astype(bool).all()]
            return float(min(sizes)) if sizes else float("nan")

        rule = needed["caught_by_test_rule"] if "caught_by_test_rule" in needed else needed.caught_by_tie_aware * 0
        graded = defects[defects.tolerances.notna()] if "tolerances" in defects else defects.iloc[:0]
        caught = int((graded.caught_by_test_rule == True).sum()) if "caught_by_test_rule" in graded else 0  # noqa: E712
        return cls(len(needed), int(needed.caught_by_tie_aware.sum()), int(rule.sum()),
                   len(defects), smallest("caught_by_tie_aware"), smallest("caught_by_test_rule"), caught, len(graded))

    @property
    def keeps(self) -> bool:
        return self.required > 0 and self.tie_aware == self.required


