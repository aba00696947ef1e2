"""A class under another runner's precision: flips and failures seed by seed, noise told from a defect."""

from __future__ import annotations

import pandas as pd
import pytest

from exactness.causes import Cause
from exactness.engine.answers import pair_answer
from exactness.engine.pairs import PAIR_NOISE_FACTOR, PairEvidence
from exactness.runtimes.sides import Pair
from exactness.studies.discrete_ops import precision

TF32 = Pair.parse("eager:cpu:fp32 vs eager:cpu:tf32")


@pytest.mark.slow
def test_tf32_flips_unispeechs_quantizer_and_the_failures_are_its_flips():
    table = precision.compare_pairs(["UniSpeechForPreTraining"], [TF32], 0, 6, progress_every=1e9)
    (found,) = precision.summarize(table)
    assert found.seeds == 6 and found.failed >= 2 and found.failed_without_flip == 0
    assert set(table[table.flipped_choices > 0].first_flip) == {"aten.argmax #0"}
    assert found.noise and found.cause is Cause.NEAR_TIE  # each side near float64 with its own choices forced
    line = pair_answer(found)
    assert "eager CPU TF32 (emulated)" in line.subject and "use_tf32=0" in line.action


def test_a_class_whose_outputs_move_beyond_the_noise_is_a_defect_not_noise():
    found = PairEvidence("X", TF32.spec, 10, 0, 3, 3, reference_error_units=20.0,
                                     other_error_units=20.0 * PAIR_NOISE_FACTOR + 1, error="")
    assert found.cause is Cause.DEFECT
    assert PairEvidence("X", TF32.spec, 10, 0, 3, 3, 20.0, 3.0, "").cause is Cause.PRECISION_NOISE
    assert PairEvidence("X", TF32.spec, 10, 0, 0, 0, 20.0, 3.0, "").cause is Cause.NEVER_FAILS


def test_a_class_that_cannot_run_says_why_in_its_line():
    table = pd.DataFrame([{"model": "X", "pair": TF32.spec, "seed": 0, "error": "RuntimeError: boom"}],
                         columns=precision.COLUMNS)
    (found,) = precision.summarize(table)
    assert found.cause is Cause.NO_EXPORT and pair_answer(found).proof == "RuntimeError: boom"


def test_one_wording_for_both_studies_pairs_and_nothing_recommended_where_nothing_fails():
    never = PairEvidence("X", TF32.spec, 10, 2, 0, 0, 20.0, 3.0)
    assert never.cause is Cause.NEVER_FAILS
    line = pair_answer(never)
    assert line.action.startswith("nothing to change") and "2 seeds of 10, none failing" in line.proof
    assert line.rate.startswith("none in 10 seeds") and line.flips.endswith("2 of 10 seeds)")
    # near_tie's pairs also measure how far the choice's inputs differ: said where measured, never invented
    near = PairEvidence("X", TF32.spec, 10, 3, 3, 0, 20.0, 3.0, input_noise_median=1e-4, input_noise_max=2e-3)
    assert "differ by a median of 1.0e-04, at most 0.0020" in pair_answer(near).proof
    assert "differ by" not in pair_answer(PairEvidence("X", TF32.spec, 10, 3, 3, 0, 20.0, 3.0)).proof
    assert "or compare tie-aware" in pair_answer(near, tie_aware=True).action
    undecided = PairEvidence("X", TF32.spec, 10, 3, 3, 0, float("nan"), float("nan"))
    assert undecided.cause is Cause.UNDECIDED and "calibration" in pair_answer(undecided).action


def test_a_pairs_action_fits_what_its_failures_show():
    devices = Pair.parse("eager:cpu:fp32 vs eager:cuda:fp32").spec
    noise_only = pair_answer(PairEvidence("X", devices, 10, 0, 3, 3, 20.0, 3.0))
    assert noise_only.cause == Cause.PRECISION_NOISE.value and "no choice to excuse" in noise_only.action
    both = PairEvidence("X", TF32.spec, 10, 4, 4, 1, 20.0, 3.0)
    assert both.cause is Cause.TIE_AND_NOISE
    assert "use_tf32=0" in pair_answer(both).action and "would leave 1 of 4 failures" in pair_answer(both).action
    near_tie_side = PairEvidence("X", TF32.spec, 10, 3, 3, 0, 20.0, 3.0, measured_on="the quantizer's logits")
    assert "(the quantizer's logits)" in pair_answer(near_tie_side).proof


def test_the_pair_rates_table_gives_each_pairs_counts_cause_and_rate_in_the_one_shape():
    from exactness.studies.discrete_ops import sentences
    from exactness.workbook import wording

    table = pd.DataFrame([{"model": "Y", "pair": TF32.spec, "seed": 0, "error": "RuntimeError: boom"}],
                         columns=precision.COLUMNS)
    found = [PairEvidence("X", TF32.spec, 10, 2, 3, 1, 20.0, 3.0, ""), *precision.summarize(table)]
    shown = sentences.pair_rates(found)
    assert list(shown.columns) == ["model", "sides", "seeds", "flipped", "failed", "failed_without_flip", "cause",
                                   "rate"]
    assert shown.sides.tolist() == [TF32.label] * 2 and shown.seeds.tolist() == [10, 0]
    assert shown.cause.tolist() == [found[0].cause.value, Cause.NO_EXPORT.value]
    assert shown.rate.tolist() == [wording.rate(3, 10), ""]  # no seed ran: no rate to state
