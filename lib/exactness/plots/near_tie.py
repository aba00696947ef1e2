"""Figures of the near-tie study."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns


def gap_distribution(screen: pd.DataFrame, threshold: float):
    fig, ax = plt.subplots(figsize=(7, 4))
    positive = screen[screen.min_gap > 0]
    bins = np.logspace(np.log10(max(positive.min_gap.min(), 1e-9)), np.log10(positive.min_gap.max()), 60)
    sns.histplot(data=positive, x="min_gap", hue="model", bins=bins, element="step", fill=False, ax=ax)
    ax.axvline(threshold, color="black", linestyle="--", label=f"threshold {threshold:g}")
    ax.set(xscale="log", yscale="log", xlabel="smallest top-1/top-2 logit gap of a seed", ylabel="seeds",
           title="Smallest gap per seed (exact ties, gap 0, not drawn)")
    return fig


def flips_against_gap(checks: pd.DataFrame):
    fig, ax = plt.subplots(figsize=(7, 4))
    shown = checks.assign(gap=checks.min_gap.clip(lower=1e-8),
                          outcome=np.select([~checks.test_rule_passed, checks.n_flipped_rows > 0],
                                            ["flip, test fails", "flip, test passes"], "no flip"))
    sns.stripplot(data=shown, x="gap", y="model", hue="outcome", ax=ax, jitter=0.25, size=4,
                  hue_order=["no flip", "flip, test passes", "flip, test fails"],
                  palette={"no flip": "#9e9e9e", "flip, test passes": "#1e88e5", "flip, test fails": "#d81b60"})
    ax.set(xscale="log", xlabel="smallest eager gap (exact ties drawn at 1e-8)", ylabel="",
           title="Which checked seeds flipped, by their eager gap")
    return fig


def perplexity_against_allowance(checks: pd.DataFrame):
    fig, ax = plt.subplots(figsize=(6, 5))
    shown = checks.assign(shift=checks.perplexity_shift.abs().clip(lower=1e-7),
                          flipped=np.where(checks.n_flipped_rows > 0, "flipped", "no flip"))
    sns.scatterplot(data=shown, x="perplexity_allowed", y="shift", hue="flipped", style="model", ax=ax)
    low, high = shown.perplexity_allowed.min(), shown.perplexity_allowed.max()
    ax.plot([low, high], [low, high], color="black", linestyle="--", label="shift = allowance")
    ax.set(yscale="log", xlabel="allowed difference (atol + rtol |expected|)", ylabel="|perplexity ORT - eager|",
           title="Perplexity shift against its allowance")
    ax.legend(fontsize=7)
    return fig


def predicted_against_measured(prediction: pd.DataFrame):
    long = prediction.melt(id_vars="model", value_vars=["predicted_flips", "measured_flips", "predicted_failures",
                                                        "measured_failures"], var_name="what", value_name="seeds")
    fig, ax = plt.subplots(figsize=(8, 4))
    sns.barplot(data=long, y="model", x="seeds", hue="what", ax=ax)
    ax.set(title="Predicted from the gap law and the noise, against measured", ylabel="")
    return fig


def noise_histogram(deltas: dict[str, np.ndarray]):
    fig, ax = plt.subplots(figsize=(7, 4))
    for model, values in deltas.items():
        ax.hist(values, bins=80, histtype="step", label=model, density=True)
    ax.set(yscale="log", xlabel="ORT gap minus eager gap, per row (the noise a near-tie must beat)",
           ylabel="density", title="Gap noise between eager and ONNX Runtime")
    ax.legend(fontsize=7)
    return fig
