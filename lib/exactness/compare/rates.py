"""Rates of rare events with honest intervals, and whether two measured rates can be one rate: the one estimate
of how often a class fails or flips that every study states (`estimate`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from exactness import published


def wilson_interval(k: int, n: int) -> tuple[float, float]:
    """95% Wilson score interval for k successes in n trials (sensible at k = 0, unlike k/n +- ...): scipy's."""
    from scipy.stats import binomtest  # here: the command line's parameter rules import this module, not scipy

    if n == 0:
        return float("nan"), float("nan")
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    return (0.0 if k == 0 else float(ci.low)), float(ci.high)


def binomial_two_sided_p(k1: int, n1: int, k2: int, n2: int) -> float:
    """Exact conditional test that two binomial rates are equal: given k1 + k2 events, k1 is binomial
    with p = n1 / (n1 + n2); the p-value sums every outcome no more likely than the one observed."""
    from scipy.stats import binomtest

    total = k1 + k2
    if total == 0:
        return 1.0
    return min(1.0, float(binomtest(k1, total, n1 / (n1 + n2)).pvalue))


@dataclass(frozen=True)
class RatePolicy:
    """When "never flips" may be said: after no event, the one-sided 95% upper bound on the rate must lie below
    `rate` (both studies decide by this, and say how many seeds it takes)."""

    rate: float = published.value("failure_rate")  # transformers #50575's: about 1 in 2,700
    level: float = 0.05

    def upper_bound(self, seeds: int) -> float:
        """The 95% upper bound on a rate after no event in `seeds` trials."""
        return 1.0 - self.level ** (1.0 / seeds) if seeds else 1.0

    def seeds_needed(self) -> int:
        """The fewest seeds after which no event bounds the rate below `rate`."""
        return math.ceil(math.log(self.level) / math.log1p(-self.rate))


PER = 40_000  # failures are stated per this many seeds: the seed investigation's scale


@dataclass(frozen=True)
class Estimate:
    """A count per PER seeds with its 95% interval, from a stratified sample (method in `estimate`)."""

    per: float
    low: float
    high: float
    observed: int  # events among the checked seeds
    checked: int
    seeds: int  # the seeds the rate is over: every screened seed (or, unscreened, every checked one)
    exact: bool  # every seed where an event can happen was checked: the count is the seeds', not a sample's
    # seeds within reach were left unchecked: the upper end counts every one of them as an event (a worst case,
    # not a confidence bound)
    worst_case: bool = False


def estimate(k_in: int, checked_in: int, size_in: int, total: int,
             outside: tuple[int, int] | None = None, size_out: int = 0,
             sampled: tuple[int, int, int] = (0, 0, 0)) -> Estimate:
    """Events per PER seeds from a screen's strata. The seeds within reach of a tie (`size_in`) are checked
    smallest margins first, not at random: the count there lies between the `k_in` found and `k_in` plus every
    unchecked one (the point extrapolates the checked fraction). `sampled`: (events, checks, size) of the exact
    ties, checked in seed order, a sample as good as random: the count there is the sample's rate times the
    stratum's size, with Wilson's interval (never below the events seen, nor above them plus the unchecked).
    Beyond reach an event needs a sample of its own (`outside`: events and checks among the calibration seeds
    there, for failures no flip explains), else none happens there (the screen's premise: no flip beyond the
    noise's reach). When every seed where an event can happen was checked, the count is exact and the interval
    is Wilson's for a rate seen k times in `total` (for none, the one-sided 95% bound `RatePolicy.upper_bound`)."""
    k_s, n_s, size_s = sampled
    if n_s >= size_s:  # the sample is the whole stratum: its count is exact, like a stratum checked whole
        k_in, checked_in, size_in, k_s, n_s, size_s = k_in + k_s, checked_in + n_s, size_in + size_s, 0, 0, 0
    unchecked = size_in - checked_in
    if not total:
        return Estimate(float("nan"), float("nan"), float("nan"), 0, 0, 0, False)
    if unchecked <= 0 and outside is None and not size_s:
        low, high = wilson_interval(k_in, total)
        if not k_in:  # none seen: the one bound a count of none has on every page (`RatePolicy`), not Wilson's end
            high = RatePolicy().upper_bound(total)
        return Estimate(PER * k_in / total, PER * low, PER * high, k_in, checked_in, total, True)
    point = k_in + (unchecked * k_in / checked_in if checked_in else 0.0)
    low, high = float(k_in), float(k_in + max(unchecked, 0))
    if size_s:
        s_low, s_high = wilson_interval(k_s, n_s) if n_s else (0.0, 1.0)
        point += size_s * (k_s / n_s if n_s else 0.0)
        low += max(float(k_s), size_s * s_low)
        high += min(float(k_s + size_s - n_s), size_s * s_high)
    if outside is not None and outside[1]:
        k, n = outside
        w_low, w_high = wilson_interval(k, n)
        point, low, high = point + size_out * k / n, low + size_out * w_low, high + size_out * w_high
    return Estimate(PER * point / total, PER * low / total, PER * min(high / total, 1.0),
                    k_in + k_s + (outside or (0, 0))[0], checked_in + n_s + (outside or (0, 0))[1], total, False,
                    unchecked > 0)
