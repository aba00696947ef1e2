import pandas as pd
import torch

from exactness.studies.dac_batching import findings as found
from exactness.studies.dac_batching import sentences as batching_sentences
from exactness.studies.dac_batching import study as batching


def _table(lengths):
    rows = []
    for clip, length in enumerate(lengths):
        for stage, n in (("latent", length // 8), ("codes", length // 8), ("audio", length)):
            for cause in ("padding", "batch size"):
                rows.append({"clip": clip, "stage": stage, "cause": cause, "length": n, "unit": "x",
                             "first_diff_from_end": 0, "max_diff_before": 0.0, "max_diff_in_tail": 0.0,
                             "bit_identical_before": True})
    return pd.DataFrame(rows)


def _curves(lengths):
    return {(clip, stage, cause): torch.zeros(length // 8 if stage != "audio" else length)
            for clip, length in enumerate(lengths) for stage in ("latent", "codes", "audio")
            for cause in ("padding", "batch size")}


DROPPED = pd.DataFrame({"hop": 8, "input_samples": [64, 65], "remainder": [0, 1], "frames": [8, 8],
                        "output_samples": [64, 64], "dropped_samples": [0, 1]})


def test_a_batch_of_equal_lengths_is_said_to_pad_nothing():
    lengths = [800, 800]
    result = found.findings(_table(lengths), _curves(lengths), 1, 3, 8, 20, DROPPED)
    assert result[0].verdict == "not comparable" and "pads nothing" in result[0].claim
    assert not any("zero-padding" in f.claim for f in result)


def test_a_padded_batch_opens_with_the_padding_finding():
    lengths = [800, 480]
    table = _table(lengths)
    table.loc[(table["clip"] == 1) & (table.cause == "padding") & (table.stage != "audio"), "first_diff_from_end"] = 2
    curves = _curves(lengths)
    curves[(1, "latent", "padding")][-2:] = 1e-3
    curves[(1, "codes", "padding")][-1:] = 1
    result = found.findings(table, curves, 1, 3, 8, 20, DROPPED)
    assert result[0].verdict == "reproduced" and "last 2 latent frames" in result[0].claim


def test_code_frames_are_counted_not_differenced():
    lengths = [800, 480]
    curves = _curves(lengths)
    curves[(1, "codes", "padding")][[3, 4, 9]] = torch.tensor([5.0, 1.0, 700.0])  # index differences, any size
    shown = batching.with_code_frames(_table(lengths), curves)
    row = shown[(shown["clip"] == 1) & (shown.stage == "codes") & (shown.cause == "padding")]
    assert row.changed.iloc[0] == 3 and str(shown.changed.dtype) == "Int64"
    assert shown[shown.stage == "latent"].changed.isna().all()


def test_odd_lengths_sit_the_given_samples_past_a_hop_multiple():
    assert batching.odd_lengths(0.5, 1000, 64, [0, 1, 7]) == [448, 449, 455]


def test_the_padding_claim_counts_every_changed_frame_and_states_the_threshold_in_ulps():
    lengths = [800, 480]
    table = _table(lengths)
    pad = (table["clip"] == 1) & (table.cause == "padding")
    table.loc[pad & (table.stage == "latent"), ["first_diff_from_end", "max_diff_before"]] = [2, 2.9e-6]
    table = table.assign(any_diff_from_end=0, threshold=0.0, threshold_ulps=float("nan"))
    table.loc[pad & (table.stage == "latent"), ["any_diff_from_end", "threshold", "threshold_ulps"]] = [3, 1e-5, 840.2]
    curves = _curves(lengths)
    curves[(1, "latent", "padding")][-3:] = torch.tensor([2.9e-6, 1e-3, 1e-3])
    claim = found.padding_finding(table, 1, 3, curves=curves).claim
    # frames below the threshold that still changed are counted, and the threshold is no "rounding floor"
    assert "changes the last 3 latent frames" in claim and "the last 2 by more than 0.0001 of the latent's RMS, 840 "\
        "float32 ulps of it; the 1 before those by up to 2.9e-06" in claim and "rounding" not in claim
    # a frame below the threshold inside the tail: the count above it is said, not the tail's length
    gap = {**curves, (1, "latent", "padding"): torch.cat([torch.zeros(57), torch.tensor([1e-3, 1e-6, 1e-3])])}
    table.loc[pad & (table.stage == "latent"), ["first_diff_from_end", "any_diff_from_end"]] = [3, 3]
    assert "2 by more than 0.0001 of the latent's RMS, 840 float32 ulps of it, all within the last 3" in \
        found.padding_finding(table, 1, 3, curves=gap).claim
    regions = batching.reach_regions(table, curves, 1, 3)
    latent = regions[regions.stage == "latent"].set_index("region")
    assert (latent.loc["outside the reach", "differing"], latent.loc["within the reach", "differing"]) == (0, 3)
    assert latent.loc["within the reach", "above_threshold"] == 2
    assert "none differs of 57" in batching_sentences.reach_regions_sentence(regions, 3)
    curves[(1, "latent", "padding")][5] = 1e-7  # a frame the padding cannot reach: the table says so
    regions = batching.reach_regions(table, curves, 1, 3)
    assert "1 differ, by up to 1.0e-07" in batching_sentences.reach_regions_sentence(regions, 3)


def test_a_code_region_counts_changed_frames_and_gives_no_difference_size():
    lengths = [800, 480]
    table = _table(lengths).assign(any_diff_from_end=0, threshold=0.0, threshold_ulps=float("nan"))
    curves = _curves(lengths)
    curves[(1, "codes", "padding")][-2:] = torch.tensor([978.0, 3.0])  # |index difference|: two codes changed
    codes = batching.reach_regions(table, curves, 1, 3).query("stage == 'codes'").set_index("region")
    assert codes.loc["within the reach", "differing"] == 2 and codes.loc["outside the reach", "differing"] == 0
    assert codes.largest.isna().all()  # 978 is no size of a difference
