"""Where a defect starts, as numbers: the first module (and ONNX node) where one side leaves the float64 reference,
what shows it there, and the pipeline stage whose removal removes it. Measured by `discrete_ops.localize` and
`discrete_ops.stages`; put into words by `place_words` only, so a rewording moves no number.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from exactness.causes import Stage
from exactness.runtimes import onnx_graph

REFERENCE = "onnx's reference evaluator"  # the runtime a configuration names instead of ORT's provider


@dataclass(frozen=True)
class Remedy:
    """What a defect's localization asks for: the pipeline stage that makes it and what the run measured of it."""

    stage: Stage
    pass_name: str = ""  # the exporter's rule or ORT's pass whose removal alone removes it ("" when none alone does)
    level: str = ""  # ORT's lowest graph optimization level that shows it (ORT's stage)
    below: str = ""  # the level below it, which does not
    provider: str = ""  # the execution provider whose kernels ran the graph
    reproduces: bool | None = None  # whether the plain reproduction showed the pass here (None: none written)


@dataclass(frozen=True)
class Config:
    """One configuration of the export-and-run pipeline."""

    export: onnx_graph.ExportOptions = onnx_graph.DEFAULT_EXPORT
    level: str = "all"
    disabled: tuple[str, ...] = ()  # ONNX Runtime's `disabled_optimizers`
    runtime: str = onnx_graph.PROVIDER  # or REFERENCE: onnx's own evaluator, a second implementation of the graph


@dataclass(frozen=True)
class Symptom:
    error: float  # the largest error from float64 over the outputs (finite elements)
    over: float  # the largest error over its output's noise bound
    nonfinite: int  # values ORT makes non-finite where the float64 reference is finite
    output: str  # the output with the largest error over its bound
    errors: tuple[tuple[str, float, float], ...] = ()  # every output's (name, error, error over its bound)

    @property
    def present(self) -> bool:
        return self.nonfinite > 0 or self.over > 1

    def at(self, output: str) -> Symptom:
        """The same measurement read at `output` (to set with and without a pass side by side)."""
        for name, error, over in self.errors:
            if name == output:
                return Symptom(error, over, self.nonfinite, name, self.errors)
        return self


@dataclass(frozen=True)
class Trial:
    config: Config
    symptom: Symptom


@dataclass(frozen=True)
class Reproduction:
    """A few lines of plain torch/ONNX code that show the named pass on its own, and what running them gave: each
    side's values non-finite where eager's are finite and its largest difference from eager on the rest."""

    code: str
    reproduces: bool
    size: int = 0  # eager's values
    with_bad: int = 0
    with_difference: float = 0.0
    without_bad: int = 0
    without_difference: float = 0.0
    printed: str = ""  # the lines the code printed about each side
    error: str = ""  # the code's own error, where running it failed


@dataclass
class StageProof:
    stage: Stage
    pass_name: str = ""  # the rule or pass whose removal alone removes the symptom ("" when none alone does)
    with_pass: Symptom | None = None  # the full pipeline
    without_pass: Symptom | None = None  # the same without the named rule or pass (or the stage)
    without: Config | None = None
    trials: list[Trial] = field(default_factory=list)
    candidates: int = 0  # rules or passes bisected
    provider: str = onnx_graph.PROVIDER
    reproduction: Reproduction | None = None
    reference: Symptom | None = None  # the unoptimized graph in onnx's reference evaluator
    reference_error: str = ""  # the evaluator's own error, where it could not run the graph
    level: str = ""  # ORT's lowest optimization level that shows it (ORT's stage only)

    @property
    def exports(self) -> int:
        return len({t.config.export for t in self.trials})

    @property
    def without_at_output(self) -> Symptom | None:
        """The measurement without the pass, read at the output the full pipeline errs most on."""
        if self.without_pass is None:
            return None
        return self.without_pass.at(self.with_pass.output) if self.with_pass is not None else self.without_pass

    @property
    def remedy(self) -> Remedy:
        """What the stage asks for, as the engine's evidence holds it (`place_words.remedy` words it)."""
        return Remedy(self.stage, self.pass_name, self.level, onnx_graph.LEVEL_BELOW.get(self.level, ""),
                      self.provider, self.reproduction.reproduces if self.reproduction is not None else None)


