"""Does batching change the non-padded part of a shorter clip? Alone against padded in a batch, frame by
frame from the end, set against the encoder's receptive field (from the architecture and from a float64
gradient), and the cause (padding or batch size) told apart."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

import numpy as np
import pandas as pd
import torch

from exactness.compare.scale import float32_ulp
from exactness.models import dac_chunks
from exactness.models.dac_chunks import CHUNK_FRAMES

STAGES = ("latent", "codes", "audio")


# the threshold `_tail` counts a position as changed above, a fraction of the RMS: hundreds of float32
# ulps of it (`threshold_ulps`), so below it is small, not proven rounding
ROUNDING_FLOOR = 1e-4


def receptive_field(config) -> dict[str, int]:
    """The samples an encoder frame reads, from the layer sizes and paddings: `left_samples` before the frame's
    first sample, `right_samples` after it (not symmetric: each strided convolution, kernel 2 * stride, pads
    ceil(stride / 2) on the left and reads the rest to the right), and how many frames from a clip's end the
    padding after it reaches (`one_side_frames`)."""
    left = right = 3  # conv1: kernel 7, padding 3
    jump = 1
    for stride in config.downsampling_ratios:
        units = sum(3 * d for d in (1, 3, 9)) * jump  # three residual units, kernel 7, dilations 1, 3, 9, same padding
        pad = math.ceil(stride / 2)
        left, right = left + units + pad * jump, right + units + (2 * stride - 1 - pad) * jump
        jump *= stride
    left, right = left + jump, right + jump  # conv2: kernel 3, padding 1
    return {"span_samples": left + right, "left_samples": left, "right_samples": right, "hop": jump,
            "one_side_frames": math.ceil(right / jump)}


def measured_receptive_field(model64, n_samples: int, frame: int) -> dict[str, int]:
    """Input samples whose float64 gradient on one latent frame is non-zero: the context it really sees."""
    hop = int(np.prod(model64.config.downsampling_ratios))
    centre = frame * hop
    # Only the samples around the frame can matter: the gradient is taken on a stretch of the architecture's whole
    # span (plus a frame) each side, a fraction of the saved activations; reaching its edge would be reported.
    margin = receptive_field(model64.config)["span_samples"] // hop * hop + 2 * hop
    start, stop = max(0, centre - margin), min(n_samples, centre + margin)
    noise = torch.randn(1, 1, n_samples, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    x = torch.zeros(1, 1, stop - start, dtype=torch.float64, requires_grad=True)
    parameters = list(model64.parameters())
    wanted = [p.requires_grad for p in parameters]
    try:  # the gradient on the input only: no weight gradients, no graph through the weights (GBs at 44.1 kHz)
        for p in parameters:
            p.requires_grad_(False)
        with torch.enable_grad():
            latent = model64.encoder(x + 0.1 * noise[..., start:stop])
            (grad,) = torch.autograd.grad(latent[0, :, frame - start // hop].sum(), x)
    finally:
        for p, flag in zip(parameters, wanted, strict=True):
            p.requires_grad_(flag)
    touched = (grad[0, 0] != 0).nonzero().flatten() + start
    if (int(touched.min()) == start > 0) or (int(touched.max()) == stop - 1 < n_samples - 1):
        raise RuntimeError(f"frame {frame}'s receptive field reaches the measured stretch's edge ({start} to {stop}): "
                           "it is wider than the architecture's span")
    return {"frame": frame, "first_sample": int(touched.min()), "last_sample": int(touched.max()),
            "left_samples": centre - int(touched.min()), "right_samples": int(touched.max()) - centre}


@torch.no_grad()
def _encode_decode(model, audio: torch.Tensor, chunk_frames: int = CHUNK_FRAMES) -> dict[str, torch.Tensor]:
    """`model.encode` then `model.decode` of its quantized representation: whole for a clip of at most
    `chunk_frames` frames (the library's own values), in windows beyond (memory flat in the clip's length;
    see `dac_chunks`)."""
    quantized, codes, *_ = model.quantizer(dac_chunks.encode_latent(model, audio, chunk_frames))
    return {"latent": quantized, "codes": codes, "audio": dac_chunks.decode(model, quantized, chunk_frames)}


def _tail(a: torch.Tensor, b: torch.Tensor, relative_floor: float = ROUNDING_FLOOR) -> dict:
    """How many positions at the end differ by more than rounding noise (`relative_floor` times the RMS of
    `a`; exact inequality for codes), whether everything before that tail is bit-identical, and the largest
    difference before and inside the tail (none for codes)."""
    diff = (a.double() - b.double()).abs().reshape(-1, a.shape[-1]).max(dim=0).values
    rms = float(a.double().square().mean().sqrt()) if a.is_floating_point() else 0.0
    floor = relative_floor * rms
    above = (diff > floor).nonzero().flatten()
    first = int(above.min()) if above.numel() else a.shape[-1]
    moved = (diff > 0).nonzero().flatten()
    # the threshold in float32 ulps of the RMS it is a fraction of: 1e-4 of it is hundreds of ulps, not rounding
    ulps = floor / float(float32_ulp(rms)) if a.is_floating_point() and rms > 0 else math.nan
    return {"first_diff_from_end": a.shape[-1] - first,
            "any_diff_from_end": a.shape[-1] - int(moved.min()) if moved.numel() else 0,
            "threshold": floor, "threshold_ulps": ulps,
            "bit_identical_before": bool((diff[:first] == 0).all()),
            # codes are indices: two codes differ or not, and how far apart their numbers are means nothing
            "max_diff_before": (float(diff[:first].max()) if first else 0.0) if a.is_floating_point() else math.nan,
            "max_diff_in_tail": (float(diff[first:].max()) if first < a.shape[-1] else 0.0)
            if a.is_floating_point() else math.nan}


@dataclass(frozen=True)
class ShorterClip:
    """The shorter clip's own float32 runs at batch size 1, alone and zero-padded to the batch's length: what the
    audio's float64 check and the repair read (`compare` keeps them; `shorter_clip` makes them alone)."""

    clip: torch.Tensor
    alone: dict
    padded: dict


