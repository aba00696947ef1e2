"""The DAC batching study's findings, answering the reviewers of the DAC integration-test fix ("batching is probably
still broken"):
which frames of the shorter clip padding changes and why, what remains before them (rounding only), what
the batch size alone changes, how far the decoded audio differs, and how many samples a length that is
not a hop multiple loses. Every verdict and every claim's wording comes from the tables.

The reviewers reported a mismatch but no figure, on another model (DAC inside Dia): the mismatch itself is
set beside theirs; everything else is ours alone ("new").
"""

from __future__ import annotations

import pandas as pd

from exactness.compare.scale import float32_ulp
from exactness.studies.dac_batching.audio_tail import (
    AudioTail,
    EarlyCause,
    Float64Says,
    TailCause,
    audio_tail,
    outside_reach,
)
from exactness.studies.dac_batching.sentences import split_words, threshold_words
from exactness.studies.dac_batching.study import ROUNDING_FLOOR, PaddingReach, any_tail, clip_rows, padding_reach
from exactness.workbook.findings import Finding, count, significant

REVIEW = ("the shorter clip of a two-clip batch did not match the clip run alone (the DAC integration-test fix, "
          "review by vasqu; "
          "DAC as used in Dia, no figure given)")


def padding_finding(table: pd.DataFrame, shortest: int, one_side_frames: int, repair_measured: bool = False,
                    curves: dict | None = None) -> Finding:
    """The reviewers' question: does padding change the shorter clip, and is that explained by the receptive
    field? (A frame whose receptive field reaches past the clip's end reads, there, the padded run's layer
    outputs: computed from the zeros appended and, near the end, from the clip's own last samples, plus biases;
    the clip alone reads its layers' zero padding there instead. A network without biases differs too.)"""
    pad = clip_rows(table, shortest, "padding")
    tail, frames = int(pad.loc["latent", "first_diff_from_end"]), int(pad.loc["latent", "length"])
    moved = any_tail(pad)
    largest = significant(pad.loc["latent", "max_diff_in_tail"])
    curve = (curves or {}).get((shortest, "latent", "padding"))
    ours = (f"last {count(moved)} of {count(frames)} latent frames differ, {split_words(pad, curve)} (largest "
            f"{largest}); receptive field reaches {count(one_side_frames)} frames")
    reach = padding_reach(pad, one_side_frames)
    if reach is PaddingReach.UNCHANGED:
        return Finding(claim="Padding changes no latent frame of the shorter clip here: batching matches the clip run "
                       "alone.", ours=ours, verdict="differs", source=REVIEW,
                       why="no frame changed at these lengths; the reviewers' clips and model differ")
    if reach is PaddingReach.ROUNDING_ONLY:
        return Finding(claim=f"Padding moves no latent frame of the shorter clip above the rounding floor: the "
                       f"{count(moved)} it moves differ by up to {significant(pad.loc['latent', 'max_diff_before'])}, "
                       "below the floor (rounding: the padded input is longer, and its convolutions may sum in another "
                       "order).", ours=ours, verdict="differs", source=REVIEW,
                       why="rounding-level differences only at these lengths; the reviewers' clips and model differ")
    if reach is PaddingReach.ROUNDING_BEYOND:
        claim = (f"Batching is not broken, it is padding: zero-padding changes the last {count(tail)} latent frames of "
                 f"the shorter clip above the rounding floor ({split_words(pad, curve)}), all within the "
                 f"{count(one_side_frames)} whose receptive field reaches past its end; before them it moves "
                 f"{count(moved - tail)} more by up to {significant(pad.loc['latent', 'max_diff_before'])}, below "
                 "the floor (rounding: the padded input is longer, and its convolutions may sum in another order); "
                 "recompute the last frames from the clip alone" + (" (measured below)" if repair_measured else "")
                 + ", or run clips of unequal length alone.")
        return Finding(claim=claim, ours=ours, verdict="reproduced", source=REVIEW, evidence="tables/batching.parquet")
    if reach is PaddingReach.WITHIN:
        below = moved - tail
        split = (split_words(pad, curve)
                 + (f"; the {count(below)} before those by up to {significant(pad.loc['latent', 'max_diff_before'])}"
                    if below > 0 else ""))
        claim = (f"Batching is not broken, it is padding: zero-padding changes the last {count(moved)} latent "
                 f"frames of the shorter clip ({split}), all within the {count(one_side_frames)} whose receptive "
                 "field reaches past its end; recompute those from the clip alone"
                 + (" (measured below)" if repair_measured else "") + ", or run clips of unequal length alone.")
        # why those frames: there the padded run's layers read the clip's last samples and the appended zeros
        # where the clip alone reads its layers' zero padding (biases add to it; without them it differs too)
        ours += "; there the padded run reads the appended zeros where the clip alone reads zero padding"
        return Finding(claim=claim, ours=ours, verdict="reproduced", source=REVIEW, evidence="tables/batching.parquet")
    return Finding(claim=f"Padding changes the last {count(max(tail, moved))} latent frames of the shorter clip, more "
                   f"than the {count(one_side_frames)} frames the receptive field explains.", ours=ours,
                   verdict="differs",
                   source=REVIEW, why="unexplained: the tail is longer than the encoder's receptive field",
                   evidence="tables/batching.parquet")


