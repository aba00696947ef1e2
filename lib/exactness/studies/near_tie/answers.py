"""The near-tie report's answer table: per class, the engine's verdict (`engine.verdicts`) on the quantizer's
screen and checks (`engine_tables`), worded as every study words one (`engine.answers`). A class answers the same
here and in the discrete-ops report; only the seeds behind it differ. Read from the run's tables (the first
shape mode, as the rates table), never from the sentences."""

from __future__ import annotations

import pandas as pd

from exactness.compare.rates import RatePolicy
from exactness.engine import answers as engine_answers
from exactness.engine import verdicts
from exactness.studies.near_tie import engine_tables
from exactness.workbook.answers import Answer, Columns

COLUMNS = Columns(rate="export test fails", flips="a code row flips")


def never_runs_proof(model: str) -> str:
    """A class that never runs its argmax, and #50575's reason for skipping it where it gave one."""
    from exactness import published

    proof = "its quantizer is not called in eval forward: no code to flip"
    if model == "UniSpeechSatForPreTraining":
        proof += (f"; #50575 (section 5) skipped it because \"{published.UNISPEECHSAT_REASON}\": its forward never "
                  "runs that argmax, so the reason does not hold")
    return proof


def class_verdicts(screen: pd.DataFrame, checks: pd.DataFrame, outputs: pd.DataFrame, margins: pd.DataFrame,
                   threshold: float, immune: list[str] = (), threshold_ulps: float = 0.0,
                   policy: RatePolicy | None = None, shape_mode: str = "",
                   defects: pd.DataFrame | None = None) -> list[verdicts.ClassVerdict]:
    """The engine's verdict per screened class in `shape_mode` (default: the checks' first), then one per class
    that never calls its quantizer. `policy`: the rate a class must be bounded under to never flip (default:
    #50575's failure rate). The reach is the engine's, from the class's own read noise; a seed within it that was not
    checked widens the rate to a worst case. `defects`: the planted defects, so that a tie-aware comparison is
    offered only where it was measured to keep value checks."""
    policy = policy or RatePolicy()
    mode = shape_mode or (str(checks.shape_mode.iloc[0]) if len(checks) else "static")
    found = []
    for model in sorted(set(screen.model)) if len(screen) else []:
        mine = margins[(margins.model == model) & (margins.shape_mode == mode)] if len(margins) else margins
        reach = engine_tables.class_reach(mine)
        tables = engine_tables.class_tables(model, mode, screen, checks, outputs, margins, threshold, threshold_ulps,
                                            reach, defects)
        found.append(verdicts.verdict(tables, policy, reach))
    return found + [verdicts.never_runs(model, mode, never_runs_proof(model)) for model in immune]


def answers(screen: pd.DataFrame, checks: pd.DataFrame, outputs: pd.DataFrame, margins: pd.DataFrame,
            threshold: float, immune: list[str] = (), threshold_ulps: float = 0.0,
            shape_mode: str = "", defects: pd.DataFrame | None = None) -> list[Answer]:
    """One line per class screened, then one per class that never calls its quantizer."""
    return [engine_answers.answer(v, v.model) for v in class_verdicts(screen, checks, outputs, margins, threshold,
                                                                        immune, threshold_ulps,
                                                                        shape_mode=shape_mode, defects=defects)]


def tie_aware_kept(checks: pd.DataFrame, defects: pd.DataFrame | None, shape_mode: str = "") -> frozenset[str]:
    """The classes on which the tie-aware comparison was measured to keep value checks in `shape_mode` (default:
    the checks' first), as the engine's offer reads it (`engine_tables.tie_aware_keeps`)."""
    if not len(checks):
        return frozenset()
    mode = shape_mode or str(checks.shape_mode.iloc[0])
    mine = checks[checks.shape_mode == mode]
    return frozenset(m for m in sorted(set(mine.model))
                     if engine_tables.tie_aware_keeps(*engine_tables.tie_aware_rows(m, mode, mine, defects)))
