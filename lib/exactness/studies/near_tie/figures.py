"""Figures of the near-tie study."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, MaxNLocator

from exactness.palette import colour, colours

# Every gap in these figures is in ulps of its row's top logit (float32 spacing there), the axis comparable across
# classes whose logits differ in scale; an exact tie (gap 0, no place on a log axis) is drawn at TIE_ULPS, left of
# any positive gap (one is at least half an ulp), on a dotted line whose tick says "tie" instead of a number.
TIE_ULPS = 0.1
GAP_UNIT = "ulps of the row's top logit"


def _placed(gaps) -> np.ndarray:
    """Gaps in ulps with exact ties moved to TIE_ULPS."""
    gaps = np.asarray(gaps, dtype=float)
    return np.where(gaps > 0, gaps, TIE_ULPS)


def _mark_ties(ax) -> None:
    """The log gap axis of every figure: the same left edge, and the exact ties' place named."""
    ax.set_xscale("log")
    ax.axvline(TIE_ULPS, color="#9e9e9e", linestyle=":", linewidth=0.8, zorder=0)
    ax.text(TIE_ULPS, 0.98, " exact ties", transform=ax.get_xaxis_transform(), rotation=90, ha="right", va="top",
            fontsize=7, color="#616161")
    ax.set_xlim(left=TIE_ULPS / 2)
    numbers = ax.xaxis.get_major_formatter()
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, at: "tie" if np.isclose(x, TIE_ULPS) else numbers(x, at)))


def gap_label(what: str) -> str:
    return f"{what} ({GAP_UNIT})"


def _thresholds_in_ulps(screen: pd.DataFrame, threshold: float, threshold_ulps: float) -> dict[str, float]:
    """Where the candidate threshold sits on the ulp axis: `threshold_ulps` itself where the run set it, else
    `threshold` (logit units) in ulps of each class's median top logit."""
    from exactness.compare.scale import float32_ulp

    if threshold_ulps > 0:
        return {"": threshold_ulps}
    if "top_logit" not in screen:
        return {}
    return {model: threshold / float(float32_ulp(group.top_logit.abs().median()))
            for model, group in screen.groupby("model", sort=True)}


def gap_distribution(screen: pd.DataFrame, threshold: float, threshold_ulps: float = 0.0):
    """Each seed's smallest gap, a histogram per class: one bin for the exact ties, 60 log bins for the rest."""
    fig, ax = plt.subplots(figsize=(8, 4))
    placed = screen.assign(gap=_placed(screen.smallest_gap_ulps))
    positive = placed.gap[placed.gap > TIE_ULPS]
    low, high = (float(positive.min()), float(positive.max())) if len(positive) else (1.0, 10.0)
    spread = np.logspace(np.log10(low), np.log10(max(high, low * 1.01)), 60)
    bins = np.concatenate([[TIE_ULPS / 1.3, TIE_ULPS * 1.3], spread])
    for model, group in placed.groupby("model", sort=True):
        ax.hist(group.gap, bins=bins, histtype="step", color=colour(model), label=model)
    for model, at in _thresholds_in_ulps(screen, threshold, threshold_ulps).items():
        label = f"threshold {at:g} ulps" if not model else f"threshold {threshold:g} = {at:.0f} ulps"
        ax.axvline(at, color=colour(model) if model else "black", linestyle="--", label=label)
    ax.set(yscale="log", xlabel=gap_label("smallest top-1/top-2 gap of a seed"), ylabel="seeds",
           title="Smallest gap per seed")
    _mark_ties(ax)
    _legend_outside(ax)
    return fig