def before_tail_finding(table: pd.DataFrame, curves: dict, shortest: int, one_side_frames: int,
                        changed_code_frames: int) -> Finding:
    """Before the tail: frames the padding cannot reach, and those it reaches by less than the rounding floor;
    the codes there."""
    pad = clip_rows(table, shortest, "padding")
    latent = curves[(shortest, "latent", "padding")]
    unreached = outside_reach(latent, one_side_frames)
    frames = int(pad.loc["codes", "length"])
    code_tail = int(pad.loc["codes", "first_diff_from_end"])
    if unreached == 0:
        before = (f"are bit-identical outside the last {count(one_side_frames)} frames the padding can reach; inside "
                  "them but before the tail, they differ by at most "
                  f"{significant(pad.loc['latent', 'max_diff_before'])} (below the threshold, {threshold_words(pad)})")
    elif padding_reach(pad, one_side_frames) is PaddingReach.BEYOND:  # above the floor there: not rounding
        before = (f"differ by up to {significant(unreached)} even outside the last {count(one_side_frames)} frames "
                  "the padding can reach, above the rounding floor there (see the padding finding)")
    else:
        before = (f"differ by at most {significant(unreached)} even outside the last {count(one_side_frames)} frames "
                  "the padding can reach (rounding: the padded input is longer, and its convolutions may sum in "
                  "another order)")
    codes = (f"{count(changed_code_frames)} of {count(frames)} code frames differ (a frame counts once, whatever "
             f"its codebooks), all within the last {count(code_tail)}" if changed_code_frames
             else f"no code frame of {count(frames)} differs")
    clean = bool(pad.loc["codes", "bit_identical_before"])
    claim = (f"Before that tail the latents {before}, and every code frame before the padded tail is identical: "
             f"{codes}." if clean else f"Codes differ before the padding's tail as well: {codes}.")
    return Finding(claim=claim, ours=f"latent before the tail: largest difference "
                   f"{significant(pad.loc['latent', 'max_diff_before'])}, outside the padding's reach "
                   f"{significant(unreached)}; {codes}", verdict="new", evidence="tables/batching.parquet")


def batch_size_finding(table: pd.DataFrame, changed_code_frames: int) -> Finding:
    """The batch size alone (the same padded clip alone and inside the batch)."""
    size = table[table["cause"] == "batch size"]
    latent = size[size.stage == "latent"]
    moved = latent[["max_diff_before", "max_diff_in_tail"]].to_numpy().max()
    if changed_code_frames == 0 and moved == 0:
        claim = ("The batch size alone changes nothing: every clip's padded run inside the batch is bit-identical to "
                 "it alone.")
    else:
        # no position above the rounding floor (first_diff_from_end == 0) and no code changed: rounding only
        below_floor = bool((size.first_diff_from_end == 0).all())
        small_only = below_floor and not changed_code_frames
        ulps = latent.threshold_ulps.max() if "threshold_ulps" in latent.columns else float("nan")
        rounding = (f" (below the threshold at every position: {ROUNDING_FLOOR:g} of the RMS"
                    + (f", up to {count(round(float(ulps)))} float32 ulps of it" if ulps == ulps else "") + ")"
                    if small_only else "")
        claim = (f"The batch size alone moves latents by up to {significant(moved)}{rounding} and changes "
                 f"{count(changed_code_frames)} code frames.")
    return Finding(claim=claim, ours=f"largest latent difference {significant(moved)}, "
                   f"{count(changed_code_frames)} code frames changed", verdict="new",
                   evidence="tables/batching.parquet")


def _float64_proof(t: AudioTail) -> str:
    """What the float64 decodes of the same two latents show about a float32 difference beyond the padding's reach
    (`dac_batching.float64_audio`)."""
    exact = t.exact
    if t.float64 is Float64Says.ROUNDING:
        return (f"in float64 the two latents' audio differs only over the last {count(exact.value_tail)} samples "
                f"(float64 rounding: {significant(exact.floor)}), so the float32 difference before that (up to "
                f"{significant(exact.float32_difference)}) is rounding of a longer latent's convolutions, within each "
                f"float32 decode's own error ({significant(exact.float32_error)}, "
                f"{significant(exact.float32_error / exact.rms)} of the RMS)")
    if t.float64 is Float64Says.NOT_EXPLAINED:
        return (f"decoded again in float64, the two latents' audio differs in value only over the last "
                f"{count(exact.value_tail)} samples, yet the float32 decodes differ before that by "
                f"{significant(exact.float32_difference)}, more than their own errors against float64 (up to "
                f"{significant(exact.float32_error)}) explain: unexplained")
    return (f"decoded again in float64, the two latents' audio differs in value over the last "
            f"{count(exact.value_tail)} samples, beyond the padding's reach ({count(t.reach)}): unexplained")


