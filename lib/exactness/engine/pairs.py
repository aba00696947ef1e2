"""A class under a precision pair: eager against eager in another precision (TF32, bf16, fp16; emulated on a CPU
or run on a GPU), every seed compared, so no screen and no bound. What both studies measure of it, typed, and the
cause the engine reads from it; `engine.answers.pair_answer` words it."""

from __future__ import annotations

import math
from dataclasses import dataclass

from exactness.causes import Cause
from exactness.compare.rates import estimate

# The other side's error from float64, in its own roundoff x RMS, within this many times the reference side's (at
# least one unit) is the precision's noise, not another computation.
PAIR_NOISE_FACTOR = 16


def pair_noise(reference_units: float, other_units: float) -> bool | None:
    """Whether the other side's error from float64 is its precision's noise; None where no float64 forward ran."""
    if math.isnan(reference_units) or math.isnan(other_units):
        return None
    return other_units <= PAIR_NOISE_FACTOR * max(reference_units, 1.0)


def pair_cause(ran: bool, noise: bool | None, failures: int, failures_without_flip: int) -> Cause:
    """Not run, undecided without a float64 forward, a defect beyond the noise, then what the failures show."""
    if not ran:
        return Cause.NO_EXPORT
    if noise is None:
        return Cause.UNDECIDED
    if not noise:
        return Cause.DEFECT
    if failures and failures_without_flip == failures:
        return Cause.PRECISION_NOISE  # the outputs move beyond the tolerance with the same choices
    if failures_without_flip:
        return Cause.TIE_AND_NOISE
    return Cause.NEAR_TIE if failures else Cause.NEVER_FAILS


@dataclass(frozen=True)
class PairEvidence:
    """One class under one pair (`runtimes.sides.Pair.spec`): seeds run, seeds with a flipped discrete choice,
    export-test failures (and those with no flip), each side's largest error from float64 in its own roundoff x
    RMS (NaN where no float64 forward ran) and what it was measured on, the error that stopped the class, and how far
    the flipped choice's inputs differ between the sides (NaN where a study does not measure it)."""

    model: str
    pair: str
    seeds: int
    flipped: int
    failed: int
    failed_without_flip: int
    reference_error_units: float
    other_error_units: float
    error: str = ""
    input_noise_median: float = math.nan
    input_noise_max: float = math.nan
    measured_on: str = "its own choices forced"  # what the error from float64 was measured on

    @property
    def noise(self) -> bool | None:
        return pair_noise(self.reference_error_units, self.other_error_units)

    @property
    def cause(self) -> Cause:
        return pair_cause(not self.error, self.noise, self.failed, self.failed_without_flip)

    def per_scale(self, events: int) -> tuple[float, float, float]:
        """`events` per `compare.rates.PER` seeds with Wilson's interval (every seed compared)."""
        if not self.seeds:
            return math.nan, math.nan, math.nan
        e = estimate(events, self.seeds, self.seeds, self.seeds)
        return e.per, e.low, e.high
