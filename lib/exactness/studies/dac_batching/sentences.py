"""The DAC batching notebook's words: one computed sentence per section, each reading the run's measurements
and nothing else."""

from __future__ import annotations

import pandas as pd

from exactness.studies.dac_batching.figures import panels
from exactness.studies.dac_batching.study import ROUNDING_FLOOR, above_threshold, any_tail, clip_rows
from exactness.workbook.findings import count, significant


def reach_sentence(field: dict, measured: dict) -> str:
    same = (field["left_samples"], field["right_samples"]) == (measured["left_samples"], measured["right_samples"])
    return (f"A latent frame reads {count(field['left_samples'])} samples before its first sample and "
            f"{count(field['right_samples'])} after it by the layers' sizes and paddings, "
            f"{count(measured['left_samples'])} and {count(measured['right_samples'])} by float64 gradient"
            f"{' (the same)' if same else ''}: the padding after a clip reaches its last "
            f"{count(field['one_side_frames'])} frames of {count(field['hop'])} samples.")


def reach_regions_sentence(regions: pd.DataFrame, one_side_frames: int) -> str:
    latent = regions[regions.stage == "latent"].set_index("region")
    out, inside = latent.loc["outside the reach"], latent.loc["within the reach"]
    outside = ("none differs" if not out.differing else
               f"{count(int(out.differing))} differ, by up to {significant(float(out.largest))}")
    return (f"Outside the last {count(one_side_frames)} latent frames, which the padding reaches: {outside} of "
            f"{count(int(out.frames))}; within them {count(int(inside.differing))} differ, "
            f"{count(int(inside.above_threshold))} above the threshold.")


def decoder_sentence(decoder: dict, hop: int) -> str:
    return (f"Changing one latent frame in the float64 decoder changes {count(decoder['left_samples'])} samples "
            f"before that frame's {count(hop)} samples and {count(decoder['right_samples'])} after: the decoder's "
            "receptive field.")


def repair_sentence(repaired: dict) -> str:
    return (f"Recomputing the last {count(repaired['tail_frames'])} frames leaves "
            f"{count(repaired['code_frames_after'])} of {count(repaired['frames'])} code frames different from the "
            f"clip run alone ({count(repaired['code_frames_before'])} before).")


def padding_tail_words(table: pd.DataFrame, shortest: int, stage: str, unit: str) -> str:
    """How far from the end the padding changes the shorter clip: any difference, and beyond the threshold."""
    rows = clip_rows(table, shortest, "padding")
    above, moved = int(rows.loc[stage, "first_diff_from_end"]), any_tail(rows, stage)
    if not moved:
        return f"The padding changes none of its {unit}."
    if not above:
        return f"The padding changes values in the last {count(moved)} {unit}, none by more than the threshold."
    if moved == above:
        return f"The padding changes the last {count(above)} {unit}."
    return (f"The padding changes values in the last {count(moved)} {unit}, by more than the threshold in the last "
            f"{count(above)}.")


def batching_caption(table: pd.DataFrame, curves: dict, shortest: int, stage: str, unit: str, one_side: int,
                     reach_label: str, other_windows: bool) -> str:
    """The batching figure's caption for one stage: its steps where positions are binned, the reach shaded, and
    how far from the end the padding changes the shorter clip."""
    binned = [width for _, width in panels(len(curves[(shortest, stage, "padding")]), one_side) if width > 1]
    return (f"Shorter clip ({shortest}), {stage}: largest |difference| over channels at each position ({unit}"
            + (f"; each step the largest over {' and '.join(map(str, binned))} {unit}" if binned else "")
            + "), log scale, exact zeros drawn at the 1e-12 floor; blue: padding, orange: batch size; shaded: "
            f"{reach_label} (the last {one_side:,} {unit})"
            + ("; grey: decoded in a window of another span than the padded clip's" if other_windows else "")
            + ". " + padding_tail_words(table, shortest, stage, unit))


def threshold_words(rows: pd.DataFrame, stage: str = "latent") -> str:
    """The threshold in words, with its size in ulps where the table measured it."""
    ulps = rows.loc[stage, "threshold_ulps"] if "threshold_ulps" in rows.columns else float("nan")
    return f"{ROUNDING_FLOOR:g} of the {stage}'s RMS" + (f", {count(round(float(ulps)))} float32 ulps of it"
                                                          if ulps == ulps else "")


def split_words(rows: pd.DataFrame, curve, stage: str = "latent") -> str:
    """The changed tail split at the threshold: how many exceed it, within how many from the end."""
    tail, above = int(rows.loc[stage, "first_diff_from_end"]), above_threshold(rows, curve, stage)
    if above is None or above == tail:
        return f"the last {count(tail)} by more than {threshold_words(rows, stage)}"
    return f"{count(above)} by more than {threshold_words(rows, stage)}, all within the last {count(tail)}"
