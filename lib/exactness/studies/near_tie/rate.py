"""Rates with intervals, the seed's bucket table, the screen's summary and the per-seed flip probability from
the gap-noise law (its prediction of a count: `near_tie.prediction`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from exactness.compare.rates import PER, estimate
from exactness.studies.near_tie.scale import is_candidate


@dataclass(frozen=True)
class Tally:
    """What a set of checks counts, computed here once: every sentence, table, caption and summary that states
    a count of checks, flips or failures reads it from a Tally."""

    checks: int
    flipped: int  # checks with a flipped code row
    failed: int  # checks the export test's rule fails
    flipped_but_passed: int
    exact_ties_failed: int  # failures whose smallest-gap row was an exact tie in eager
    one_row: int  # flipped checks with exactly one flipped row
    at_smallest_gap: int  # flipped checks whose flipped row is the smallest-gap row
    usage_unchanged: int  # flips that left the code usage (so the perplexity) unchanged

    @classmethod
    def of(cls, checks: pd.DataFrame) -> Tally:
        if not len(checks):
            return cls(0, 0, 0, 0, 0, 0, 0, 0)
        flipped = checks.n_flipped_rows > 0
        failed = ~checks.test_rule_passed.astype(bool)

        def column(name: str) -> pd.Series:
            return checks[name].astype(bool) if name in checks else pd.Series(False, index=checks.index)

        return cls(len(checks), int(flipped.sum()), int(failed.sum()), int((flipped & ~failed).sum()),
                   int((column("exact_tie") & failed).sum()), int((checks.n_flipped_rows == 1).sum()),
                   int((flipped & column("flip_is_min_gap_row")).sum()),
                   int((flipped & column("usage_unchanged")).sum()))


def buckets(screen: pd.DataFrame, checks: pd.DataFrame, outputs: pd.DataFrame, margins: pd.DataFrame,
            threshold: float, threshold_ulps: float = 0.0) -> pd.DataFrame:
    """Per model and shape mode: screened, candidates (the seeds within the engine's reach, `engine_tables`),
    checked, flipped, failed, flipped but passed, and the failure rate: the engine's estimate, the one the answer
    table states (`near_tie.answers`), kept whole in `estimate` (`sentences.rates_table` words it)."""
    from exactness.studies.near_tie.engine_tables import class_verdicts

    rows = []
    for mode, in_mode in checks.groupby("shape_mode", sort=False) if len(checks) else []:
        found = {v.model: v for v in class_verdicts(screen, checks, outputs, margins, threshold,
                                                    threshold_ulps=threshold_ulps, shape_mode=mode)}
        for model, group in in_mode.groupby("model"):
            if model not in found:  # checked but never screened: no seed count to state a rate over
                continue
            tally, v = Tally.of(group), found[model]
            e = v.failures
            rows.append({
                "model": model, "shape_mode": mode, "screened": v.screened, "candidates": v.candidates,
                "checked": tally.checks, "checked_candidates": v.checked_candidates,
                "worst_case": bool(e.worst_case), "flipped": tally.flipped, "failed": tally.failed,
                "flipped_but_passed": tally.flipped_but_passed, "exact_ties_failed": tally.exact_ties_failed,
                "failure_rate": e.per / PER, "rate_low": e.low / PER, "rate_high": e.high / PER,
                "one_in": PER / e.per if e.per else float("inf"), "estimate": e,
            })
    return pd.DataFrame(rows)


def seed_buckets() -> pd.DataFrame:
    """transformers #50575's bucket table (section 5), labelled, in the columns of `buckets` (to set beside ours):
    its failures over its seeds screened, every candidate checked."""
    from exactness import published

    screened, failed = int(published.value("seeds_screened")), int(published.value("failures"))
    candidates = int(published.value("candidates"))
    return pd.DataFrame([{
        "model": "transformers #50575 (Wav2Vec2ConformerForPreTraining, CPU)", "screened": screened,
        "candidates": candidates, "checked": candidates,
        "flipped": int(published.value("flips")), "failed": failed,
        "flipped_but_passed": int(published.value("flips_passing")),
        "exact_ties_failed": int(published.value("exact_ties")), "failure_rate": published.value("failure_rate"),
        "one_in": screened / failed, "estimate": estimate(failed, candidates, candidates, screened)}])


def noise_below(gaps: np.ndarray, deltas: np.ndarray) -> np.ndarray:
    """For each eager gap g, how many gap-noise values delta lie strictly below -g (a tie the other side keeps
    exact does not flip): the one noise law, counted; `prediction.forecast` weighs it per checked seed."""
    return np.searchsorted(np.sort(deltas), -np.asarray(gaps), side="left")


def flip_probability(gaps: np.ndarray, deltas: np.ndarray) -> np.ndarray:
    """P(flip | eager gap g) = P(delta < -g) from the empirical law of the gap noise delta (`noise_below`)."""
    return noise_below(gaps, deltas) / max(len(deltas), 1)


def screen_summary(screen: pd.DataFrame, threshold: float, threshold_ulps: float = 0.0) -> pd.DataFrame:
    """Per class, for people: seeds screened, candidates (`near_tie_scale.is_candidate`), exact ties, the smallest
    gap and the 0.1%, 1% and 50% quantiles of the smallest gap per seed; and, on the comparable axis, the 1% and
    50% quantiles of the smallest gap in ulps of its row's top logit."""
    rows = []
    for model, group in screen.groupby("model", sort=True):
        gaps = group.min_gap
        row = {"model": model, "seeds": len(group),
               "candidates": int(is_candidate(group, threshold, threshold_ulps).sum()),
               "exact_ties": int((gaps == 0).sum()), "smallest_gap": float(gaps.min()),
               "gap_q001": float(gaps.quantile(0.001)), "gap_q01": float(gaps.quantile(0.01)),
               "gap_median": float(gaps.median())}
        if "smallest_gap_ulps" in group:
            row |= {"gap_ulps_q01": float(group.smallest_gap_ulps.quantile(0.01)),
                    "gap_ulps_median": float(group.smallest_gap_ulps.median())}
        rows.append(row)
    return pd.DataFrame(rows)


def flip_curve(checks: pd.DataFrame, deltas: dict[str, np.ndarray]) -> pd.DataFrame:
    """Each checked seed (first shape mode's noise law) with its eager gap in ulps of the top logit, whether
    it flipped, and the predicted P(flip) from its class's gap noise: the points and curve of one figure."""
    rows = []
    for model, group in checks.groupby("model", sort=True):
        d = deltas.get(model)
        if d is None or not len(d):
            continue
        first = group.drop_duplicates("seed")
        rows.append(pd.DataFrame({"model": model, "seed": first.seed.to_numpy(),
                                  "min_gap_ulps": first.min_gap_ulps.to_numpy(),
                                  "flipped": (first.n_flipped_rows > 0).to_numpy(),
                                  "p_flip": flip_probability(first.min_gap.to_numpy(), d)}))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(
        columns=["model", "seed", "min_gap_ulps", "flipped", "p_flip"])


def beside_investigation(rates: pd.DataFrame) -> pd.DataFrame:
    """Our rates per class (`buckets`), then the investigation's (`seed_buckets`)."""
    return pd.concat([rates, seed_buckets()], ignore_index=True)


def failure_causes(checks: pd.DataFrame) -> pd.DataFrame:
    """Per model: checks, failures, and how each failure is explained. A flipped near-tie: a code flipped and
    forcing ORT's codes on eager brings every output it reaches within float64's noise bound of ORT's (the engine's
    test, `explained_by_flips`). A flip that leaves outputs apart
    when aligned, or a failure without any flip, is not explained by a tie: possible bug (or float noise
    beyond the tolerance, which the export test's rule cannot tell apart from one)."""
    rows = []
    for model, group in checks.groupby("model", sort=True):
        failed = ~group.test_rule_passed.astype(bool)
        flipped = group.n_flipped_rows > 0
        aligned = group.explained_by_flips.fillna(False).astype(bool)
        rows.append({"model": model, "checks": len(group), "failures": int(failed.sum()),
                     "flipped_near_tie": int((failed & flipped & aligned).sum()),
                     "flip_not_aligned": int((failed & flipped & ~aligned).sum()),
                     "no_flip": int((failed & ~flipped).sum())})
    return pd.DataFrame(rows, columns=["model", "checks", "failures", "flipped_near_tie", "flip_not_aligned",
                                       "no_flip"])
