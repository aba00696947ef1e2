"""How every page states a count, a rate, a bound and a plural: one shape, written here and nowhere else.

A rate is "1 in N" with its 95% interval and the count it comes from: "1 in 1,000 (95% 1 in 3,600 to 1 in 270;
2 of 2,000 seeds)". "1 in N" rather than failures per 40,000: it reads as how many seeds (CI runs) pass before
one fails, it needs no denominator chosen for one investigation, and it reads the same at 8 seeds and at
40,000; an investigation's own figure ("15 in 40,000") is set beside it in the same shape. A count of none is
a bound and is called one: "none in 2,000 seeds: at most 1 in 670 (95% bound)". Where nothing can happen at
all (no discrete op can flip) the rate is "never", with why.
"""

from __future__ import annotations

import math

from exactness.compare.rates import RatePolicy, wilson_interval


def count(n: float) -> str:
    """'2,000': an exact count with separators."""
    return f"{int(n):,}"


def plural(n: float, word: str, many: str | None = None) -> str:
    """'1 seed', '2,000 seeds', '3 classes' (`many` where adding an s is wrong)."""
    return f"{count(n)} {word if int(n) == 1 else (many or word + 's')}"


def significant(x: float, digits: int = 2) -> str:
    """A measured value with `digits` significant digits (0 stays 0; no 'e-0x' for ordinary sizes)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    if x == 0:
        return "0"
    if 1e-3 <= abs(x) < 1e5:
        decimals = max(0, digits - 1 - math.floor(math.log10(abs(x))))
        return f"{x:,.{decimals}f}"
    return f"{x:.{digits - 1}e}"


def one_in(rate: float) -> str:
    """'1 in 2,700' for a rate per seed; a rate of 0 (or none measured) reads 'none', never 'inf'."""
    if rate is None or math.isnan(rate) or rate <= 0:
        return "none"
    n = 1 / rate
    if n < 1.05:  # every seed, or as good as: '1 in 1', never '1 in 1.0' beside it
        return "1 in 1"
    if n >= 100:  # two significant digits, as every measured value: 1 in 3,600, not 1 in 3,646
        n = round(n, 1 - math.floor(math.log10(n)))
    return f"1 in {significant(n, 2)}"


def interval(low: float, high: float, worst_case: bool = False) -> str:
    """A rate's range per seed: '95% 1 in 3,600 to 1 in 270', or, where the upper end counts every unchecked
    candidate as an event (not a confidence bound), 'from 1 in 3,600 to 1 in 270, the upper end a worst case'."""
    low_words = one_in(low) if low and low > 0 else "none"
    if worst_case:
        return f"from {low_words} to {one_in(high)}, the upper end a worst case"
    return f"95% {low_words} to {one_in(high)}"


def _of(events: int, seeds: int, unit: str, checked: int | None) -> str:
    """'2 of 2,000 seeds', or, where a sample of them was checked, '2 of 150 checked of 2,000 seeds'."""
    if checked is not None and checked < seeds:
        return f"{count(events)} in {count(checked)} checked of {plural(seeds, unit)}"
    return f"{count(events)} of {plural(seeds, unit)}"


def bound(high: float, seeds: int, unit: str = "seed", checked: int | None = None, worst_case: bool = False) -> str:
    """'none in 2,000 seeds: at most 1 in 670 (95% bound)'; a bound that counts every unchecked candidate as an
    event says so ('worst-case bound')."""
    where = (f"{count(checked)} checked of {plural(seeds, unit)}" if checked is not None and checked < seeds
             else plural(seeds, unit))
    return f"none in {where}: at most {one_in(high)} ({'worst-case' if worst_case else '95%'} bound)"


def rate(events: int, seeds: int, unit: str = "seed", low: float | None = None, high: float | None = None,
         point: float | None = None, worst_case: bool = False, checked: int | None = None) -> str:
    """The one shape of a rate: '1 in 1,000 (95% 1 in 3,600 to 1 in 270; 2 of 2,000 seeds)'. `low`, `high`
    and `point` (per seed) where the rate is not a plain k of n (a screen's strata, `checked` of the seeds
    checked); else Wilson's interval. None at all is a bound (`bound`): the one-sided 95% bound every verdict
    decides by (`RatePolicy.upper_bound`), so one count of none in N seeds has one bound on every page."""
    if not seeds:
        return "not measured"
    if not events and high is None:
        return bound(RatePolicy().upper_bound(seeds), seeds, unit, checked)
    if low is None or high is None:
        low, high = wilson_interval(events, seeds)
    if point is None:
        point = events / seeds
    if not events and not point:
        return bound(high, seeds, unit, checked, worst_case)
    return f"{one_in(point)} ({interval(low, high, worst_case)}; {_of(events, seeds, unit, checked)})"


NEVER_FLIPS = "never (no discrete op can flip)"


def machine_words(facts: dict) -> str:
    """A GPU run's machine (its machine.json, `runtimes.gpu_folder.machine_facts`) as a report names it."""
    return (f"{facts.get('gpu') or 'no GPU'} (torch {facts.get('torch')}, transformers {facts.get('transformers')}, "
            f"CUDA {facts.get('cuda')}, cuDNN {facts.get('cudnn')})")
