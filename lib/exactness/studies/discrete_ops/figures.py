"""Figures of the discrete-ops study."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from exactness.palette import colour
from exactness.studies.discrete_ops import verdicts as v

TIE_POSITION = 0.1  # where an exact tie (0 ulps) is drawn on the log axis


def margin_distribution(screen: pd.DataFrame, margins: pd.DataFrame, verdicts: list[v.ClassVerdict]):
    """Per class, each screened seed's smallest margin over its counted ops (ulps of the compared values); exact
    ties at the left edge, seeds where ORT chose differently as red crosses; a black bar at the class's reach
    (how close to a tie its measured noise can flip a choice)."""
    per_seed = screen.groupby(["model", "seed"], as_index=False).min_margin_ulps.min() if len(screen) else screen
    flipped = set(zip(margins[margins.flipped > 0].model, margins[margins.flipped > 0].seed, strict=True)) \
        if len(margins) else set()
    shown = [x for x in verdicts if x.screened]
    fig, ax = plt.subplots(figsize=(11, 0.55 * max(len(shown), 2) + 1.4))
    for row, verdict in enumerate(shown):
        mine = per_seed[per_seed.model == verdict.model]
        x = mine.min_margin_ulps.fillna(np.inf).clip(lower=TIE_POSITION).to_numpy()
        jitter = np.random.default_rng(row).uniform(-0.28, 0.28, len(x))  # fixed: the same figure every run
        hit = np.array([(verdict.model, s) in flipped for s in mine.seed], dtype=bool)
        ax.scatter(x[~hit], row + jitter[~hit], s=8, color=colour(verdict.model), alpha=0.5, linewidths=0)
        ax.scatter(x[hit], row + jitter[hit], s=22, color="tab:red", marker="x", linewidths=1.2)
        ax.vlines(max(verdict.reach_ulps, TIE_POSITION), row - 0.42, row + 0.42, color="black", linewidth=2)
    ax.scatter([], [], s=22, color="tab:red", marker="x", label="ORT chose differently")
    ax.vlines([], 0, 1, color="black", linewidth=2, label="reach of the measured noise")
    ax.set(xscale="log", yticks=range(len(shown)), yticklabels=[x.model for x in shown], ylim=(-0.6, len(shown) - 0.4),
           xlabel="smallest margin per seed, ulps of the compared values (exact ties at 0.1)")
    ax.set_title("How close each seed's discrete choices come to a tie")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return fig


def failure_rates(verdicts: list[v.ClassVerdict]):
    """Per class, export-test failures per 40,000 seeds (log axis; none drawn at 0.1): a solid bar is Wilson's 95%
    interval; a dashed one a range whose upper end counts every unchecked seed within reach as failing (a worst
    case, not a confidence bound), so no bar is read as the other kind."""
    shown = sorted([x for x in verdicts if x.failures is not None and x.failures.seeds],
                   key=lambda x: x.failures.per)
    fig, ax = plt.subplots(figsize=(9, 0.42 * max(len(shown), 2) + 1.3))
    for row, verdict in enumerate(shown):
        f = verdict.failures
        low, high, point = (max(value, 0.1) for value in (f.low, f.high, f.per))
        ax.hlines(row, low, high, color=colour(verdict.model), linewidth=4 if not f.worst_case else 2, alpha=0.6,
                  linestyles="dashed" if f.worst_case else "solid")
        ax.scatter([point], [row], color=colour(verdict.model), edgecolor="black", zorder=3)
    ax.hlines([], 0, 1, color="grey", linewidth=4, label="95% interval (Wilson)")
    ax.hlines([], 0, 1, color="grey", linewidth=2, linestyles="dashed",
              label="found to worst case (unchecked seeds within reach all failing)")
    ax.set(xscale="log", yticks=range(len(shown)), yticklabels=[x.model for x in shown],
           xlabel=f"export-test failures per {v.PER:,} seeds (0 drawn at 0.1)", xlim=(0.05, v.PER * 2))
    ax.set_title("How often each class fails the export test's rule")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return fig
