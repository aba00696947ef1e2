"""Which seeds are candidates, and why classes differ in how many: rows per seed and logit scale.

An absolute threshold on the top-1/top-2 gap (1.5e-5) means different things in classes whose top logits
differ: 126 ulps of a top logit near 1.5, 31 ulps of one near 6. Rounding noise scales with the logits, so the
comparable axis is the gap in ulps of the row's own top logit (`threshold_ulps`). A class with more argmax
rows per seed (UniSpeech: 910 against 364) has more chances per seed for a small gap. Dividing both out leaves
the density of a single row's gap near zero, per ulp of its top logit: if that density is about the same in
every class, rows and scale explain the difference in candidates.
"""

from __future__ import annotations

import pandas as pd

from exactness.compare.rates import wilson_interval
from exactness.compare.scale import float32_ulp

# Per-row densities within this factor of each other (or inside each other's 95% intervals) count as the same:
# the rows and the scale then explain the candidates.
SAME_DENSITY_FACTOR = 2.0


def is_candidate(screen: pd.DataFrame, threshold: float, threshold_ulps: float = 0.0) -> pd.Series:
    """Seeds to check: the smallest gap in ulps of its row's top logit below `threshold_ulps` when that is
    positive, else the smallest gap below `threshold` (logit units)."""
    if threshold_ulps > 0:
        if "smallest_gap_ulps" not in screen:
            raise ValueError("threshold_ulps needs the screen's smallest_gap_ulps column (screened by this version)")
        return screen.smallest_gap_ulps < threshold_ulps
    return screen.min_gap < threshold


def per_row_rate(seed_rate: float, rows: int) -> float:
    """The chance that one row's gap is below the threshold, from the chance that a seed's smallest is:
    1 - (1 - P)^(1/rows), rows taken as independent."""
    return 1.0 - (1.0 - seed_rate) ** (1.0 / rows) if rows > 0 else float("nan")


def explanation(screen: pd.DataFrame, threshold: float, rows_per_seed: dict[str, int]) -> pd.DataFrame:
    """Per class: rows per seed, the median top logit of the smallest-gap rows and 1 ulp there, the threshold
    in those ulps, candidates, and the per-row density of a gap below the threshold per ulp of the top logit
    (per million), with a 95% interval from the seed rate's Wilson interval."""
    rows = []
    for model, group in screen.groupby("model", sort=True):
        n, r = len(group), int(rows_per_seed[model])
        top = float(group.top_logit.abs().median())
        ulp_at_top = float(float32_ulp(top))
        threshold_in_ulps = threshold / ulp_at_top
        k = int((group.min_gap < threshold).sum())
        low, high = wilson_interval(k, n)  # the seed rate's 95% interval
        density = [per_row_rate(rate, r) / threshold_in_ulps * 1e6 for rate in (k / n, low, high)]
        rows.append({"model": model, "seeds": n, "rows_per_seed": r, "top_logit_median": top,
                     "ulp_at_top": ulp_at_top, "threshold_ulps": threshold_in_ulps, "candidates": k,
                     "candidate_rate": k / n, "per_row_per_ulp_e6": density[0], "per_row_per_ulp_e6_low": density[1],
                     "per_row_per_ulp_e6_high": density[2]})
    return pd.DataFrame(rows)


def densities_agree(table: pd.DataFrame) -> tuple[bool, float]:
    """(do the classes' per-row densities per ulp agree, the largest ratio between two of them). They agree
    when the largest ratio is within SAME_DENSITY_FACTOR or every pair's 95% intervals overlap."""
    measured = table[table.candidates > 0]
    if len(measured) < 2:
        return True, 1.0
    ratio = float(measured.per_row_per_ulp_e6.max() / measured.per_row_per_ulp_e6.min())
    overlap = float(table.per_row_per_ulp_e6_high.min()) >= float(table.per_row_per_ulp_e6_low.max())
    return ratio <= SAME_DENSITY_FACTOR or overlap, ratio


