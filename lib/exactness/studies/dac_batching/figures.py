"""Figures of the DAC batching study."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np

POINTS = 240  # positions drawn per panel at most: a longer curve is drawn as its largest value per bin
COLOURS = {"padding": "#1f77b4", "batch size": "#ff7f0e"}


def bin_width(positions: int, points: int = POINTS) -> int:
    return max(1, math.ceil(positions / points))


def panels(length: int, one_side: int) -> list[tuple[int, int]]:
    """(first position, bin width) of each panel: the whole clip, and its last four reaches when it is long."""
    starts = (0, length - 4 * one_side) if length > 8 * one_side else (0,)
    return [(start, bin_width(length - start)) for start in starts]


def envelope(curve: np.ndarray, start: int, end: int, points: int = POINTS) -> tuple[np.ndarray, np.ndarray, int]:
    """The largest value of `curve[start:end]` in bins of `width` positions (at the bins' first positions), and
    the width: a difference that alternates between exact zeros and rounding every other sample is a wall of
    colour when every sample is drawn, and its upper edge when each bin keeps its largest value."""
    width = bin_width(end - start, points)
    part = curve[start:end]
    pad = (-len(part)) % width
    tops = np.concatenate([part, np.full(pad, part.min() if len(part) else 0.0)]).reshape(-1, width).max(axis=1)
    return np.arange(start, end, width), tops, width


def batching_differences(curves: dict, clip: int, stage: str, one_side: int, unit: str,
                         windows_from: int | None = None, reach_label: str = "receptive field reaching the padding"):
    """The difference along the shorter clip; a long clip (over eight receptive fields) gets a second panel on its
    last four, where the padding acts. `one_side`: how far from the end the padding can change this stage
    (shaded, `reach_label`); `windows_from`: where the decoding windows of the two runs start to differ
    (shaded grey)."""
    values = {cause: curves[(clip, stage, cause)].clamp(min=1e-12).numpy() for cause in ("padding", "batch size")}
    end = len(values["padding"])
    shown = panels(end, one_side)
    zoom = end - shown[1][0] if len(shown) > 1 else None
    fig, axes = plt.subplots(1, len(shown), figsize=(14 if zoom else 10, 3.5), squeeze=False,
                             gridspec_kw={"width_ratios": [1, 1]} if zoom else None)
    for ax, (start, _) in zip(axes[0], shown, strict=True):
        for cause, curve in values.items():
            x, y, width = envelope(curve, start, end)
            ax.step(x, y, where="post", label=cause, linewidth=1.2, color=COLOURS[cause])
        # a band in no line's colour: a line drawn over a band of its own hue disappears into it
        ax.axvspan(end - one_side, end, color="#9575cd", alpha=0.15, label=reach_label)
        if windows_from is not None:
            ax.axvspan(windows_from, end, color="grey", alpha=0.15,
                       label="decoded in a window of another span (rounding)")
        per = f", largest per {width} {unit}" if width > 1 else ""
        ax.set(yscale="log", xlabel=f"position in the shorter clip ({unit})",
               ylabel=f"|alone - other|{per}\n(floor 1e-12)", xlim=(start, end))
    axes[0][0].set_title(f"Clip {clip}, {stage}: where the padded and batched runs differ")
    if zoom:
        axes[0][1].set_title(f"its last {zoom:,} {unit}")
    axes[0][-1].legend(bbox_to_anchor=(1.01, 1), loc="upper left", fontsize=8)
    fig.tight_layout()
    return fig
