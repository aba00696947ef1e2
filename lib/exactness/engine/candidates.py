"""Which screened seeds the engine checks: those whose smallest margin lies within its reach of a tie
(`verdicts.reach_ulps`) or whose counted ops read a non-finite value, over the engine's screen rows (`rows.ScreenRow`),
whatever screened them. One rule for every study, so that the seeds a verdict counts as within reach are the seeds
that were checked."""

from __future__ import annotations

import pandas as pd

from exactness.engine.verdicts import tie_seeds


def smallest_margins(screen: pd.DataFrame) -> pd.DataFrame:
    """Per seed: the smallest margin in ulps over the counted ops, and whether any reads a non-finite value."""
    if not len(screen):
        return pd.DataFrame(columns=["seed", "min_margin_ulps", "nonfinite"])
    return screen.groupby("seed", as_index=False).agg(min_margin_ulps=("min_margin_ulps", "min"),
                                                      nonfinite=("reads_nonfinite", "max"))


def in_reach(screen: pd.DataFrame, reach: float) -> dict[int, bool]:
    """Per screened seed, whether it is within `reach` ulps of a tie (or reads a non-finite value)."""
    per_seed = smallest_margins(screen)
    inside = (per_seed.min_margin_ulps <= reach) | (per_seed.nonfinite > 0)
    return dict(zip(per_seed.seed.astype(int), inside.astype(bool), strict=True))


def candidates(screen: pd.DataFrame, reach: float, exclude: set[int], cap: int | None = None,
               tie_checks: int | None = None) -> list[int]:
    """Seeds within reach (`in_reach`), at most `cap` (None: all), leaving out `exclude` (already checked). Exact
    ties are a stratum of their own, sampled in seed order up to `tie_checks` checks (`exclude` included; None:
    all): a seed's number says nothing of whether it flips, so the sample's rate is the stratum's
    (`compare.rates.estimate`). The others follow, smallest margins first (non-finite reads first of all)."""
    per_seed = smallest_margins(screen)
    inside = per_seed[(per_seed.min_margin_ulps <= reach) | (per_seed.nonfinite > 0)]
    tie = inside.seed.isin(tie_seeds(screen))  # the verdict's strata are the same seeds
    ties = inside[tie].sort_values("seed")
    taken = int(ties.seed.isin(exclude).sum())
    untaken = ties.seed[~ties.seed.isin(exclude)]
    sampled = [int(s) for s in (untaken if tie_checks is None else untaken.head(max(tie_checks - taken, 0)))]
    rest = inside[~tie & ~inside.seed.isin(exclude)].assign(finite=lambda t: t.nonfinite == 0)
    rest = rest.sort_values(["finite", "min_margin_ulps", "seed"], na_position="first")
    others = [int(s) for s in rest.seed]
    if cap is None:
        return sorted(others + sampled)
    return sorted((others[:max(cap - len(sampled), 0)] + sampled)[:max(cap, 0)])