def gap_ulps_distribution(screen: pd.DataFrame, rows_per_seed: dict[str, int]):
    """The smallest gap per seed in ulps of its row's top logit (the axis comparable across classes), as the
    fraction of seeds at or below each value divided by the class's argmax rows per seed: where the lines meet,
    rows per seed and logit scale explain the difference in candidates."""
    fig, ax = plt.subplots(figsize=(9.5, 4))
    for model, group in screen.groupby("model", sort=True):
        gaps = np.sort(_placed(group.smallest_gap_ulps))
        if not len(gaps):
            continue
        fraction = np.searchsorted(gaps, gaps, side="right") / len(gaps)
        ax.step(gaps, fraction / rows_per_seed[model], where="post", color=colour(model),
                label=f"{model} ({rows_per_seed[model]} rows)")
    ax.set(yscale="log", xlabel=gap_label("smallest gap of a seed"),
           ylabel="fraction of seeds at or below, per argmax row", title="Small gaps per row, on the comparable axis")
    _mark_ties(ax)
    _legend_outside(ax)
    return fig


def _legend_outside(ax, title: str | None = None) -> None:
    """The legend right of the axes, where it covers no data."""
    if ax.get_legend() is not None:  # seaborn drew one: move it, keeping its handles
        sns.move_legend(ax, "upper left", bbox_to_anchor=(1.02, 1), frameon=False, fontsize=8, title=title)
    else:
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1), frameon=False, fontsize=8, title=title)
    ax.figure.tight_layout()


def flips_against_gap(checks: pd.DataFrame):
    """Each checked seed at its smallest eager gap in ulps of the top logit, as the flip-probability figure draws it
    (one unit for a gap across the figures of checked seeds, exact ties at the same left edge)."""
    fig, ax = plt.subplots(figsize=(7, 4))
    shown = checks.assign(gap=_placed(checks.min_gap_ulps),
                          outcome=np.select([~checks.test_rule_passed, checks.n_flipped_rows > 0],
                                            ["flip, test fails", "flip, test passes"], "no flip"))
    sns.stripplot(data=shown, x="gap", y="model", hue="outcome", ax=ax, jitter=0.25, size=4,
                  hue_order=["no flip", "flip, test passes", "flip, test fails"],
                  palette={"no flip": "#9e9e9e", "flip, test passes": "#1e88e5", "flip, test fails": "#d81b60"})
    ax.set(xlabel=gap_label("smallest eager gap"), ylabel="", title="Which checked seeds flipped, by their eager gap")
    _mark_ties(ax)
    _legend_outside(ax)
    return fig


def perplexity_against_allowance(checks: pd.DataFrame):
    fig, ax = plt.subplots(figsize=(6, 5))
    shown = checks.assign(shift=checks.perplexity_shift.abs().clip(lower=1e-7),
                          outcome=np.where(checks.n_flipped_rows > 0, "a code flipped", "no flip"))
    outcomes = {"no flip": "#9e9e9e", "a code flipped": "#d81b60"}
    markers = dict(zip(sorted(shown.model.unique()), "osD^vP*X", strict=False))
    for (model, outcome), group in shown.groupby(["model", "outcome"], sort=True):
        ax.scatter(group.perplexity_allowed, group["shift"], color=outcomes[outcome], marker=markers.get(model, "o"),
                   s=24, edgecolor="none")
    low, high = shown.perplexity_allowed.min(), shown.perplexity_allowed.max()
    ax.plot([low, high], [low, high], color="black", linestyle="--")
    # one legend item per colour, per marker and for the line: no header items ("outcome", "model")
    handles = [Line2D([], [], color=c, marker="o", linestyle="", label=o) for o, c in outcomes.items()]
    handles += [Line2D([], [], color="#424242", marker=m, linestyle="", label=model) for model, m in markers.items()]
    handles.append(Line2D([], [], color="black", linestyle="--", label="shift = allowance"))
    ax.legend(handles=handles)
    ax.xaxis.set_major_locator(MaxNLocator(4))  # allowances span a narrow range: few ticks, no overlap
    ax.set(yscale="log", xlabel="allowed difference, atol + rtol |expected| (perplexity units)",
           ylabel="|perplexity ORT - eager| (perplexity units; 0 at 1e-7)",
           title="Perplexity shift against its allowance")
    _legend_outside(ax)
    return fig


