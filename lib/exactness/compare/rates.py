"""Rates of rare events with honest intervals, and whether two measured rates can be one rate."""

from __future__ import annotations

import math
from dataclasses import dataclass

from exactness import reference


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

    rate: float = reference.value("failure_rate")  # transformers #50575's: about 1 in 2,700
    level: float = 0.05

    def upper_bound(self, seeds: int) -> float:
        """The 95% upper bound on a rate after no event in `seeds` trials."""
        return 1.0 - self.level ** (1.0 / seeds) if seeds else 1.0

    def seeds_needed(self) -> int:
        """The fewest seeds after which no event bounds the rate below `rate`."""
        return math.ceil(math.log(self.level) / math.log1p(-self.rate))
