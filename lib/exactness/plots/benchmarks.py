"""The benchmark table as pictures: ratios against their targets, and how the screen scales."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns


def overview(table: pd.DataFrame):
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.2))
    ratios = table.dropna(subset=["ratio"]) if "ratio" in table else table.iloc[:0]
    if len(ratios):
        sns.barplot(data=ratios, x="benchmark", y="ratio", ax=axes[0], color="tab:blue")
        for i, (_, row) in enumerate(ratios.iterrows()):
            axes[0].plot([i - 0.4, i + 0.4], [row.target, row.target], color="tab:red", linestyle="--")
            axes[0].annotate(f"{row.ratio:.0f}x", (i, row.ratio), ha="center", va="bottom")
        axes[0].set(yscale="log", title="speed-up, measured side by side (red: target)", ylabel="ratio of rates")
    scaling = table[table.benchmark == "scaling"]
    if len(scaling):
        sns.lineplot(data=scaling, x="seeds", y="median_s", hue="workers", marker="o", ax=axes[1], palette="deep")
        axes[1].set(xscale="log", yscale="log", title="screen wall time (one run each)", xlabel="seeds",
                    ylabel="seconds")
    fig.tight_layout()
    return fig