def _before_reach(t: AudioTail, window: str) -> str:
    """The audio's differences before the padding's reach, and what explains them ("" where none is said)."""
    span, largest = f"samples {count(t.early_first)} to {count(t.early_last)}", significant(t.early_max)
    if t.early is EarlyCause.IN_WINDOW:
        return f" Before that the audio differs by up to {largest} ({span}), all within {window}."
    if t.early is EarlyCause.CARRIED:
        return (f" Before that the audio differs by up to {largest} ({span}), carried from the latents' rounding "
                f"differences (up to {significant(t.latent_rounding)}) outside the padding's reach.")
    if t.early is EarlyCause.FLOAT64:
        return (f" An isolated difference of up to {largest} at {span} lies before any changed frame's reach, where "
                f"the latents are bit-identical: {_float64_proof(t)}.")
    if t.early is EarlyCause.UNMEASURED:
        return (f" An isolated difference of up to {largest} at {span} lies before any changed frame's reach, where "
                "the latents are bit-identical: not explained by the padding; the padded run decodes a longer latent, "
                "whose convolutions may round differently (not measured here).")
    if t.early is EarlyCause.SAME_AS_TAIL:
        return f" So are the isolated ones at {span}."
    return ""


def audio_finding(t: AudioTail) -> Finding:
    """Where the decoded audio starts to differ, against the changed latent frames, the decoder's reach and, for a
    clip decoded in windows, the first window whose span the padding changes (`audio_tail` decides which)."""
    ours = (f"last {count(t.tail)} samples differ; the decoder's reach is {count(t.decoder_left)} samples before a "
            f"changed frame; {count(t.frames)} frames above the rounding floor explain {count(t.above)}, the "
            f"{count(t.one_side_frames)} frames the padding reaches {count(t.reach)}")
    window = (f"the clip's last {count(t.length - t.windows_from)} samples, from sample {count(t.windows_from)}, which "
              "the clip alone decodes in a window of another span than the padded clip (the padding reaches into it): "
              "convolutions of other lengths, whose float32 rounding may differ (the kernels choose their "
              "algorithm by length), while every earlier window is the same computation on the same latents"
              if t.windows_from is not None else "")
    isolated = _before_reach(t, window)
    if t.cause is TailCause.CHANGED_FRAMES:
        claim = (f"The decoded audio differs over the last {count(t.tail)} samples: the {count(t.frames)} changed "
                 f"latent frames ({count(t.frames * t.hop)} samples) spread back by up to the decoder's reach of "
                 f"{count(t.decoder_left)} samples (at most {count(t.above)}).")
    elif t.cause is TailCause.PADDING_REACH:
        claim = (f"The decoded audio differs over the last {count(t.tail)} samples, more than the {count(t.frames)} "
                 f"latent frames above the rounding floor explain ({count(t.above)}) but within the "
                 f"{count(t.one_side_frames)} frames the padding reaches plus the decoder's reach of "
                 f"{count(t.decoder_left)} samples ({count(t.reach)}): frames the padding moves by less than the floor "
                 "still move the audio above it.")
    elif t.cause is TailCause.WINDOW:
        claim = (f"The decoded audio differs over the last {count(t.tail)} samples, more than the padding's reach "
                 f"through the encoder and the decoder explains ({count(t.reach)}), but all within {window}.")
    elif t.cause is TailCause.FLOAT64:
        claim = (f"The decoded audio differs over the last {count(t.tail)} samples, beyond the padding's reach "
                 f"({count(t.reach)}); {_float64_proof(t)}.")
    else:
        claim = (f"The decoded audio differs over the last {count(t.tail)} samples, more than the padding's reach "
                 f"through the encoder and the decoder explains ({count(t.reach)}): unexplained.")
    if t.exact is not None:
        ours += (f"; in float64 the last {count(t.exact.value_tail)} samples differ, before them float32 "
                 f"{significant(t.exact.float32_difference)} against its own error "
                 f"{significant(t.exact.float32_error)}")
    if t.windows_from is not None:
        ours += f"; windows differ from sample {count(t.windows_from)} of {count(t.length)}"
    return Finding(claim=claim + isolated, ours=ours, verdict="new", evidence="tables/batching.parquet, audio figure")


