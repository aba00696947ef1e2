"""Figures of the DAC batching study."""

from __future__ import annotations

import matplotlib.pyplot as plt


def batching_differences(curves: dict, clip: int, stage: str, one_side: int, unit: str,
                         windows_from: int | None = None):
    """The difference along the shorter clip; a long clip (over eight receptive fields) gets a second panel on its
    last four, where the padding acts. `windows_from`: where the decoding windows of the two runs start to differ
    (shaded grey)."""
    values = {cause: curves[(clip, stage, cause)].clamp(min=1e-12).numpy() for cause in ("padding", "batch size")}
    end = len(values["padding"])
    zoom = 4 * one_side if end > 8 * one_side else None
    fig, axes = plt.subplots(1, 2 if zoom else 1, figsize=(14 if zoom else 10, 3.5), squeeze=False,
                             gridspec_kw={"width_ratios": [1, 1]} if zoom else None)
    for ax, start in zip(axes[0], (0, end - zoom) if zoom else (0,), strict=True):
        for cause, curve in values.items():
            ax.plot(range(start, end), curve[start:], label=cause, linewidth=1)
        ax.axvspan(end - one_side, end, color="orange", alpha=0.2, label="receptive field reaching the padding")
        if windows_from is not None:
            ax.axvspan(windows_from, end, color="grey", alpha=0.15,
                       label="decoded in a window of another span (rounding)")
        ax.set(yscale="log", xlabel=f"position in the shorter clip ({unit})", ylabel="|alone - other| (floor 1e-12)",
               xlim=(start, end))
    axes[0][0].set_title(f"Clip {clip}, {stage}: where the padded and batched runs differ")
    if zoom:
        axes[0][1].set_title(f"its last {zoom:,} {unit}")
    axes[0][-1].legend(bbox_to_anchor=(1.01, 1), loc="upper left", fontsize=8)
    fig.tight_layout()
    return fig
