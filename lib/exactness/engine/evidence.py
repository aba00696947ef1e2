"""What a class's verdict rests on, as numbers: decided by `verdicts`, put into words by `verdict_words` only.

Tests of the science assert on these values; a sentence can be reworded without touching one of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from exactness.engine.places import Localization, Remedy


class DefectSign(Enum):
    """How the rows show a defect, in the order `verdicts.find_defect` looks for them."""

    SHAPE = "another shape"
    DTYPE = "another dtype"
    NONFINITE_OUTPUT = "non-finite on one side only"
    BEYOND_NOISE = "beyond the noise bound"
    NOT_EXPLAINED = "not explained by the flips"
    NONFINITE_INPUT = "a discrete op's input non-finite on one side"
    FLIP_AMONG_NONFINITE = "a flip among values not all finite"
    FLIP_BEYOND_REACH = "a flip beyond the noise's reach"
    NAN_IN_EAGER = "NaN in eager itself"  # the model's own forward breaks, before any export


@dataclass(frozen=True)
class Defect:
    seed: int  # the seed whose rows prove it (and where it is localized)
    output: str  # the output that shows it ("" when an op's input shows it)
    sign: DefectSign
    # values non-finite on one side (an output; NaN in eager, for NAN_IN_EAGER), or decisions reading non-finite
    # values in ORT
    count: int = 0
    of: int = 0  # the output's elements, or the op's decisions
    eager_count: int = 0  # decisions reading non-finite values in eager
    ort_error: float = float("nan")  # from float64
    eager_error: float = float("nan")
    times: float = float("nan")  # ORT's error over eager's (at least one ulp of the output's scale)
    bound: float = float("nan")  # the noise bound
    forced_difference: float = float("nan")  # left after forcing ORT's choices on eager
    op_type: str = ""
    node: str = ""
    scope: str = ""  # the module the op sits in, where the scan knows it
    margin_ulps: float = float("nan")  # eager's margin where the op flipped
    reach_ulps: float = float("nan")


class ValueState(Enum):
    """What the outputs no flip reached show against float64."""

    UNPROVEN = "unproven"  # no float64 reference
    FAILING = "failing"  # within the noise bound, yet the export test's rule fails on some seed
    CLEAN = "clean"


@dataclass(frozen=True)
class Values:
    state: ValueState
    checked: int  # seeds
    worst: float = 0.0  # ORT's largest error from float64, as a fraction of the noise bound
    reference_note: str = ""  # why there is no float64 reference (UNPROVEN)


@dataclass(frozen=True)
class Flips:
    """The flips of an exact-tie or near-tie class."""

    seeds: int  # flipped seeds
    checked: int
    op_types: tuple[str, ...]
    exact: bool  # every flipped margin 0 ulps
    largest_ulps: float
    reach_ulps: float
    tied_seeds: tuple[int, ...]  # flipped seeds whose every flip sat on an exact tie


class Undecided(Enum):
    """Why a class without a defect, draw or flip is undecided."""

    STRAY_FLIP = "an op left out as unable to flip flipped"
    NO_REFERENCE = "no float64 reference"
    TOO_FEW_SEEDS = "the seeds do not bound the rate"


class Refuted(Enum):
    """Why a skip's stated reason does not hold."""

    NO_RANDOM_OP = "no random op"  # a random draw claimed; the graph has none
    DEFECT_NOT_TIE = "a defect, not a tie"  # a tie claimed; what ORT computes is a defect
    WITHIN_TOLERANCE = "noise within the tolerance"  # noise over the tolerance claimed; the test passes every seed
    OTHER_CAUSE = "another cause"


@dataclass(frozen=True)
class Evidence:
    """Every number a verdict's proof and action state (fields a cause does not use keep their defaults)."""

    defect: Defect | None = None
    passing: int = 0  # a defect's checked seeds on which the export test's rule passes all the same
    draws: tuple[str, ...] = ()  # random ops on an output path
    draw_scopes: tuple[str, ...] = ()
    flips: Flips | None = None
    values: Values | None = None
    undecided: Undecided | None = None
    counted: int = 0  # discrete ops that can flip and reach an output
    total: int = 0  # seeds the rate is over
    checked: int = 0
    failing: int = 0  # checked seeds the export test's rule fails
    size_in: int = 0  # seeds within reach of a tie
    unchecked: int = 0  # of them, left unchecked
    beyond: int = 0  # checked seeds beyond reach
    bound: float = float("nan")  # the flip rate's one-sided 95% upper bound
    rate_asked: float = float("nan")
    seeds_needed: int = 0
    skipped: bool = False  # the export test skips the class (it has a skip to remove)
    never_called: str = ""  # the module holding the class's discrete op, which its forward never calls
    never_called_op: str = ""  # that op (`argmax`)
    quoted_skip: tuple[str, str] = ()  # an investigation's own reason for skipping the class: (where, its words)
    remedy: Remedy | None = None  # what a defect's localization asks for (`localize`)
    # a tie-aware comparison measured on the class: True where it passed every check and caught every required
    # planted defect, False where it missed one, None where no study measured it (then it is not offered)
    tie_aware: bool | None = None
    where: Localization | None = None  # where a defect starts (`places`), as the localizer measured it
