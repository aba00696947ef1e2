"""Figures of the ulp-noise study."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns


def noise_against_depth(profile: pd.DataFrame):
    fig, ax = plt.subplots(figsize=(10, 4))
    shown = profile[profile.max_abs_diff > 0]
    ax.plot(shown.depth, shown.max_abs_diff, marker="o", markersize=3, label="max |eager - ORT| (median of draws)")
    ax.plot(shown.depth, shown.rel_rms, marker=".", markersize=3, label="max |diff| / RMS of the tensor")
    for row in shown.itertuples():
        if row.tensor.endswith(("layer_norm", "feature_extractor", "weight_proj")) or row.depth == shown.depth.max():
            ax.annotate(row.tensor.split(".")[-1], (row.depth, row.max_abs_diff), fontsize=7, rotation=30)
    ax.set(yscale="log", xlabel="depth (graph order of the module's output)", ylabel="difference",
           title="Noise along the network (tensors that match exactly are not drawn)")
    ax.legend(fontsize=8)
    return fig


def ulp_histograms(noise: pd.DataFrame):
    named = noise[noise.label != ""]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.5), sharey=True)
    for ax, (label, group) in zip(axes, named.groupby("label"), strict=False):
        ax.hist(group.max_ulp.clip(lower=1), bins=np.logspace(0, np.log10(max(group.max_ulp.max(), 10)), 30),
                label="max ulp", alpha=0.6)
        ax.hist(group.median_ulp.clip(lower=0.5), bins=np.logspace(-0.3, np.log10(max(group.max_ulp.max(), 10)), 30),
                label="median ulp", alpha=0.6)
        ax.set(xscale="log", title=label, xlabel="ulps per draw")
    axes[0].set_ylabel("draws")
    axes[0].legend(fontsize=8)
    return fig


def settings_comparison(settings: pd.DataFrame):
    table = settings.groupby(["setting", "value", "label"], as_index=False).max_abs_diff.median()
    table["setting"] = table.setting + "=" + table.value
    fig, ax = plt.subplots(figsize=(9, 4))
    sns.barplot(data=table, x="max_abs_diff", y="setting", hue="label", ax=ax)
    ax.set(xscale="log", xlabel="median max |eager - ORT|", ylabel="", title="Noise under each setting")
    return fig
