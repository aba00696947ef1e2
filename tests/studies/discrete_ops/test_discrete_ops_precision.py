"""A class under another runner's precision: flips and failures seed by seed, noise told from a defect."""

from __future__ import annotations

import pandas as pd
import pytest

from exactness.causes import Cause
from exactness.engine.verdicts import PAIR_NOISE_FACTOR
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
    line = precision.answer(found)
    assert "eager CPU TF32 (emulated)" in line.subject and "use_tf32=0" in line.action


def test_a_class_whose_outputs_move_beyond_the_noise_is_a_defect_not_noise():
    found = precision.ClassUnderPair("X", TF32.spec, 10, 0, 3, 3, reference_error_units=20.0,
                                     other_error_units=20.0 * PAIR_NOISE_FACTOR + 1, error="")
    assert found.cause is Cause.DEFECT
    assert precision.ClassUnderPair("X", TF32.spec, 10, 0, 3, 3, 20.0, 3.0, "").cause is Cause.PRECISION_NOISE
    assert precision.ClassUnderPair("X", TF32.spec, 10, 0, 0, 0, 20.0, 3.0, "").cause is Cause.NEVER_FAILS


def test_a_class_that_cannot_run_says_why_in_its_line():
    table = pd.DataFrame([{"model": "X", "pair": TF32.spec, "seed": 0, "error": "RuntimeError: boom"}],
                         columns=precision.COLUMNS)
    (found,) = precision.summarize(table)
    assert found.cause is Cause.NO_EXPORT and precision.answer(found).proof == "RuntimeError: boom"
