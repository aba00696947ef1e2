"""Figures of the discrete-ops study."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from exactness.engine import verdicts as v

TIE_POSITION = 0.1  # where an exact tie (0 ulps) is drawn on the log axis, below a one-ulp margin

# One colour per cause, as the answer tables' cause badges: a reader matches a row of a figure to its cause at a
# glance, and 21 classes need no 21 colours (the class is the row's label).
CAUSE_COLOURS = {v.Cause.DEFECT: "#c62828", v.Cause.RANDOM_DRAW: "#ef6c00", v.Cause.EXACT_TIE: "#f9a825",
                 v.Cause.NEAR_TIE: "#ef6c00", v.Cause.FLOAT_NOISE: "#2e7d32", v.Cause.NOTHING_REACHES: "#2e7d32",
                 v.Cause.NEVER_FLIPS: "#2e7d32", v.Cause.UNDECIDED: "#757575", v.Cause.NO_EXPORT: "#757575"}


def cause_colour(cause: v.Cause) -> str:
    return CAUSE_COLOURS.get(cause, "#757575")


def _cause_legend_below(fig, ax, causes, ncol: int) -> None:
    """One legend entry per cause shown (in the order of `v.Cause`) after the figure's own entries, under the axes
    in a strip of fixed height (a legend inside would cover a class's points), then the layout around it."""
    handles, labels = ax.get_legend_handles_labels()
    for cause in [c for c in v.Cause if c in set(causes)]:
        handles.append(plt.Line2D([], [], marker="o", linestyle="", color=cause_colour(cause)))
        labels.append(cause.value)
    strip = 0.75 / fig.get_figheight()  # inches, as a fraction of the figure: the same strip at any height
    fig.legend(handles, labels, loc="lower center", ncol=ncol, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, strip, 1, 1))


def margin_distribution(screen: pd.DataFrame, margins: pd.DataFrame, verdicts: list[v.ClassVerdict]):
    """Per class, each screened seed's smallest margin over its counted ops (ulps of the compared values), coloured
    by the class's cause; exact ties at the left edge, seeds where ORT chose differently as black crosses; a black
    bar at the class's reach (how close to a tie its measured noise can flip a choice)."""
    per_seed = screen.groupby(["model", "seed"], as_index=False).min_margin_ulps.min() if len(screen) else screen
    flipped = set(zip(margins[margins.flipped > 0].model, margins[margins.flipped > 0].seed, strict=True)) \
        if len(margins) else set()
    shown = [x for x in verdicts if x.screened]
    fig, ax = plt.subplots(figsize=(11, 0.55 * max(len(shown), 2) + 2.4))
    for row, verdict in enumerate(shown):
        mine = per_seed[per_seed.model == verdict.model]
        x = mine.min_margin_ulps.fillna(np.inf).clip(lower=TIE_POSITION).to_numpy()
        jitter = np.random.default_rng(row).uniform(-0.28, 0.28, len(x))  # fixed: the same figure every run
        hit = np.array([(verdict.model, s) in flipped for s in mine.seed], dtype=bool)
        ax.scatter(x[~hit], row + jitter[~hit], s=8, color=cause_colour(verdict.cause), alpha=0.5, linewidths=0)
        ax.scatter(x[hit], row + jitter[hit], s=22, color="black", marker="x", linewidths=1.2)
        ax.vlines(max(verdict.reach_ulps, TIE_POSITION), row - 0.42, row + 0.42, color="black", linewidth=2)
    ax.scatter([], [], s=22, color="black", marker="x", label="ORT chose differently")
    ax.vlines([], 0, 1, color="black", linewidth=2, label="reach of the measured noise")
    ax.set(xscale="log", yticks=range(len(shown)), yticklabels=[x.model for x in shown], ylim=(-0.6, len(shown) - 0.4),
           xlabel="smallest margin per seed, ulps of the compared values (an exact tie, 0 ulps, at the left edge)")
    ax.set_title("How close each seed's discrete choices come to a tie")
    _cause_legend_below(fig, ax, [x.cause for x in shown], ncol=4)
    return fig


def _one_in_ticks(ax, low: float) -> None:
    """A log axis of rates per seed labelled as every page states a rate: '1 in 10', '1 in 1,000'."""
    ticks = [10.0 ** -k for k in range(0, 9) if 10.0 ** -k >= low]
    ax.set_xticks(ticks)
    ax.set_xticklabels(["1 in 1" if t == 1 else f"1 in {1 / t:,.0f}" for t in ticks])
    ax.minorticks_off()


def failure_rates(verdicts: list[v.ClassVerdict]):
    """Per class, how often the export test fails (log axis of 1 in N), coloured by cause: a solid bar is Wilson's
    95% interval; a dashed one a range whose upper end counts every unchecked seed within reach as failing (a worst
    case, not a confidence bound). A class with none has no point (a log axis has no zero): its bar is the bound,
    from the left edge, with an open arrow head at the edge."""
    shown = sorted([x for x in verdicts if x.failures is not None and x.failures.seeds],
                   key=lambda x: (x.failures.per, x.failures.high))
    highs = [x.failures.high / v.PER for x in shown if x.failures.high > 0]
    lows = [x.failures.low / v.PER for x in shown if x.failures.low > 0]
    edge = 10.0 ** math.floor(math.log10(min(highs + lows + [1e-4]) / 3))  # a decade left of the smallest end
    fig, ax = plt.subplots(figsize=(11, 0.42 * max(len(shown), 2) + 2.4))
    for row, verdict in enumerate(shown):
        f = verdict.failures
        point, low, high = f.per / v.PER, f.low / v.PER, f.high / v.PER
        colour = cause_colour(verdict.cause)
        ax.hlines(row, low if low > 0 else edge, high, color=colour, linewidth=4 if not f.worst_case else 2,
                  alpha=0.6, linestyles="dashed" if f.worst_case else "solid")
        if point > 0:
            ax.scatter([point], [row], color=colour, edgecolor="black", zorder=3)
        else:
            ax.scatter([edge], [row], marker="<", facecolor="white", edgecolor=colour, s=40, zorder=3)
    ax.hlines([], 0, 1, color="grey", linewidth=4, label="95% interval (Wilson)")
    ax.hlines([], 0, 1, color="grey", linewidth=2, linestyles="dashed",
              label="found to worst case (unchecked seeds within reach all failing)")
    ax.scatter([], [], marker="<", facecolor="white", edgecolor="grey", s=40, label="none seen: the bar is the bound")
    ax.set(xscale="log", yticks=range(len(shown)), yticklabels=[x.model for x in shown], xlim=(edge, 1.6),
           ylim=(-0.6, len(shown) - 0.4), xlabel="export test fails (95% interval; log axis)")
    _one_in_ticks(ax, edge)
    ax.set_title("How often each class fails the export test's rule")
    _cause_legend_below(fig, ax, [x.cause for x in shown], ncol=3)  # the axis keeps the width for its decades' labels
    return fig
