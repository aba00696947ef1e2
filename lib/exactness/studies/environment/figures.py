"""Figure of the environment study: the spacing of representable values against magnitude."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

DTYPES = ("float16", "bfloat16", "float32", "float64")


def float_spacing(spacing: pd.DataFrame):
    """1 ulp against magnitude, one line per dtype, both axes logarithmic (both span decades)."""
    fig, ax = plt.subplots(figsize=(7, 4))
    for dtype in DTYPES:
        ax.plot(spacing.magnitude, spacing[dtype], marker="o", label=dtype)
    ax.set(xscale="log", yscale="log", xlabel="magnitude of the value", ylabel="1 ulp (absolute spacing)",
           title="Spacing of representable values (1 ulp)")
    ax.grid(True, which="major", alpha=0.4)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), title="dtype")  # outside: never over a line
    fig.tight_layout()
    return fig