def hop_finding(dropped: pd.DataFrame) -> Finding:
    """Samples past a hop multiple: the rule, not the largest remainder tested."""
    hop = int(dropped.hop.iloc[0])
    follows = bool((dropped.dropped_samples == dropped.remainder).all())
    tested = ", ".join(f"{count(r)} -> {count(d)}" for r, d in zip(dropped.remainder, dropped.dropped_samples,
                                                                      strict=True))
    if follows:
        claim = (f"DacModel does not pad to a hop multiple: it drops the input's last (length mod {count(hop)}) "
                 f"samples, so up to {count(hop - 1)} samples (hop - 1) can be lost; pad the input to a multiple of "
                 f"{count(hop)} to keep them.")
    else:
        claim = f"The samples lost do not follow length mod {count(hop)}: tested remainders -> dropped {tested}."
    return Finding(claim=claim, ours=f"remainder -> dropped samples: {tested}", verdict="new",
                   evidence="tables/hop_drop.parquet")


def repair_finding(repaired: dict) -> Finding:
    """The fix the report recommends, measured (`dac_batching.repair`)."""
    tail, rerun = count(repaired["tail_frames"]), count(repaired["samples_rerun"])
    before, after = repaired["code_frames_before"], repaired["code_frames_after"]
    largest = significant(repaired["max_latent_diff_after"])
    rounding = repaired["max_latent_diff_after"] < ROUNDING_FLOOR * repaired["latent_rms"]
    rms = float(repaired["latent_rms"])
    ulps = ROUNDING_FLOOR * rms / float(float32_ulp(rms)) if rms > 0 else float("nan")
    threshold = f"{ROUNDING_FLOOR:g} of their RMS" + (f", {count(round(ulps))} float32 ulps of it" if ulps == ulps
                                                        else "")
    ours = (f"{count(before)} code frames differ from the clip alone before, {count(after)} after recomputing the "
            f"last {tail} frames from {rerun} samples; latents after within {largest}")
    if after == 0:
        claim = (f"To get a clip's own results from a padded batch, recompute its last {tail} frames from the clip "
                 f"alone (its last {rerun} samples, the encoder's context included) and keep the batch's other "
                 f"frames: measured, the codes then equal the clip run alone in every frame ({count(before)} differed "
                 f"before), " + ("the latents bit-identical." if repaired["max_latent_diff_after"] == 0 else
                                 f"the latents within {largest}" + (f" (below the threshold, {threshold})."
                                                                    if rounding else
                                                                    f" (above the threshold, {threshold}).")))
    else:
        claim = (f"Recomputing the last {tail} frames from the clip alone does NOT restore the clip's own codes: "
                 f"{count(after)} code frames still differ ({count(before)} before).")
    return Finding(claim=claim, ours=ours, verdict="new", evidence="tables/repair.parquet")


def equal_lengths(table: pd.DataFrame) -> bool:
    """Every clip of the batch has the same number of samples: nothing is padded (a table of one clip's rows
    says nothing about the others)."""
    audio = table[table.stage == "audio"]
    return audio["clip"].nunique() > 1 and audio["length"].nunique() == 1


def no_padding_finding(table: pd.DataFrame) -> Finding:
    """A batch of clips of equal length pads nothing: it tests the batch size alone."""
    length = int(table[table.stage == "audio"]["length"].iloc[0])
    clips = table["clip"].nunique()
    return Finding(claim=f"The {count(clips)} clips have the same length ({count(length)} samples): the batch pads "
                   "nothing, so this run measures the batch size alone, not the reviewers' padded shorter clip.",
                   ours=f"{count(clips)} clips of {count(length)} samples, no padding", verdict="not comparable",
                   source=REVIEW, why="the reviewers' mismatch was the shorter clip of a padded batch; give clips of "
                   "different lengths (clip_seconds) to measure it", evidence="tables/batching.parquet")


def findings(table: pd.DataFrame, curves: dict, shortest: int, one_side_frames: int, hop: int, decoder_left: int,
             dropped: pd.DataFrame, repaired: dict | None = None, windows_from: int | None = None,
             exact=None) -> list[Finding]:
    padding_codes = int((curves[(shortest, "codes", "padding")] > 0).sum())
    size_codes = sum(int((curve > 0).sum()) for (_, stage, cause), curve in curves.items()
                     if stage == "codes" and cause == "batch size")
    if equal_lengths(table):
        return [no_padding_finding(table), batch_size_finding(table, size_codes), hop_finding(dropped)]
    return [padding_finding(table, shortest, one_side_frames, repaired is not None, curves),
            before_tail_finding(table, curves, shortest, one_side_frames, padding_codes),
            batch_size_finding(table, size_codes),
            audio_finding(audio_tail(table, curves, shortest, hop, one_side_frames, decoder_left, windows_from, exact)),
            hop_finding(dropped)] + ([repair_finding(repaired)] if repaired is not None else [])