def flip_probability_against_ulps(curve: pd.DataFrame):
    """Each checked seed at its eager gap in ulps of the top logit: flipped (1) or not (0), jittered, over
    its predicted P(flip) from its class's gap noise. `curve`: `near_tie_rate.flip_curve(...)`."""
    fig, ax = plt.subplots(figsize=(8, 4))
    rng = np.random.default_rng(0)  # jitter only: the same picture on every run
    palette = colours(curve.model.unique())
    for model, group in curve.groupby("model", sort=True):
        group = group.sort_values("min_gap_ulps")
        x = _placed(group.min_gap_ulps)
        # P(flip) follows the gap in logit units, not in ulps: each seed's own prediction, not a line
        ax.scatter(x, group.p_flip, color=palette[model], marker="x", s=18, label=f"{model}: predicted P(flip)")
        jitter = rng.uniform(-0.04, 0.04, len(group))
        ax.scatter(x, group.flipped.astype(float) + jitter, color=palette[model], s=12, alpha=0.6,
                   edgecolor="none", label=f"{model}: flipped (1) or not (0)")
    ax.set(ylim=(-0.1, 1.1), xlabel=gap_label("smallest eager gap"), ylabel="P(flip), or flipped (1) / not (0)",
           title="Flip probability against the eager gap")
    _mark_ties(ax)
    _legend_outside(ax)
    return fig


def noise_histogram(moves: dict[str, np.ndarray]):
    """ORT's move of each row's gap, in the gap figures' unit: ulps of that row's own top logit
    (`Checks.deltas_ulps`)."""
    fig, ax = plt.subplots(figsize=(7, 4))
    moves = {model: np.asarray(values, dtype=float) for model, values in moves.items()}
    every = np.concatenate([*moves.values(), [0.0]])
    span = float(np.nanmax(np.abs(every)))
    # a gap moves by whole ulps of its binade: over a few dozen ulps, one bin per ulp (80 bins would leave a comb)
    bins = np.arange(-np.ceil(span) - 0.5, np.ceil(span) + 1.0) if span <= 40 else 80
    for model, values in moves.items():
        ax.hist(values, bins=bins, histtype="step", label=model, density=True, color=colour(model))
    ax.set(yscale="log", xlabel="ORT gap minus eager gap, per row (ulps of the row's top logit)",
           ylabel="density (per ulp)", title="Gap noise between eager and ONNX Runtime")
    _legend_outside(ax)
    return fig


def prediction_intervals(prediction: pd.DataFrame):
    """Per class, failures predicted from the screen and the gap-noise law with their 95% bootstrap interval
    (bar, tick) against the measured count (dot): at the run's own number of seeds (left) and per `scale`
    seeds (right; the measured count scaled to it only where the run screened that many).
    `prediction`: `near_tie_prediction.predict(...)`."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 1.1 + 0.7 * max(len(prediction), 1)), sharey=True)
    y = np.arange(len(prediction))
    scale = int(prediction.scale.iloc[0]) if len(prediction) else 0
    for ax, (column, title) in zip(axes, (("failures_at_run", "at this run's seeds"),
                                          ("failures_per_scale", f"per {scale:,} seeds")), strict=True):
        low, high = prediction[f"{column}_low"].to_numpy(float), prediction[f"{column}_high"].to_numpy(float)
        ax.hlines(y, low, high, color="#90caf9", linewidth=8, label="predicted, 95% interval")
        ax.plot(prediction[column], y, "|", color="#0d47a1", markersize=14, label="predicted")
        measured = (prediction.measured_failures if column == "failures_at_run" else
                    (prediction.measured_failures * scale / prediction.screened).where(prediction.screened >= scale))
        ax.plot(measured, y, "o", color="#d81b60", label="measured")
        right = max(float(np.nanmax(high, initial=0)), float(np.nanmax(measured.to_numpy(float), initial=0)), 1.0)
        ax.set_xlim(-0.02 * right - 0.3, right * 1.05 + 0.3)  # a zero count stays visible
        ax.set(xlabel="failures (seeds)", title=f"Failures {title}")
    axes[0].set_yticks(y, prediction.model)
    axes[1].legend(loc="upper left", bbox_to_anchor=(1.02, 1), frameon=False, fontsize=8)
    fig.suptitle("Predicted from the screen and the gap noise, against measured")
    fig.tight_layout()
    return fig
