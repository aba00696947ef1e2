"""Figures of the discrete-ops study."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

TIE_POSITION = 0.1  # where an exact tie (0 ulps) is drawn on the log axis


def margin_distribution(margins: pd.DataFrame, live: set[tuple[str, str]], noise: dict[str, float]):
    """Per class, each seed's smallest margin (ulps of the compared values) of every discrete op on an
    output path (`live`: (class, node) pairs); exact ties at the left edge, flipped calls in red; a black bar
    at the class's measured read noise (`noise`: class -> ulps, the largest eager-ORT difference of what its
    verified ops read; none where no call was verified)."""
    in_live = [key in live for key in zip(margins.model, margins.node, strict=True)]
    shown = margins[pd.Series(in_live, index=margins.index, dtype=bool) & margins.min_margin_ulps.notna()]
    classes = sorted(shown.model.unique())
    fig, ax = plt.subplots(figsize=(10, 0.6 * max(len(classes), 2) + 1.2))
    for row, model in enumerate(classes):
        mine = shown[shown.model == model]
        x = mine.min_margin_ulps.clip(lower=TIE_POSITION).to_numpy()
        jitter = np.random.default_rng(row).uniform(-0.25, 0.25, len(x))  # fixed: same figure every run
        flipped = mine.flipped.fillna(0).to_numpy() > 0
        ax.scatter(x[~flipped], row + jitter[~flipped], s=10, color="tab:blue", alpha=0.6)
        ax.scatter(x[flipped], row + jitter[flipped], s=14, color="tab:red", alpha=0.8)
        bound = noise.get(model, float("nan"))
        if not math.isnan(bound):
            ax.vlines(max(bound, TIE_POSITION), row - 0.4, row + 0.4, color="black", linewidth=2)
            ax.annotate(f"noise {bound:.3g}", (max(bound, TIE_POSITION), row + 0.4), fontsize=7,
                        xytext=(3, -2), textcoords="offset points", va="top")
    ax.set(xscale="log", yticks=range(len(classes)), yticklabels=classes,
           xlabel="smallest margin per seed and op, ulps of the values compared (exact ties drawn at 0.1)",
           title="Closeness to a tie (red: ORT chose differently; black bar: measured noise)")
    fig.tight_layout()
    return fig


def flip_rates(verdicts: pd.DataFrame):
    """Per class, the fraction of seeds with any flip and its 95% interval."""
    shown = verdicts[verdicts.seeds.fillna(0) > 0].sort_values("flip_rate")
    fig, ax = plt.subplots(figsize=(8, 0.45 * max(len(shown), 2) + 1.2))
    y = np.arange(len(shown))
    ax.hlines(y, shown.rate_low, shown.rate_high, color="tab:blue", linewidth=3, alpha=0.5)
    ax.scatter(shown.flip_rate, y, color="tab:red", zorder=3)
    ax.set(yticks=y, yticklabels=shown.model, xlim=(-0.02, 1.02), xlabel="seeds with a flipped choice (fraction)",
           title="Flip rate by class with its 95% Wilson interval")
    fig.tight_layout()
    return fig
