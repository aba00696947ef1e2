"""The discrete-ops study's typed rows: one dataclass per table, every column named once.

Tables are DataFrames of these rows (`frame`), so a column is what its dataclass field says it is, and a
count is computed from the field, never from a sentence.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

import pandas as pd

from exactness.models.names import ClassTask  # noqa: F401 (the discrete-ops rows name their task by it)


@dataclass
class GraphRow:
    model: str
    shape_mode: str
    exports: int = 0  # fresh exports run (cache misses)
    cached_exports: int = 0  # exports read from the cache
    export_seconds: float = 0.0  # what this run's fresh exports took
    swap: str = ""  # whether the weight swap was learnt, and on what
    rebuild: str = ""  # how each seed's model is built: "rebuilt in place" or why it is built plainly
    screen: str = ""  # how many seeds the eager screen ran, or why it did not
    discrete_ops: int = 0
    outputs: int = 0
    exposure_ok: bool = False
    error: str = ""  # the exporter's error when the class did not export


@dataclass
class OpRow:
    """One discrete op of a class's graph, with the outputs it reaches and whether it counts."""

    model: str
    shape_mode: str
    node: str
    op_type: str
    category: str
    scope: str
    aten: str
    consumers: list[str]
    reaches_outputs: list[str]
    on_output_path: bool
    weight_dependent: bool
    can_flip: bool
    not_counted: str  # why the op cannot flip on its own ("" when it counts)


@dataclass
class ScreenRow:
    """One seed's eager margins at one counted op (the screen, and every check's eager side)."""

    model: str
    shape_mode: str
    seed: int
    node: str
    decisions: int
    min_margin: float
    min_margin_ulps: float
    exact_ties: int
    reads_nonfinite: int  # decisions whose values are not all finite in eager
    recorder: str = "dispatch"  # speedup_paths.ScreenRecorder: how eager's calls were recorded


@dataclass
class MarginRow:
    """One checked seed at one discrete op: eager's and ORT's margins, whether ORT chose differently, and
    what the two sides read at the decisions that flipped."""

    model: str
    shape_mode: str
    seed: int
    node: str
    op_type: str
    category: str
    matched_by: str
    decisions: int = 0
    min_margin: float = float("nan")  # eager's, where an eager call matched; else ORT's
    min_margin_ulps: float = float("nan")
    exact_ties: int = 0
    ort_min_margin: float = float("nan")
    ort_min_margin_ulps: float = float("nan")
    ort_exact_ties: int = 0
    match_verified: bool = False  # what both sides read agrees to the test's tolerance
    match_trusted: bool = False  # verified, or found by the exporter's own name for the call with reads of one size
    read_max_diff: float = float("nan")
    read_noise_ulps: float = float("nan")  # largest eager-ORT difference of what a decision weighs, in its ulps
    reads_nonfinite_eager: int = 0  # decisions whose values are not all finite
    reads_nonfinite_ort: int = 0
    reads_nonfinite_ort_only: int = 0  # decisions non-finite in ORT whose eager values are finite: the export's
    flipped: float = float("nan")  # decisions ORT made differently (NaN: not compared)
    flipped_margin_ulps: float = float("nan")  # eager's smallest margin among the flipped decisions
    flipped_nonfinite: int = 0  # flipped decisions whose values are not all finite on one side or both
    flipped_nan_eager: int = 0  # flipped decisions whose row eager itself reads a NaN in: the model's


@dataclass
class OutputRow:
    """One checked seed at one output: eager against ORT, both against the float64 reference, and (after a
    flip) eager with ORT's choices forced against ORT."""

    model: str
    shape_mode: str
    seed: int
    output: str
    floating: bool
    same_shape: bool
    same_dtype: bool = True
    numel: int = 0
    zero_dim: bool = False  # a 0-d tensor: torch's message for it has no "Mismatched elements", so no allowance
    rule_mismatched: int = 0  # elements `torch.testing.assert_close` counts as not close (NaN against NaN too)
    max_abs_diff: float = float("nan")
    max_ulps_of_scale: float = float("nan")
    mismatched: int = 0  # elements beyond atol + rtol * |eager|
    nonfinite_mismatch: int = 0  # elements finite on one side only, or NaN on one side and inf on the other
    # of them, those where eager is not NaN: the export's (an infinity eager makes can be the model's meaning, a max
    # over a masked window, which ORT must keep)
    nonfinite_by_export: int = 0
    nan_in_eager: int = 0  # elements NaN in eager itself: the model's, each not close under the rule (not even to NaN)
    eager_f64_err: float = float("nan")  # max |eager - float64 reference|
    ort_f64_err: float = float("nan")  # max |ORT - float64 reference|
    scale_ulp: float = float("nan")  # one float32 ulp at the reference's RMS
    noise_bound: float = float("nan")  # NOISE_FACTOR x max(eager's error, scale_ulp)
    within_noise: bool | None = None  # ORT within the bound of the reference (None: no reference, or a flip)
    reached_by_flip: bool = False  # a discrete op that flipped on this seed reaches this output
    reached_by_draw: bool = False  # a random op reaches it: the runtimes draw different numbers
    forced_max_abs_diff: float = float("nan")
    forced_mismatched: int = 0
    explained_by_flip: bool | None = None  # forced eager within the bound of ORT (None: nothing flipped)
    # elements the export test's rule counts as not close with a defect planted in ORT's values (`outputs.PLANTS`);
    # -1 where none is planted (an integer output, another shape)
    planted_few_1x: int = -1
    planted_few_10x: int = -1
    planted_few_100x: int = -1
    planted_nan: int = -1
    planted_shift: int = -1


@dataclass
class SeedRow:
    model: str
    shape_mode: str
    seed: int
    phase: str  # "calibration" or "candidates"
    graph: str  # "template", "swapped weights" or "fresh export"
    flipped: bool  # a counted op chose differently
    stray_flip: bool  # an op left out as unable to flip on its own flipped while no counted op did
    test_rule_passed: bool
    first_mismatch: str  # where the export test's rule stopped ("" when it compared everything)
    rule_forgiven: bool
    never_compared: str  # outputs the rule never looked at, comma-separated
    reference: str  # "float64, eager's choices forced", or why there is no float64 reference
    seconds: float


def frame(rows: list, kind: type) -> pd.DataFrame:
    """The table of `rows` (dataclass instances or their dicts), with `kind`'s columns even when empty."""
    columns = [f.name for f in fields(kind)]
    records = [asdict(r) if not isinstance(r, dict) else r for r in rows]
    return pd.DataFrame(records, columns=columns) if records else pd.DataFrame(columns=columns)
