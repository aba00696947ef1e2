"""The near-tie report's answer table: per class, the engine's verdict (`engine.verdicts`) on the quantizer's
screen and checks (`engine_tables`), worded as every study words one (`engine.answers`). A class answers the same
here and in the discrete-ops report; only the seeds behind it differ. Read from the run's tables (the first
shape mode, as the rates table), never from the sentences."""

from __future__ import annotations

import pandas as pd

from exactness.engine import answers as engine_answers
from exactness.studies.near_tie import engine_tables
from exactness.workbook.answers import Answer, Columns

COLUMNS = Columns(rate="export test fails", flips="a code row flips")


def answers(screen: pd.DataFrame, checks: pd.DataFrame, outputs: pd.DataFrame, margins: pd.DataFrame,
            threshold: float, immune: list[str] = (), threshold_ulps: float = 0.0,
            shape_mode: str = "", defects: pd.DataFrame | None = None) -> list[Answer]:
    """One line per class screened, then one per class that never calls its quantizer."""
    found = engine_tables.class_verdicts(screen, checks, outputs, margins, threshold, immune, threshold_ulps,
                                         shape_mode=shape_mode, defects=defects)
    return [engine_answers.answer(v, v.model) for v in found]


