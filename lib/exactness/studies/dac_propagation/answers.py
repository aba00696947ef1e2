"""The DAC propagation report's answer table: per init and fold, whether folding weight norm gives the
recomputed weights exactly, how far the encoder output moves, and whether the codes survive. Read from the
weights, propagation and codes tables."""

from __future__ import annotations

import pandas as pd

from exactness.studies.dac_propagation.study import ENCODER_OUTPUT
from exactness.workbook.answers import Answer, Columns
from exactness.workbook.findings import significant

COLUMNS = Columns(subject="init, fold", rate="encoder output against weight norm; code frames changed")
FOLDS = {"folded_fp32": "folded in float32", "folded_fp64": "folded in float64"}


def _one(init: str, fold: str, weights: pd.DataFrame, propagated: pd.DataFrame, codes: pd.DataFrame,
         margins: pd.DataFrame) -> Answer:
    weight = float(weights[(weights.init == init) & (weights.variant == fold)].max_abs_diff.max())
    mine = propagated[(propagated.init == init) & (propagated.variant == fold) & (propagated.against == "weight_norm")]
    anywhere = float(mine.max_abs_err.max()) if len(mine) else 0.0
    encoder = mine[mine.layer == ENCODER_OUTPUT].max_abs_err
    encoder = float(encoder.max()) if len(encoder) else anywhere
    changed = codes[(codes.init == init) & (codes.variant == fold)].fraction_differing
    changed = float(changed.max()) if len(changed) else 0.0
    margin = margins[margins.init == init].min_margin
    margin_words = f"; smallest winning margin {significant(float(margin.min()))}" if len(margin) else ""
    rate = f"{significant(encoder)}; {significant(100 * changed)}% of code frames"
    if weight == 0 and anywhere == 0:
        return Answer(f"{init}, {FOLDS[fold]}", "exact", "nothing to allow for: the folded model computes what "
                      "weight norm recomputes, bit for bit", rate, "the same call (torch._weight_norm) on the same "
                      "(g, v), so identical weights (checked) and the weight-norm run's outputs (run once, not "
                      f"measured twice){margin_words}")
    proof = f"weights up to {significant(weight)} from the recomputed ones, layer outputs up to {significant(anywhere)}"
    if changed > 0:
        return Answer(f"{init}, {FOLDS[fold]}", "codes flip", "compare the codes tie-aware: a frame whose winning "
                      "margin is below the error reaching it flips", rate, proof + margin_words)
    return Answer(f"{init}, {FOLDS[fold]}", "within rounding", f"compare the codes exactly and the encoder output "
                  f"at a tolerance above {significant(encoder)}", rate,
                  proof + "; every code the same" + margin_words)


def answers(weights: pd.DataFrame, propagated: pd.DataFrame, codes: pd.DataFrame, margins: pd.DataFrame,
            inits) -> list[Answer]:
    return [_one(init, fold, weights, propagated, codes, margins) for init in inits for fold in FOLDS
            if ((weights.init == init) & (weights.variant == fold)).any()]
