"""Rates of rare events with honest intervals, and whether two measured rates can be one rate."""

from __future__ import annotations

import math


def wilson_interval(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """95% Wilson score interval for k successes in n trials (sensible at k = 0, unlike k/n +- ...)."""
    if n == 0:
        return float("nan"), float("nan")
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (0.0 if k == 0 else max(0.0, centre - half)), min(1.0, centre + half)


def binomial_two_sided_p(k1: int, n1: int, k2: int, n2: int) -> float:
    """Exact conditional test that two binomial rates are equal: given k1 + k2 events, k1 is binomial
    with p = n1 / (n1 + n2); the p-value sums every outcome no more likely than the one observed."""
    total, p = k1 + k2, n1 / (n1 + n2)
    if total == 0:
        return 1.0
    probs = [math.comb(total, i) * p ** i * (1 - p) ** (total - i) for i in range(total + 1)]
    observed = probs[k1]
    return min(1.0, sum(q for q in probs if q <= observed * (1 + 1e-9)))
