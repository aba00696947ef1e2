"""The near-tie report's answer table: per class, the engine's verdict (`engine.verdicts`) on the quantizer's
screen and checks (`engine_tables`), worded as every study words one (`engine.answers`). A class answers the same
here and in the discrete-ops report; only the seeds behind it differ. Read from the run's tables (the first
shape mode, as the rates table), never from the sentences."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pandas as pd

from exactness.engine import answers as engine_answers
from exactness.engine.answers import pair_answer
from exactness.runtimes.sides import Pair
from exactness.studies.near_tie import engine_tables
from exactness.studies.near_tie.precision import PairSummary
from exactness.workbook import wording
from exactness.workbook.answers import Answer, Columns

COLUMNS = Columns(rate="export test fails", flips="a code row flips")


def answers(screen: pd.DataFrame, checks: pd.DataFrame, outputs: pd.DataFrame, margins: pd.DataFrame,
            threshold: float, immune: list[str] = (), threshold_ulps: float = 0.0,
            shape_mode: str = "", defects: pd.DataFrame | None = None) -> list[Answer]:
    """One line per class screened, then one per class that never calls its quantizer."""
    found = engine_tables.class_verdicts(screen, checks, outputs, margins, threshold, immune, threshold_ulps,
                                         shape_mode=shape_mode, defects=defects)
    return [engine_answers.answer(v, v.model) for v in found]


def with_pairs(ort_answers: list[Answer], pairs: Sequence[PairSummary], gpu_pairs: Sequence[PairSummary],
               gpu=None, tie_aware: frozenset[str] = frozenset()) -> list[Answer]:
    """The answer table: each class's line against ORT named by the class alone (as in discrete_ops, so the index
    finds it), then a line per class and pair, named with the pair's sides. `tie_aware`: the classes on which a
    tie-aware comparison was measured to keep value checks."""
    if not pairs and not gpu_pairs:
        return ort_answers
    found = list(ort_answers)
    ort_rate = {a.subject: a.rate for a in ort_answers}
    fp32_gpu = {s.model: wording.rate(s.failures.events, s.failures.seeds) for s in gpu_pairs
                if Pair.parse(s.pair).other.spec == "eager:cuda:fp32"}
    found += [pair_answer(s.evidence, ort_rate.get(s.model, ""), s.model in tie_aware) for s in pairs]
    where = f" (GPU run: {gpu.facts.get('gpu', 'no GPU')})" if gpu is not None else ""
    for s in gpu_pairs:
        if not Pair.parse(s.pair).needs_cuda:  # the GPU machine's own emulation: in the agreement table
            continue
        line = pair_answer(s.evidence, fp32_gpu.get(s.model, ""), s.model in tie_aware)
        found.append(replace(line, subject=line.subject + where))
    return found
