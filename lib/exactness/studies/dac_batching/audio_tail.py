"""Why the shorter clip's decoded audio differs where it does, decided from the tables: the changed latent frames
spread back by the decoder's reach, the frames the padding reaches, a decode window of another span, or rounding
that the float64 decodes prove (`study.Float64Audio`); and what explains a difference before all of those.
`findings.audio_finding` words it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import pandas as pd

from exactness.studies.dac_batching.study import Float64Audio, clip_rows


class TailCause(Enum):
    """What explains how far back from the end the two decodes differ."""

    CHANGED_FRAMES = "the latent frames above the rounding floor, spread by the decoder's reach"
    PADDING_REACH = "the frames the padding reaches (some below the floor), spread by the decoder's reach"
    WINDOW = "the clip's last decode window, of another span than the padded clip's"
    FLOAT64 = "beyond the padding's reach: the float64 decodes decide"
    UNEXPLAINED = "beyond the padding's reach, with nothing to decide it"


class Float64Says(Enum):
    """What the float64 decodes of the two latents say of a float32 difference beyond the padding's reach."""

    ROUNDING = "they differ only within the reach, and float32's difference before it is within its own error"
    NOT_EXPLAINED = "they differ only within the reach, but float32's difference before it exceeds its own error"
    BEYOND_REACH = "they differ in value beyond the reach"


class EarlyCause(Enum):
    """What explains audio differences before the padding's reach (where the latents are not changed)."""

    NONE = "no difference there, or one the tail's cause already covers"
    IN_WINDOW = "all within the clip's last decode window"
    CARRIED = "carried from the latents' own rounding differences there"
    FLOAT64 = "the float64 decodes decide, the latents being bit-identical there"
    SAME_AS_TAIL = "the same float64 rounding as the tail"
    UNMEASURED = "the latents are bit-identical there and nothing measured explains it"


@dataclass(frozen=True)
class AudioTail:
    tail: int  # samples at the end where the two decodes differ
    frames: int  # latent frames above the rounding floor
    above: int  # samples those frames explain (their span plus the decoder's reach)
    reach: int  # samples the padding explains: every frame it reaches plus the decoder's reach
    length: int  # the clip's samples
    hop: int  # samples per latent frame
    one_side_frames: int  # latent frames the padding reaches
    decoder_left: int  # samples before a changed frame that the decoder reaches
    windows_from: int | None  # the first sample of the decode window whose span the padding changes (None: one window)
    cause: TailCause
    early: EarlyCause
    early_first: int = 0  # the first and last sample of a difference before the reach, and its size
    early_last: int = 0
    early_max: float = 0.0
    latent_rounding: float = 0.0  # the latents' largest difference outside the padding's reach
    float64: Float64Says | None = None  # what the float64 decodes say, where they decide the tail or the early part
    exact: Float64Audio | None = None  # where they were measured and could decide (identical latents outside reach)


def float64_says(exact: Float64Audio, reach: int) -> Float64Says:
    if exact.value_tail <= reach:
        return Float64Says.ROUNDING if exact.rounding else Float64Says.NOT_EXPLAINED
    return Float64Says.BEYOND_REACH


def outside_reach(curve, one_side_frames: int) -> float:
    """The largest difference at positions the padding cannot reach (before the last `one_side_frames`)."""
    return float(curve[: len(curve) - one_side_frames].max()) if len(curve) > one_side_frames else 0.0


def audio_tail(table: pd.DataFrame, curves: dict, shortest: int, hop: int, one_side_frames: int, decoder_left: int,
               windows_from: int | None = None, exact: Float64Audio | None = None) -> AudioTail:
    """The decision for the shortest clip: `windows_from`, for a clip decoded in windows, the first sample of the
    window whose span the padding changes; `exact`, the two latents decoded in float64, which decides only where
    the latents are bit-identical outside the padding's reach (latents that differ there carry their own rounding)."""
    pad = clip_rows(table, shortest, "padding")
    tail = int(pad.loc["audio", "first_diff_from_end"])
    frames = int(pad.loc["latent", "first_diff_from_end"])
    above = frames * hop + decoder_left if frames else 0
    reach = one_side_frames * hop + decoder_left
    audio = curves[(shortest, "audio", "padding")]
    early = (audio[: max(len(audio) - reach, 0)] > 0).nonzero().flatten()
    latent_rounding = outside_reach(curves[(shortest, "latent", "padding")], one_side_frames)
    length = len(audio)
    proves = exact is not None and latent_rounding == 0
    in_window = bool(windows_from is not None and len(early) and int(early.min()) >= windows_from)
    if in_window and latent_rounding == 0:
        before = EarlyCause.IN_WINDOW
    elif len(early):
        before = (EarlyCause.CARRIED if latent_rounding > 0 else EarlyCause.FLOAT64 if proves
                  else EarlyCause.UNMEASURED)
    else:
        before = EarlyCause.NONE
    says = float64_says(exact, reach) if proves else None
    if tail <= above:
        cause = TailCause.CHANGED_FRAMES
    elif tail <= reach:
        cause = TailCause.PADDING_REACH
    elif windows_from is not None and length - tail >= windows_from:
        cause = TailCause.WINDOW
        before = EarlyCause.NONE if in_window else before  # the same window explains both: said once
    elif proves:
        cause = TailCause.FLOAT64
        before = EarlyCause.SAME_AS_TAIL if len(early) and says is Float64Says.ROUNDING else before
    else:
        cause = TailCause.UNEXPLAINED
    first, last, largest = ((int(early.min()), int(early.max()), float(audio[early].max())) if len(early)
                            else (0, 0, 0.0))
    decides = cause is TailCause.FLOAT64 or before in (EarlyCause.FLOAT64, EarlyCause.SAME_AS_TAIL)
    return AudioTail(tail, frames, above, reach, length, hop, one_side_frames, decoder_left, windows_from, cause,
                     before, first, last, largest, latent_rounding, says if decides else None,
                     exact if proves else None)
