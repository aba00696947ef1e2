"""Figures of the DAC studies."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns


def error_against_depth(propagation: pd.DataFrame, against: str):
    shown = propagation[(propagation.against == against) & (propagation.max_abs_err > 0)]
    fig, axes = plt.subplots(1, 2, figsize=(13, 4), sharex=True)
    sns.lineplot(data=shown, x="depth", y="max_abs_err", hue="variant", style="init", marker="o", ax=axes[0])
    sns.lineplot(data=shown, x="depth", y="rel_err", hue="variant", style="init", marker="o", ax=axes[1], legend=False)
    axes[0].set(yscale="log", title=f"max |error| against {against}", ylabel="max abs error")
    axes[1].set(yscale="log", title="relative to the activation's RMS", ylabel="max error / RMS")
    boundary = shown[shown.layer == "decoder.Conv1"].depth
    for ax in axes:
        if len(boundary):
            ax.axvline(boundary.iloc[0] - 0.5, color="grey", linestyle=":")
        ax.set_xlabel("layer (encoder, then decoder fed identical codes)")
    return fig