def compare(model, clips: list[torch.Tensor], chunk_frames: int = CHUNK_FRAMES
            ) -> tuple[pd.DataFrame, dict, ShorterClip]:
    """Per clip and stage, two causes told apart: `padding` compares the clip alone with the clip
    zero-padded to the longest length, both at batch size 1 (same kernels, so only the padding can
    differ); `batch size` compares the padded clip alone with the same clip inside the batch. Clips longer
    than `chunk_frames` frames run in windows (each run in the same windows of the padded length where they
    are compared position by position). Also the shortest clip's two runs, kept for `float64_audio` and
    `repair`."""
    longest = max(c.shape[-1] for c in clips)
    padded = [torch.nn.functional.pad(c, (0, longest - c.shape[-1])) for c in clips]
    batched = _encode_decode(model, torch.cat(padded), chunk_frames)
    rows, curves = [], {}
    hop = int(np.prod(model.config.downsampling_ratios))
    shortest = min(range(len(clips)), key=lambda k: clips[k].shape[-1])  # the first, as shortest_clip
    for index, clip in enumerate(clips):
        alone = _encode_decode(model, clip, chunk_frames)
        padded_alone = _encode_decode(model, padded[index], chunk_frames)
        if index == shortest:
            kept = ShorterClip(clip, alone, padded_alone)
        for stage in STAGES:
            own = alone[stage][0]
            n = own.shape[-1]
            pairs = {"padding": (own, padded_alone[stage][0][..., :n]),
                     "batch size": (padded_alone[stage][0][..., :n], batched[stage][index][..., :n])}
            for cause, (a, b) in pairs.items():
                rows.append({"clip": index, "stage": stage, "cause": cause, "length": n,
                             "padded_by": longest - clip.shape[-1], **_tail(a, b),
                             "unit": "samples" if stage == "audio" else "frames", "hop": hop})
                curves[(index, stage, cause)] = (a.double() - b.double()).abs().reshape(-1, n).max(dim=0).values
    return pd.DataFrame(rows), curves, kept


