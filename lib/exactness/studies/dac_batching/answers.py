"""The DAC batching report's answer table: for the shorter clip, what the zero padding changes and what the
batch size alone changes, and what to do about each. Read from the batching table, the code curves and the
repair measurement."""

from __future__ import annotations

import pandas as pd

from exactness.studies.dac_batching.sentences import split_words
from exactness.studies.dac_batching.study import (
    ROUNDING_FLOOR,
    PaddingReach,
    above_threshold,
    any_tail,
    clip_rows,
    padding_reach,
)
from exactness.workbook.answers import Answer, Columns
from exactness.workbook.findings import count, significant
from exactness.workbook.presentation import plural

COLUMNS = Columns(subject="the shorter clip: compared", rate="what changes")


def _changes(rows: pd.DataFrame, code_frames: int, curve=None) -> str:
    latent, audio = rows.loc["latent"], rows.loc["audio"]
    moved, tail = any_tail(rows), int(latent.first_diff_from_end)
    split = f" ({split_words(rows, curve)})" if moved != tail or (above_threshold(rows, curve) or tail) != tail else ""
    return (f"last {count(moved)} of {plural(int(latent.length), 'latent frame')}{split}, "
            f"{plural(code_frames, 'code frame')}, last {plural(int(audio.first_diff_from_end), 'audio sample')}")


def answers(table: pd.DataFrame, curves: dict, shortest: int, one_side_frames: int,
            repaired: dict | None = None) -> list[Answer]:
    found = []
    pad = clip_rows(table, shortest, "padding")
    pad_codes = int((curves[(shortest, "codes", "padding")] > 0).sum())
    tail = int(pad.loc["latent", "first_diff_from_end"])
    curve = curves.get((shortest, "latent", "padding"))
    reach = padding_reach(pad, one_side_frames)
    if int(pad.loc["latent", "padded_by"]) == 0:
        found.append(Answer("alone against zero-padded", "exact", "nothing: the clips have one length, no padding",
                            "nothing", "every clip as long as the batch"))
    elif tail == 0 and not pad_codes:
        found.append(Answer("alone against zero-padded", "within rounding", "nothing: padding reaches no frame here",
                            _changes(pad, pad_codes, curve), f"below {ROUNDING_FLOOR:g} of the RMS everywhere"))
    elif reach is PaddingReach.BEYOND:  # the receptive field does not explain it
        found.append(Answer("alone against zero-padded", "undecided", "find where the padded run first leaves the clip "
                            "alone: padding does not explain a change this far from the end",
                            _changes(pad, pad_codes, curve),
                            f"frames above the rounding floor reach {count(tail)} from the end, beyond the last "
                            f"{count(one_side_frames)} whose receptive field reaches past the clip's end"))
    else:
        within = ("the frames above the rounding floor" if reach is PaddingReach.ROUNDING_BEYOND
                  else "the changed frames")
        repair = (f"recompute the last {count(repaired['tail_frames'])} frames from the clip alone: then "
                  f"{count(repaired['code_frames_after'])} code frames differ" if repaired is not None else
                  "recompute the last frames from the clip alone")
        found.append(Answer("alone against zero-padded", "padding", f"{repair} (or batch clips of equal length)",
                            _changes(pad, pad_codes, curve),
                            f"{within} lie within the last {count(one_side_frames)}, whose receptive field reaches "
                            "past the clip's end",
                            verified=repaired is not None and repaired["code_frames_after"] == 0))
    size = table[table["cause"] == "batch size"]
    size_codes = sum(int((curve > 0).sum()) for (_, stage, cause), curve in curves.items()
                     if stage == "codes" and cause == "batch size")
    latent = size[size.stage == "latent"]
    moved = float(latent[["max_diff_before", "max_diff_in_tail"]].to_numpy().max()) if len(latent) else 0.0
    audio = size[size.stage == "audio"]
    audio_moved = float(audio[["max_diff_before", "max_diff_in_tail"]].to_numpy().max()) if len(audio) else 0.0
    rate = (f"latents up to {significant(moved)}, audio up to {significant(audio_moved)}, "
            f"{plural(size_codes, 'code frame')}")
    if moved == 0 and audio_moved == 0 and not size_codes:
        found.append(Answer("padded alone against inside the batch", "exact", "nothing: the batch size changes no "
                            "value", rate, "every clip's padded run bit-identical inside the batch"))
    elif size_codes:
        found.append(Answer("padded alone against inside the batch", "codes flip", "compare the codes tie-aware",
                            rate, "the batch's kernels round differently and a near-tie code flips"))
    else:
        found.append(Answer("padded alone against inside the batch", "within rounding", "nothing for the codes; "
                            f"compare latents at a tolerance above {significant(moved)}", rate,
                            f"below {ROUNDING_FLOOR:g} of the RMS at every position; every code the same"))
    return found
