"""Figures of the ulp-noise study."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd


def _is_landmark(tensor: str) -> bool:
    return tensor.endswith(("layer_norm", "feature_extractor", "weight_proj"))


def noise_against_depth(profile: pd.DataFrame, scaled: pd.DataFrame):
    """Absolute noise (top) and noise in ulps (bottom: of the tensor's RMS, and element-wise) along the depth,
    on two axes: they are different quantities. `scaled`: `ulp_noise.findings.scale_profile(noise)`."""
    shown = profile[profile.max_abs_diff > 0]
    in_ulps = scaled[scaled.max_abs_diff > 0]
    fig, (absolute, relative) = plt.subplots(2, 1, figsize=(10, 6.5), sharex=True)
    absolute.plot(shown.depth, shown.max_abs_diff, marker="o", markersize=3, color="tab:blue")
    relative.plot(in_ulps.depth, in_ulps.rms_ulps, marker=".", markersize=3, color="tab:orange",
                  label="max |diff| in ulps of the tensor's RMS")
    relative.plot(in_ulps.depth, in_ulps.p99_ulp.clip(lower=0.5), marker=".", markersize=3, color="tab:red",
                  alpha=0.6, label="99th-percentile element, element-wise ulps")
    relative.plot(in_ulps.depth, in_ulps.median_ulp.clip(lower=0.5), marker=".", markersize=3, color="tab:green",
                  alpha=0.6, label="median element, element-wise ulps")
    relative.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    for row in shown.itertuples():
        if _is_landmark(row.tensor) or row.depth == shown.depth.max():
            absolute.annotate(row.tensor.split(".")[-1], (row.depth, row.max_abs_diff), fontsize=7, rotation=30)
    absolute.set(yscale="log", ylabel="max |eager − ORT|\n(absolute, median of draws)",
                 title="Noise along the network (tensors that match exactly are not drawn)")
    relative.set(yscale="log", ylabel="ulps (median of draws)",
                 xlabel="depth (graph order of the module's output)")
    fig.tight_layout()
    return fig


def ulp_histograms(noise: pd.DataFrame):
    named = noise[noise.label != ""]
    labels = sorted(named.label.unique())
    fig, axes = plt.subplots(1, max(len(labels), 1), figsize=(4 * max(len(labels), 1), 3.5), sharey=True,
                             squeeze=False)
    axes = axes[0]
    for ax, label in zip(axes, labels, strict=False):
        group = named[named.label == label]
        top = np.log10(max(group.max_ulp.max(), 10))
        ax.hist(group.max_ulp.clip(lower=1), bins=np.logspace(0, top, 30), label="worst element", alpha=0.6)
        ax.hist(group.median_ulp.clip(lower=0.5), bins=np.logspace(-0.3, top, 30), label="median element", alpha=0.6)
        ax.set(xscale="log", title=label, xlabel="ulps per draw (log scale)")
    axes[0].set_ylabel("draws")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="upper center", ncol=2, bbox_to_anchor=(0.5, 1.02))
    fig.tight_layout(rect=(0, 0, 1, 0.92))
    return fig


def settings_comparison(settings: pd.DataFrame):
    """One dot per setting and named tensor on a log axis (bars would start at an arbitrary left edge there)."""
    table = settings.groupby(["setting", "value", "label"], as_index=False).max_abs_diff.median()
    table["setting"] = table.setting + "=" + table.value
    names = sorted(table.setting.unique())
    labels = sorted(table.label.unique())
    fig, ax = plt.subplots(figsize=(9, 0.4 * len(names) + 1.5))
    for offset, label in zip(np.linspace(-0.2, 0.2, len(labels)), labels, strict=True):
        rows = table[table.label == label]
        ax.plot(rows.max_abs_diff, [names.index(n) + offset for n in rows.setting], "o", label=label)
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()
    ax.grid(True, axis="x", which="both", alpha=0.3)
    ax.set(xscale="log", xlabel="median max |eager − ORT| (absolute, log scale)", ylabel="",
           title="Noise under each setting")
    ax.legend(title="tensor", loc="upper left", bbox_to_anchor=(1.01, 1.0))  # outside: never over a dot
    fig.tight_layout()
    return fig