@torch.no_grad()
def hop_drop(model, lengths: list[int], seed: int = 0, chunk_frames: int = CHUNK_FRAMES) -> pd.DataFrame:
    """Inputs that are not a multiple of the hop: how many samples come back."""
    hop = int(np.prod(model.config.downsampling_ratios))
    rows = []
    for n in lengths:
        audio = torch.randn(1, 1, n, generator=torch.Generator().manual_seed(seed)) * 0.1
        encoded = _encode_decode(model, audio, chunk_frames)
        rows.append({"input_samples": n, "hop": hop, "remainder": n % hop, "frames": encoded["codes"].shape[-1],
                     "output_samples": encoded["audio"].shape[-1], "dropped_samples": n - encoded["audio"].shape[-1]})
    return pd.DataFrame(rows)


@torch.no_grad()
def measured_decoder_reach(model64, frames: int, frame: int) -> dict[str, int]:
    """Output samples that change when one latent frame of a float64 decoder changes: how far a latent
    difference spreads into the decoded audio (left and right of the frame's own hop of samples)."""
    hidden = model64.config.hidden_size
    latent = torch.randn(1, hidden, frames, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    nudged = latent.clone()
    nudged[0, :, frame] += 1.0
    changed = (model64.decoder(latent) - model64.decoder(nudged))[0].abs().amax(dim=0) != 0
    touched = changed.nonzero().flatten()
    hop = int(np.prod(model64.config.downsampling_ratios))
    return {"frame": frame, "left_samples": frame * hop - int(touched.min()),
            "right_samples": int(touched.max()) - ((frame + 1) * hop - 1)}


def repair_span(model, frames: int) -> tuple[int, int]:
    """For a clip of `frames` latent frames: how many last frames the padding can reach (their receptive field
    reaches past the clip's end), and the sample from which `repair` runs the clip again (the encoder's left
    context before the first of them, in whole frames)."""
    hop = model.config.hop_length
    left, right = dac_chunks.encoder_reach(model)
    tail = math.ceil(right / hop) + 1
    return tail, max(0, (frames - tail) * hop - math.ceil(left / hop) * hop)


def shorter_clip(model, clip: torch.Tensor, padded_length: int, chunk_frames: int = CHUNK_FRAMES) -> ShorterClip:
    padded = torch.nn.functional.pad(clip, (0, padded_length - clip.shape[-1]))
    return ShorterClip(clip, _encode_decode(model, clip, chunk_frames), _encode_decode(model, padded, chunk_frames))


# float64's machine epsilon over float32's: a float64 decode rounds this much less than a float32 one of the same
# network, whatever the network amplifies
EPS_RATIO = float(torch.finfo(torch.float64).eps / torch.finfo(torch.float32).eps)
FLOAT64_MARGIN = 16.0  # the float64 rounding floor: this many times the float32 error scaled by EPS_RATIO


@dataclass(frozen=True)
class Float64Audio:
    """The shorter clip's two latents (alone, zero-padded) decoded again in float64: the samples at the end where
    their audio differs in value (above float64 rounding: `floor`), and before them the float32 decodes' difference
    against each one's own float32 error. Before `value_tail` the exact decodes agree, so a float32 difference
    there is rounding (the padded clip decodes a longer latent: convolutions of another length)."""

    value_tail: int
    floor: float
    float32_difference: float  # the largest float32 difference before value_tail
    float32_error: float  # the largest |float32 - float64| of either decode before value_tail
    rms: float

    @property
    def rounding(self) -> bool:
        """The float32 difference before the value tail is no more than the two decodes' own errors: rounding."""
        return self.float32_difference <= 2 * self.float32_error + self.floor


@torch.no_grad()
def float64_audio(model64, runs: ShorterClip, chunk_frames: int = CHUNK_FRAMES) -> Float64Audio:
    n = runs.alone["audio"].shape[-1]
    exact = [dac_chunks.decode(model64, run["latent"].double(), chunk_frames)[..., :n]
             for run in (runs.alone, runs.padded)]
    rounded = [run["audio"][..., :n].double() for run in (runs.alone, runs.padded)]

    def per_sample(a, b):
        return (a - b).abs().reshape(-1, n).amax(dim=0)

    error = torch.maximum(per_sample(rounded[0], exact[0]), per_sample(rounded[1], exact[1]))
    floor = FLOAT64_MARGIN * EPS_RATIO * float(error.max())
    apart = (per_sample(*exact) > floor).nonzero().flatten()
    first = int(apart.min()) if apart.numel() else n
    return Float64Audio(value_tail=n - first, floor=floor,
                        float32_difference=float(per_sample(*rounded)[:first].max()) if first else 0.0,
                        float32_error=float(error[:first].max()) if first else 0.0,
                        rms=float(exact[0].square().mean().sqrt()))


def repair(model, runs: ShorterClip, chunk_frames: int = CHUNK_FRAMES) -> dict:
    """What a user does to get a clip's own results from a batch, measured: keep the batch's frames that the
    padding cannot reach, recompute the last ones from the clip's own samples alone (with the encoder's left
    context), splice, and compare with the clip run alone. The batch here is the clip zero-padded (the padding
    cause; the batch size alone is measured apart)."""
    alone, batched, clip = runs.alone, runs.padded, runs.clip
    frames = alone["latent"].shape[-1]
    tail, start = repair_span(model, frames)
    again = _encode_decode(model, clip[..., start:], chunk_frames)
    spliced = {stage: torch.cat([batched[stage][..., :frames - tail], again[stage][..., -tail:]], dim=-1)
               for stage in ("latent", "codes")}
    latent = (spliced["latent"].double() - alone["latent"].double()).abs()
    codes = (spliced["codes"] != alone["codes"]).any(dim=1)[0]
    unrepaired = (batched["codes"][..., :frames] != alone["codes"]).any(dim=1)[0]
    return {"tail_frames": tail, "samples_rerun": clip.shape[-1] - start, "frames": frames,
            "code_frames_before": int(unrepaired.sum()), "code_frames_after": int(codes.sum()),
            "max_latent_diff_after": float(latent.max()),
            "latent_rms": float(alone["latent"].double().square().mean().sqrt())}


def decoder_windows_differ_from(model, samples: int, padded_samples: int,
                                chunk_frames: int = CHUNK_FRAMES) -> int | None:
    """The first decoded sample from which the clip alone and the clip zero-padded to `padded_samples` are decoded
    in windows of different spans (the clip's last window, or the one before it when the last is shorter than the
    context): from there the two decodes are convolutions of other lengths, whose float32 rounding may differ
    (the kernels choose their algorithm by length) even where their latents are bit-identical. Before it both
    run the same windows on the same latents. None when both decode whole: their lengths differ from the start."""
    hop = int(np.prod(model.config.downsampling_ratios))
    alone = dac_chunks.decoder_windows(model, dac_chunks.encoded_frames(model, samples), chunk_frames)
    padded = dac_chunks.decoder_windows(model, dac_chunks.encoded_frames(model, padded_samples), chunk_frames)
    if len(alone) == 1 and len(padded) == 1:
        return None
    for mine, theirs in zip(alone, padded, strict=False):
        if mine != theirs:
            return mine.keep_start * hop
    return None  # the same plan: the clip was not padded


def above_threshold(rows: pd.DataFrame, curve, stage: str = "latent") -> int | None:
    """How many positions differ by more than the threshold (None where the table or the curve lacks it): fewer
    than the tail from the first such position, which may hold positions below it."""
    if curve is None or "threshold" not in rows.columns:
        return None
    return int((curve.double() > float(rows.loc[stage, "threshold"])).sum())


def any_tail(rows: pd.DataFrame, stage: str = "latent") -> int:
    """How many positions at the end differ at all (by any amount); the threshold's tail where not measured."""
    column = "any_diff_from_end" if "any_diff_from_end" in rows.columns else "first_diff_from_end"
    return int(rows.loc[stage, column])


def clip_rows(table: pd.DataFrame, clip: int, cause: str) -> pd.DataFrame:
    return table[(table["clip"] == clip) & (table["cause"] == cause)].set_index("stage")


class PaddingReach(Enum):
    """The reviewers' question for the shorter clip: does the padding change it, and does the encoder's receptive
    field explain the frames it changes?"""

    UNCHANGED = "padding changes no latent frame"
    WITHIN = "every changed frame lies within the last frames whose receptive field reaches past the clip's end"
    ROUNDING_ONLY = "no frame above the rounding floor; below it, differences beyond those frames too"
    # above the rounding floor only within them; below it beyond them: the padded input is longer, and its
    # convolutions may sum in another order (on some CPUs from the first frame on)
    ROUNDING_BEYOND = "frames above the rounding floor lie within them; beyond them, differences below the floor only"
    BEYOND = "frames above the rounding floor lie beyond them: the receptive field does not explain them"


def padding_reach(pad: pd.DataFrame, one_side_frames: int) -> PaddingReach:
    """`pad`: the shorter clip's padding rows (`clip_rows`)."""
    tail, moved = int(pad.loc["latent", "first_diff_from_end"]), any_tail(pad)
    if tail == 0 and moved == 0:
        return PaddingReach.UNCHANGED
    if max(tail, moved) <= one_side_frames + 1:
        return PaddingReach.WITHIN
    if tail == 0:
        return PaddingReach.ROUNDING_ONLY
    return PaddingReach.ROUNDING_BEYOND if tail <= one_side_frames + 1 else PaddingReach.BEYOND


UNITS = {"latent": "frames", "codes": "frames", "audio": "samples"}


def reach_table(field: dict, measured: dict) -> pd.DataFrame:
    """The encoder's context per frame, from the architecture and from a float64 gradient."""
    return pd.DataFrame([{"from": "architecture", "left_samples": field["left_samples"],
                          "right_samples": field["right_samples"]},
                         {"from": "float64 gradient", "left_samples": measured["left_samples"],
                          "right_samples": measured["right_samples"]}])


def reach_regions(table: pd.DataFrame, curves: dict, shortest: int, one_side_frames: int) -> pd.DataFrame:
    """The shorter clip's latent and code frames by where they lie: outside the padding's reach (before the last
    `one_side_frames`) and inside it, each with how many differ at all, how many above the threshold, and the
    largest difference: the table a sentence about "outside the reach" reads."""
    pad = clip_rows(table, shortest, "padding")
    rows = []
    for stage in ("latent", "codes"):
        curve = curves[(shortest, stage, "padding")].double()
        n = len(curve)
        floor = float(pad.loc[stage, "threshold"]) if "threshold" in pad.columns else 0.0
        for region, part in (("outside the reach", curve[: max(n - one_side_frames, 0)]),
                             ("within the reach", curve[max(n - one_side_frames, 0):])):
            # two code indices are equal or not: their difference is no size (981 for a code changed from 3)
            largest = float("nan") if stage == "codes" else float(part.max()) if part.numel() else 0.0
            rows.append({"stage": stage, "region": region, "frames": int(part.numel()),
                         "differing": int((part > 0).sum()), "above_threshold": int((part > floor).sum()),
                         "largest": largest})
    return pd.DataFrame(rows)


def shortest_clip(clips) -> int:
    return int(pd.Series([c.shape[-1] for c in clips]).idxmin())


def with_code_frames(table: pd.DataFrame, curves: dict) -> pd.DataFrame:
    """The comparison table with, for the codes rows, how many code frames differ (not a difference of indices)."""
    frames = {key: int((curve > 0).sum()) for key, curve in curves.items() if key[1] == "codes"}
    counts = [frames.get((r.clip, r.stage, r.cause)) for r in table.itertuples()]
    return table.assign(changed=pd.array(counts, dtype="Int64"))  # whole frames; empty where no codes


def padding_tail(table: pd.DataFrame, shortest: int, stage: str) -> int:
    return int(clip_rows(table, shortest, "padding").loc[stage, "first_diff_from_end"])


def odd_lengths(seconds: float, sampling_rate: int, hop: int, extras) -> list[int]:
    """Lengths a few samples past a multiple of the hop, near `seconds` of audio."""
    return [int(seconds * sampling_rate) // hop * hop + int(extra) for extra in extras]


def summary_values(table: pd.DataFrame, curves: dict, shortest: int, one_side_frames: int,
                   dropped: pd.DataFrame) -> dict:
    """summary.json's figures for the index and later runs."""
    size_codes = int((curves[(shortest, "codes", "batch size")] > 0).sum())
    return {"receptive_field_frames": one_side_frames,
            "padding_tail_latent_frames": padding_tail(table, shortest, "latent"),
            "padding_changed_latent_frames": any_tail(clip_rows(table, shortest, "padding")),
            "padding_tail_code_frames": padding_tail(table, shortest, "codes"),
            "batch_size_code_frames": size_codes, "max_dropped_samples": int(dropped.dropped_samples.max())}
