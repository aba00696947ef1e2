"""Figures of the ulp-noise study."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

MIN_BAND = 6  # module outputs a block needs to keep a band (and a label) of its own; smaller ones merge


def _block_key(path: str, base: str) -> tuple[str, ...]:
    """The block a module output belongs to: its first part below the model's own prefix, or that part with
    its numbered child ("encoder", "layers", "0") when the child is a repeated layer."""
    parts = path.split(".")
    if parts[0] == base and len(parts) > 1:
        parts = parts[1:]
    return tuple(parts[:3]) if len(parts) >= 3 and parts[2].isdigit() else tuple(parts[:1])


def _name(key: tuple[str, ...]) -> str:
    return " ".join((key[0], key[1].rstrip("s"), key[2])) if len(key) == 3 else key[0]


def blocks(tensors: list[str], depths: list[int]) -> list[tuple[str, int, int]]:
    """(label, first depth, last depth) of each run of module outputs in one block, in graph order. A run of
    fewer than MIN_BAND outputs merges into its neighbour of the same first part (a feature extractor's conv
    layers are one band), and neighbouring small runs into one band named by its first and last block; a band
    of fewer than 3 outputs keeps no label (no room for one)."""
    firsts = [t.split(".")[0] for t in tensors]
    base = max(set(firsts), key=firsts.count) if firsts else ""
    runs: list[dict] = []
    for tensor, depth in zip(tensors, depths, strict=True):
        key = _block_key(tensor, base)
        if runs and runs[-1]["keys"][-1] == key:
            runs[-1]["last"], runs[-1]["n"] = depth, runs[-1]["n"] + 1
        else:
            runs.append({"keys": [key], "first": depth, "last": depth, "n": 1})
    merged: list[dict] = []
    for run in runs:
        previous = merged[-1] if merged else None
        small = previous is not None and min(previous["n"], run["n"]) < MIN_BAND
        same = previous is not None and previous["keys"][-1][0] == run["keys"][0][0]
        layer = previous is not None and any(len(r["keys"]) == 1 and len(r["keys"][0]) == 3 and r["n"] >= MIN_BAND
                                             for r in (previous, run))  # a repeated layer keeps its band
        if small and ((same and not layer) or max(previous["n"], run["n"]) < MIN_BAND):
            previous["keys"] += run["keys"]
            previous["last"], previous["n"] = run["last"], previous["n"] + run["n"]
        else:
            merged.append(dict(run))
    bands = []
    for band in merged:
        names = list(dict.fromkeys(_name(k) if len(band["keys"]) == 1 else k[0] for k in band["keys"]
                                   if k != (base,))) or [base]  # the model's own output: no block of its own
        label = names[0] if len(names) == 1 else f"{names[0]} … {names[-1]}"
        bands.append((label if band["n"] >= 3 else "", band["first"], band["last"]))
    return bands


def _bands(axes, bands) -> None:
    """Alternate light bands, one per block, on every panel; the block names as the shared axis's labels,
    alternate ones a line lower so that neighbours never overlap."""
    for number, (_, first, last) in enumerate(bands):
        if number % 2:
            for ax in axes:
                ax.axvspan(first - 0.5, last + 0.5, color="#eeeeee", zorder=0, linewidth=0)
    named = [(label, (first + last) / 2) for label, first, last in bands if label]
    axes[-1].set_xticks([x for _, x in named], [("\n" if i % 2 else "") + label.replace("_", " ")
                                                 for i, (label, _) in enumerate(named)], fontsize=8)
    axes[-1].tick_params(axis="x", length=0)


def noise_against_depth(profile: pd.DataFrame, scaled: pd.DataFrame):
    """Absolute noise (top) and noise in ulps (bottom: of the tensor's RMS, and element-wise) along the depth,
    on two axes: they are different quantities. `scaled`: `ulp_noise.depth.scale_profile(noise)`. The
    network's blocks are bands with their names under the lower panel, never labels over the lines."""
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
    ordered = profile.sort_values("depth")
    _bands((absolute, relative), blocks(ordered.tensor.tolist(), ordered.depth.tolist()))
    absolute.set(yscale="log", ylabel="max |eager − ORT|\n(absolute, median of draws)",
                 title="Noise along the network (tensors that match exactly are not drawn)")
    relative.set(yscale="log", ylabel="ulps (median of draws)",
                 xlabel="module outputs in graph order, in the network's blocks (bands)")
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
    # a log axis shows what differs; a bit-identical (0) or non-finite (NaN) value has no place on one
    shown = np.isfinite(table.max_abs_diff) & (table.max_abs_diff > 0)
    log = bool(shown.any())
    fig, ax = plt.subplots(figsize=(9, 0.4 * len(names) + 1.5))
    for offset, label in zip(np.linspace(-0.2, 0.2, len(labels)), labels, strict=True):
        rows = table[(table.label == label) & (shown if log else np.isfinite(table.max_abs_diff))]
        ax.plot(rows.max_abs_diff, [names.index(n) + offset for n in rows.setting], "o", label=label)
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()
    ax.grid(True, axis="x", which="both", alpha=0.3)
    left_out = int((~shown).sum()) if log else int((~np.isfinite(table.max_abs_diff)).sum())
    ax.set(xscale="log" if log else "linear", ylabel="", title="Noise under each setting",
           xlabel="median max |eager − ORT| (absolute" + (", log scale" if log else "") + ")"
           + (f"; {left_out} at 0 or non-finite not drawn" if left_out else ""))
    ax.legend(title="tensor", loc="upper left", bbox_to_anchor=(1.01, 1.0))  # outside: never over a dot
    fig.tight_layout()
    return fig
