"""Figures of the DAC propagation study."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns


def _layer_ticks(ax, shown: pd.DataFrame) -> None:
    """The seed's layer names (Conv1, Block0 ... Snake1, Conv2) on the main path, encoder then decoder."""
    main = shown[shown.role == "main"].drop_duplicates("depth").sort_values("depth")
    ax.set_xticks(main.depth.tolist(), [layer.replace("encoder.", "enc ").replace("decoder.", "dec ")
                                        for layer in main.layer], rotation=60, ha="right")


def error_against_depth(propagation: pd.DataFrame, against: str):
    """Three panels on one layer axis: absolute error, error relative to the activation's RMS, and the
    activation's RMS itself (absolute and relative quantities never share an axis)."""
    shown = propagation[(propagation.against == against) & (propagation.max_abs_err > 0)]
    fig, axes = plt.subplots(3, 1, figsize=(12, 10), sharex=True)
    panels = [("max_abs_err", "max |error| (absolute)"), ("rel_err", "max |error| / activation RMS"),
              ("act_rms", "activation RMS (absolute)")]
    for ax, (column, label) in zip(axes, panels, strict=True):
        sns.lineplot(data=shown, x="depth", y=column, hue="variant", style="init", marker="o", ax=ax,
                     legend=ax is axes[0])
        ax.set(yscale="log", ylabel=label, xlabel="")
        boundary = shown[shown.layer == "decoder.Conv1"].depth
        if len(boundary):
            ax.axvline(boundary.iloc[0] - 0.5, color="grey", linestyle=":")
    axes[0].set_title(f"Error against {against}, layer by layer (dotted line: the decoder starts from identical codes)")
    axes[0].legend(bbox_to_anchor=(1.01, 1), loc="upper left", fontsize=8)
    _layer_ticks(axes[-1], shown)
    axes[-1].set_xlabel("layer (main path; the points between are the blocks' residual units)")
    fig.tight_layout()
    return fig
