"""Does batching change the non-padded part of a shorter clip? Alone against padded in a batch, frame by
frame from the end, set against the encoder's receptive field (from the architecture and from a float64
gradient), and the cause (padding or batch size) told apart."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import torch

STAGES = ("latent", "codes", "audio")


def receptive_field(config) -> dict[str, int]:
    """Samples of context on each side of an encoder frame, from the layer sizes (symmetric padding)."""
    span, jump = 6, 1  # conv1: kernel 7
    for stride in config.downsampling_ratios:
        span += sum(6 * d for d in (1, 3, 9)) * jump  # three residual units, kernel 7, dilations 1, 3, 9
        span += (2 * stride - 1) * jump  # the strided conv, kernel 2 * stride
        jump *= stride
    span += 2 * jump  # conv2: kernel 3
    return {"span_samples": span, "one_side_samples": span // 2, "hop": jump,
            "one_side_frames": math.ceil((span // 2) / jump)}


def measured_receptive_field(model64, n_samples: int, frame: int) -> dict[str, int]:
    """Input samples whose float64 gradient on one latent frame is non-zero: the context it really sees."""
    x = torch.zeros(1, 1, n_samples, dtype=torch.float64, requires_grad=True)
    noise = torch.randn(1, 1, n_samples, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    latent = model64.encoder(x + 0.1 * noise)
    latent[0, :, frame].sum().backward()
    touched = (x.grad[0, 0] != 0).nonzero().flatten()
    hop = int(np.prod(model64.config.downsampling_ratios))
    centre = frame * hop
    return {"frame": frame, "first_sample": int(touched.min()), "last_sample": int(touched.max()),
            "left_samples": centre - int(touched.min()), "right_samples": int(touched.max()) - centre}


@torch.no_grad()
def _encode_decode(model, audio: torch.Tensor) -> dict[str, torch.Tensor]:
    encoded = model.encode(audio)
    return {"latent": encoded.quantized_representation, "codes": encoded.audio_codes,
            "audio": model.decode(encoded.quantized_representation).audio_values}


def _tail(a: torch.Tensor, b: torch.Tensor, relative_floor: float = 1e-4) -> dict:
    """How many positions at the end differ by more than rounding noise (`relative_floor` times the RMS of
    `a`; exact inequality for codes), whether everything before that tail is bit-identical, and the largest
    difference before and inside the tail."""
    diff = (a.double() - b.double()).abs().reshape(-1, a.shape[-1]).max(dim=0).values
    floor = 0.0 if not a.is_floating_point() else relative_floor * float(a.double().square().mean().sqrt())
    above = (diff > floor).nonzero().flatten()
    first = int(above.min()) if above.numel() else a.shape[-1]
    return {"first_diff_from_end": a.shape[-1] - first,
            "bit_identical_before": bool((diff[:first] == 0).all()),
            "max_diff_before": float(diff[:first].max()) if first else 0.0,
            "max_diff_in_tail": float(diff[first:].max()) if first < a.shape[-1] else 0.0}


def compare(model, clips: list[torch.Tensor]) -> tuple[pd.DataFrame, dict]:
    """Per clip and stage, two causes told apart: `padding` compares the clip alone with the clip
    zero-padded to the longest length, both at batch size 1 (same kernels, so only the padding can
    differ); `batch size` compares the padded clip alone with the same clip inside the batch."""
    longest = max(c.shape[-1] for c in clips)
    padded = [torch.nn.functional.pad(c, (0, longest - c.shape[-1])) for c in clips]
    batched = _encode_decode(model, torch.cat(padded))
    rows, curves = [], {}
    hop = int(np.prod(model.config.downsampling_ratios))
    for index, clip in enumerate(clips):
        alone, padded_alone = _encode_decode(model, clip), _encode_decode(model, padded[index])
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
    return pd.DataFrame(rows), curves


@torch.no_grad()
def hop_drop(model, lengths: list[int], seed: int = 0) -> pd.DataFrame:
    """Inputs that are not a multiple of the hop: how many samples come back."""
    hop = int(np.prod(model.config.downsampling_ratios))
    rows = []
    for n in lengths:
        audio = torch.randn(1, 1, n, generator=torch.Generator().manual_seed(seed)) * 0.1
        encoded = model.encode(audio)
        out = model.decode(encoded.quantized_representation).audio_values
        rows.append({"input_samples": n, "hop": hop, "remainder": n % hop, "frames": encoded.audio_codes.shape[-1],
                     "output_samples": out.shape[-1], "dropped_samples": n - out.shape[-1]})
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


def changed_frames(curve: torch.Tensor) -> int:
    """How many positions differ at all (for codes: how many code frames differ, whatever the indices)."""
    return int((curve > 0).sum())


from exactness.studies.dac_batching_findings import findings  # noqa: E402,F401  (the report's claims)
