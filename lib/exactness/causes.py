"""The causes a comparison of two sides can prove, one vocabulary for every study that judges a class.

A study names a cause only with its proof (what each proof is: ARCHITECTURE.md, "How a discrete-ops verdict
proves itself"); the words each cause prints as are these values, explained once in
`exactness.workbook.answers.MEANINGS`.
"""

from __future__ import annotations

from enum import Enum

from exactness import published


class Cause(Enum):
    DEFECT = "defect"
    RANDOM_DRAW = "random draw"
    EXACT_TIE = "exact tie"
    NEAR_TIE = "near-tie"
    FLOAT_NOISE = "float noise"
    NOTHING_REACHES = "nothing reaches"  # no discrete op that can flip reaches an output (or none runs at all)
    NEVER_FLIPS = "never flips"
    # two eager sides in different precisions, every seed compared (`engine.pairs.pair_cause`)
    PRECISION_NOISE = "precision noise"  # failures with every choice the same: the precision's rounding
    TIE_AND_NOISE = "near-tie and noise"  # some failures flipped a near-tie, others are rounding
    NEVER_FAILS = "never fails here"  # no failure in the seeds run (a count, not a bound)
    UNDECIDED = "undecided"
    NO_EXPORT = "not run"  # the class did not build or did not export


class Stage(Enum):
    """The stage of the export-and-run pipeline that makes a defect (`studies.discrete_ops.stages.locate`)."""

    TRANSLATION = "the exporter's translation (torch.onnx)"  # onnx's reference evaluator shows it too
    ORT_KERNELS = "ONNX Runtime's kernels"  # the same unoptimized graph is right in onnx's reference evaluator
    UNSEPARATED = "the exporter's translation or ONNX Runtime's kernels"  # the reference evaluator could not run it
    EXPORT_OPTIMIZER = "the exporter's optimizer (onnxscript)"
    ORT_OPTIMIZER = "ONNX Runtime's graph optimizations"
    MODEL = "the model itself: eager float32 breaks too, before any export"
    NOT_SHOWN = "no stage: the symptom does not show in the full pipeline on this seed"


# The cause a skip reason's labelled claim names (exactness.published), by measured cause.
CLAIMED = {Cause.EXACT_TIE: published.EXACT_TIE, Cause.NEAR_TIE: published.NEAR_TIE,
           Cause.RANDOM_DRAW: published.RANDOM_DRAW, Cause.FLOAT_NOISE: published.FLOAT_NOISE}
