"""The DAC batching answer lines: what the padding changes of the shorter clip and what the batch size alone
changes, from the batching table, the code curves and the repair."""

import numpy as np
import pandas as pd

from exactness.studies.dac_batching import answers


def _table(pad_tail=12, audio_tail=244, size_latent=9.5e-7, padded_by=1600):
    rows = []
    for stage, length, tail in (("latent", 300, pad_tail), ("codes", 300, pad_tail), ("audio", 2400, audio_tail)):
        rows.append({"clip": 1, "stage": stage, "cause": "padding", "length": length, "padded_by": padded_by,
                     "first_diff_from_end": tail, "max_diff_before": 2e-7, "max_diff_in_tail": 6.3})
        rows.append({"clip": 1, "stage": stage, "cause": "batch size", "length": length, "padded_by": padded_by,
                     "first_diff_from_end": 0, "max_diff_before": size_latent if stage != "codes" else 0.0,
                     "max_diff_in_tail": 0.0})
    return pd.DataFrame(rows)


def _curves(pad_codes=10, size_codes=0):
    codes = np.zeros(300)
    codes[-pad_codes:] = 1 if pad_codes else 0
    size = np.zeros(300)
    size[:size_codes] = 1
    return {(1, "codes", "padding"): codes, (1, "codes", "batch size"): size}


def test_padding_is_the_cause_with_its_tail_and_the_repair_is_the_action():
    repaired = {"tail_frames": 19, "code_frames_after": 0}
    pad, size = answers.answers(_table(), _curves(), 1, 18, repaired)
    assert pad.cause == "padding" and pad.verified
    assert pad.rate == "last 12 of 300 latent frames, 10 code frames, last 244 audio samples"
    assert "recompute the last 19 frames" in pad.action and "then 0 code frames differ" in pad.action
    assert "last 18" in pad.proof
    assert size.cause == "within rounding" and "9.5e-07" in size.rate and "0 code frames" in size.rate


def test_a_tail_beyond_the_receptive_field_is_undecided_not_padding():
    pad, _ = answers.answers(_table(pad_tail=30), _curves(), 1, 18)
    assert pad.cause == "undecided" and "30 from the end, beyond the last 18" in pad.proof
    # above the floor within the field, below it beyond: padding, and the proof says which frames lie within
    rounded, _ = answers.answers(_table().assign(any_diff_from_end=40), _curves(), 1, 18)
    assert rounded.cause == "padding" and rounded.proof.startswith("the frames above the rounding floor lie within")
    assert answers.answers(_table(), _curves(), 1, 18)[0].proof.startswith("the changed frames lie within")


def test_a_batch_that_flips_codes_and_equal_lengths_are_told_apart():
    _, size = answers.answers(_table(), _curves(size_codes=1), 1, 18)
    assert size.cause == "codes flip" and "1 code frame" in size.rate
    pad, _ = answers.answers(_table(padded_by=0, pad_tail=0, audio_tail=0), _curves(pad_codes=0), 1, 18)
    assert pad.cause == "exact"
