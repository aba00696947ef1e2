"""The discrete-ops report's answer table: one line per class (and shape mode where the run has more than
one), the engine's verdict worded as every study words one (`engine.answers`)."""

from __future__ import annotations

from exactness.engine import answers as engine_answers
from exactness.engine import verdicts as v
from exactness.models.names import ClassTask
from exactness.studies.discrete_ops.study import Result
from exactness.workbook.answers import Answer


def subject(verdict: v.ClassVerdict, verdicts: list[v.ClassVerdict]) -> str:
    """How a verdict's line names what it answers for: its class, and its shape mode where the run has more."""
    if len({other.shape_mode for other in verdicts}) > 1:
        return ClassTask(verdict.model, verdict.shape_mode).label
    return verdict.model


def answers(result: Result) -> list[Answer]:
    return [engine_answers.answer(verdict, subject(verdict, result.verdicts)) for verdict in result.verdicts]