@dataclass(frozen=True)
class MissingInput:
    """A node whose traced call (its metadata) reads a value the graph no longer computes."""

    node: str
    op_type: str
    op: str  # the traced call's aten op (`div`)
    args: tuple[str, ...]  # the values it read, by the exporter's names (`view_39`, `add_34`)
    missing: str  # the value it names that the graph does not compute
    reads: str  # what the node reads in its place ("" where arguments and inputs differ in number)
    was_op: str = ""  # how the unoptimized graph computes the missing value, where known: its node's op (`Add`)
    was_args: tuple[str | float, ...] = ()  # and its inputs, a scalar constant as its value (`sum_12`, 1e-10)


@dataclass(frozen=True)
class ValueRange:
    """A node input's finite range: what a value made non-finite was computed from."""

    dtype: str
    shape: tuple[int, ...]
    low: float  # NaN where no value is finite
    high: float
    zeros: int


@dataclass(frozen=True)
class NodeMade:
    """The first node that makes a non-finite value (a NaN, with `nan`) from inputs that hold none."""

    count: int  # of its output's values, non-finite
    size: int
    nan: bool
    reads: tuple[ValueRange | None, ...]  # its inputs' ranges (None: an empty input)


@dataclass(frozen=True)
class NonFiniteOutput:
    """ORT's module output holds non-finite values where eager's are finite."""

    count: int
    size: int


@dataclass(frozen=True)
class BeyondRounding:
    """ORT's module output errs from float64 by more than the noise bound (its errors: the localization's)."""

    times: float  # ORT's error over eager's (at least one ulp of the output's scale)


@dataclass(frozen=True)
class Rewritten:
    """Every module's output agrees with float64, the bare graph does not: ORT rewrites across modules."""

    level: str  # ORT's lowest optimization level that shows it
    output: str
    errors: tuple[tuple[str, float], ...]  # the output's error from float64 at each level
    bound: float


@dataclass(frozen=True)
class NanInEager:
    """Eager float32's own module output holds a NaN."""

    count: int
    size: int
    float64_nans: int | None  # the float64 reference's NaNs there (None: no reference of that shape)


Departure = NonFiniteOutput | BeyondRounding | Rewritten | NanInEager


class Kind(Enum):
    """How the departure shows where it starts."""

    NON_FINITE = "non-finite"  # ORT makes a non-finite value (at a module, or at a node outside every module)
    BEYOND_ROUNDING = "beyond rounding"  # ORT errs from float64 beyond the noise bound (or nothing departs)
    OPTIMIZATION = "optimization"  # an ORT rewrite across modules
    NAN_IN_EAGER = "NaN in eager"  # eager float32 itself makes a NaN
    NOT_LOCALIZED = "not localized"  # the localizer itself failed


@dataclass
class Localization:
    """Where a defect starts on one seed, and the stage that makes it (`place_words` says it)."""

    model: str
    shape_mode: str
    seed: int
    module: str  # the first module where a side departs ("" when none departs: not localized)
    kind: Kind
    node: str = ""  # the ONNX node that first makes the non-finite value
    op_type: str = ""
    shows: Departure | None = None  # what shows the departure at the module
    made: NodeMade | None = None  # what the node makes, from what
    eager_err: float = float("nan")  # at that module: max |eager - float64|
    ort_err: float = float("nan")  # max |ORT - float64| (finite elements)
    bound: float = float("nan")  # NOISE_FACTOR x max(eager's error, one ulp of the output's scale)
    missing: MissingInput | None = None  # the value the node's traced call reads that the graph no longer computes
    proof: StageProof | None = None  # the stage that makes it (None: no stage was switched)
    no_reference: bool = False  # no stage switched: no float64 reference to measure each configuration against
    switch_error: str = ""  # no stage switched: switching the pipeline failed with this error
    failed: str = ""  # the localizer's own error, where it could not localize at all

    @property
    def stage(self) -> str:
        """The stage's `causes.Stage` value, "" when none was shown."""
        return self.proof.stage.value if self.proof is not None and self.proof.stage is not Stage.NOT_SHOWN else ""

    @property
    def pass_name(self) -> str:
        return self.proof.pass_name if self.proof is not None else ""

    @property
    def remedy(self) -> Remedy | None:
        return self.proof.remedy if self.proof is not None else None

    @property
    def error_with(self) -> float:
        return self.proof.with_pass.error if self.proof is not None and self.proof.with_pass else float("nan")

    @property
    def error_without(self) -> float:
        without = self.proof.without_at_output if self.proof is not None else None
        return without.error if without is not None else float("nan")
