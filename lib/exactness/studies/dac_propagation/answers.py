"""The DAC propagation report's answer table: per init and fold, whether folding weight norm gives the
recomputed weights exactly, how far the encoder output moves, and whether the codes survive. Read from the
weights, propagation and codes tables."""

from __future__ import annotations

import pandas as pd

from exactness.studies.dac_propagation.precision import AGREE_FACTOR, patterns
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


INVESTIGATION_VARIANT = "44khz"  # the investigation measured the 44.1 kHz model; a GPU run's chain is that model too


def precision_answers(chain: pd.DataFrame, variant: str = INVESTIGATION_VARIANT) -> list:
    """Per init: does a precision reproduce the investigation's growth (its first convolution at float32 size, its
    first block at the investigation's), with the numbers that show it. A line per init that ran a chain; only
    chains of the investigation's model (this run's when `variant` is it, a GPU run's always) are set against it."""
    comparable = chain if variant == INVESTIGATION_VARIANT else chain[chain.side.str.endswith("(GPU run)")]
    found = []
    if not len(comparable) and len(chain):
        return [Answer(f"{init}, the investigation's growth", "not comparable",
                       f"run the {INVESTIGATION_VARIANT} model (-p variant {INVESTIGATION_VARIANT}) to set the chain "
                       "against the investigation's", "", f"this run's model is {variant}, the investigation's "
                       f"{INVESTIGATION_VARIANT}") for init in chain.init.unique()]
    for init, part in comparable.groupby("init", sort=False):
        pats = patterns(part)
        yes = [p for p in pats if p.reproduces]
        fp32 = [p for p in pats if "fp32" in p.side]
        numbers = "; ".join(f"{p.side}: Conv1 {significant(p.first)}, Block0 {significant(p.jump)}" for p in pats)
        ref = f"the investigation's Conv1 {significant(pats[0].first_ref)}, Block0 {significant(pats[0].jump_ref)}"
        rate = "; ".join(f"{p.side}: Block0 {significant(p.jump)}" for p in yes) or "no precision reproduces it"
        if yes and fp32 and not any(p.reproduces for p in fp32):
            found.append(Answer(
                f"{init}, the investigation's growth", "TF32 rounding",
                "the fold is not at fault: run the reference with TF32 off (torch.backends.cudnn.allow_tf32 = False) "
                "to compare near float32 rounding, or allow TF32's size at the encoder output", rate,
                f"{', '.join(p.side for p in yes)} reproduce{'s' if len(yes) == 1 else ''} {ref} within "
                f"{AGREE_FACTOR:g}x, float32 does not ({numbers})"))
        else:
            found.append(Answer(f"{init}, the investigation's growth", "not reproduced",
                                "with this init no precision here grows the difference as the investigation saw; "
                                "judge by an init (or a real checkpoint: -p checkpoint) whose activations carry it",
                                rate,
                                f"{ref}; {numbers}"))
    return found
