"""The quantizer's screen and checks as the engine's tables (`engine.verdicts.ClassTables`): the wav2vec2 family's
plug-in. Its screen (the replayed draws) says which seeds are within reach of a flip; its check (the graph pool)
already writes the engine's margin and output rows; this module only selects a class's rows and names the one
discrete op they are about, so that the engine decides the cause, the rate and the test change as it does for
every other class."""

from __future__ import annotations

import pandas as pd

from exactness.compare.rates import RatePolicy
from exactness.engine import candidates, verdicts
from exactness.engine.rows import OpRow, ScreenRow, SeedRow, frame
from exactness.engine.verdicts import ClassTables, noise_ulps, reach_ulps
from exactness.models import wav2vec2_family as family
from exactness.studies.near_tie.check import QUANTIZER_NODE
from exactness.studies.near_tie.planted import DefectTally
from exactness.studies.near_tie.scale import is_candidate

QUANTIZER_MODULE = "quantizer"  # the module that holds the family's argmax (its forward calls it or never does)
QUANTIZER_OP = "argmax"


def _mine(table: pd.DataFrame, model: str, shape_mode: str) -> pd.DataFrame:
    if not len(table) or "model" not in table:
        return table.iloc[:0] if len(table.columns) else table
    keep = table.model == model
    return table[keep & (table.shape_mode == shape_mode)] if "shape_mode" in table else table[keep]


def class_reach(margins: pd.DataFrame) -> float:
    """The engine's reach for the quantizer's argmax (`engine.verdicts.reach_ulps`), in ulps, from the read noise a
    class's checks measured (`margins`: its rows in one shape mode)."""
    return reach_ulps(noise_ulps(margins, {QUANTIZER_NODE}))


def quantizer_op(model: str, shape_mode: str) -> pd.DataFrame:
    """The family's one counted discrete op: the quantizer's argmax, which reaches the outputs that read a code."""
    return frame([OpRow(model, shape_mode, QUANTIZER_NODE, "ArgMax", QUANTIZER_OP, QUANTIZER_MODULE, "aten::argmax", [],
                        list(family.CODE_OUTPUTS), True, True, True, "")], OpRow)


def screen_rows(screen: pd.DataFrame, model: str, shape_mode: str, threshold: float, threshold_ulps: float = 0.0,
                reach: float = 0.0) -> pd.DataFrame:
    """Each screened seed's smallest gap as the engine's screen row, `in_reach` where the quantizer's candidate rule
    (`scale.is_candidate`) takes it or its gap lies within the engine's `reach` (in ulps of the row's top logit), or
    where its logits are not all finite (no gap: the check measures what it read)."""
    mine = screen[screen.model == model] if len(screen) else screen
    if not len(mine):
        return frame([], ScreenRow).assign(in_reach=pd.Series(dtype=bool))
    if "smallest_gap_ulps" not in mine:
        raise ValueError("the engine reads the screen's smallest_gap_ulps column (screened by this version)")
    nonfinite = mine.min_gap.isna()
    rows = pd.DataFrame({"model": model, "shape_mode": shape_mode, "seed": mine.seed.astype(int).to_numpy(),
                         "node": QUANTIZER_NODE, "decisions": 0, "min_margin": mine.min_gap.to_numpy(),
                         "min_margin_ulps": mine.smallest_gap_ulps.where(mine.min_gap > 0, 0.0).to_numpy(),
                         "exact_ties": (mine.min_gap == 0).astype(int).to_numpy(),
                         "reads_nonfinite": nonfinite.astype(int).to_numpy(), "recorder": "replayed draws"})
    reached = rows.seed.map(candidates.in_reach(rows, reach)).to_numpy()  # the engine's rule, as every study's
    return rows.assign(in_reach=is_candidate(mine, threshold, threshold_ulps).to_numpy() | reached)


def seed_rows(checks: pd.DataFrame) -> pd.DataFrame:
    """Each check as the engine's seed row: the export test's rule, where it stopped, and the float64 reference."""
    return frame([SeedRow(r.model, r.shape_mode, int(r.seed), "candidates", r.weights_path, bool(r.n_flipped_rows),
                          False, bool(r.test_rule_passed), r.first_failing_output or "", bool(r.rule_forgiven),
                          ", ".join(r.never_compared), r.reference, float("nan"))
                  for r in checks.itertuples()], SeedRow)


def tie_aware_keeps(checks: pd.DataFrame, defects: pd.DataFrame | None) -> bool | None:
    """Whether the study's tie-aware comparison keeps value checks on one class's rows: it passed every check and
    caught every required planted defect (`planted.DefectTally.keeps`); None where it was not measured (no judged
    check or no planted defect)."""
    if defects is None or not len(defects) or not len(checks) or "tie_aware_passed" not in checks:
        return None
    passed = checks.tie_aware_passed.astype("boolean").fillna(False).astype(bool)  # not judged is not passed
    return bool(passed.all()) and DefectTally.of(defects).keeps


def tie_aware_rows(model: str, shape_mode: str, checks: pd.DataFrame,
                   defects: pd.DataFrame | None) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """One class's checks and planted defects in one shape mode (what `tie_aware_keeps` judges)."""
    planted = _mine(defects, model, shape_mode) if defects is not None and len(defects) else None
    return _mine(checks, model, shape_mode), planted


def class_tables(model: str, shape_mode: str, screen: pd.DataFrame, checks: pd.DataFrame, outputs: pd.DataFrame,
                 margins: pd.DataFrame, threshold: float, threshold_ulps: float = 0.0,
                 reach: float = 0.0, defects: pd.DataFrame | None = None) -> ClassTables:
    """One class's rows in one shape mode, as the engine's verdict reads them (`reach`: the engine's, in ulps;
    `defects`: the planted defects' table, for the tie-aware comparison's measured verdict)."""
    mine, planted = tie_aware_rows(model, shape_mode, checks, defects)
    return ClassTables(pd.Series({"model": model, "shape_mode": shape_mode, "error": ""}),
                       quantizer_op(model, shape_mode),
                       screen_rows(screen, model, shape_mode, threshold, threshold_ulps, reach),
                       _mine(margins, model, shape_mode), _mine(outputs, model, shape_mode),
                       seed_rows(mine), scanned=False, tie_aware=tie_aware_keeps(mine, planted))


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
        reach = class_reach(mine)
        tables = class_tables(model, mode, screen, checks, outputs, margins, threshold, threshold_ulps, reach, defects)
        found.append(verdicts.verdict(tables, policy, reach))
    return found + [verdicts.never_runs(model, mode, QUANTIZER_MODULE, QUANTIZER_OP) for model in immune]


def tie_aware_kept(checks: pd.DataFrame, defects: pd.DataFrame | None, shape_mode: str = "") -> frozenset[str]:
    """The classes on which the tie-aware comparison was measured to keep value checks in `shape_mode` (default:
    the checks' first), as the engine's offer reads it (`tie_aware_keeps`)."""
    if not len(checks):
        return frozenset()
    mode = shape_mode or str(checks.shape_mode.iloc[0])
    mine = checks[checks.shape_mode == mode]
    return frozenset(m for m in sorted(set(mine.model))
                     if tie_aware_keeps(*tie_aware_rows(m, mode, mine, defects)))
