"""Figures of the DAC propagation study."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

# One colour per run in every figure of the study (a run keeps its colour whatever the figure shows).
RUN_COLOURS = {"weight_norm": "#2ca02c", "folded_fp32": "#1f77b4", "folded_fp64": "#ff7f0e", "float64": "#7f7f7f"}
# The runs as a page names them (the tables' `variant` values are for code and parquet readers)
RUN_NAMES = {"weight_norm": "weight norm recomputed", "folded_fp32": "folded in float32",
             "folded_fp64": "folded in float64", "float64": "float64 reference"}


def run_name(run: str) -> str:
    return RUN_NAMES.get(run, run)


def named_runs(frame: pd.DataFrame, column: str = "variant") -> pd.DataFrame:
    """`frame` with its runs named as the page names them, for a table for people."""
    return frame.assign(**{column: frame[column].map(run_name)}) if column in frame else frame
INIT_STYLES = ("-", "--", ":", "-.")


def _layer_ticks(ax, shown: pd.DataFrame) -> None:
    """The investigation's layer names (Conv1, Block0 ... Snake1, Conv2) on the main path, encoder then decoder."""
    main = shown[shown.role == "main"].drop_duplicates("depth").sort_values("depth")
    ax.set_xticks(main.depth.tolist(), [layer.replace("encoder.", "enc ").replace("decoder.", "dec ")
                                        for layer in main.layer], rotation=60, ha="right")


def twins(shown: pd.DataFrame) -> dict[str, str]:
    """Runs whose errors equal an earlier run's at every layer under every init: run -> the run it repeats.
    Drawn once (two lines on top of each other would hide one), and named together in the legend."""
    runs = [r for r in RUN_COLOURS if r in set(shown.variant)] + sorted(set(shown.variant) - set(RUN_COLOURS))
    series = {(init, run): group.sort_values("depth").max_abs_err.to_numpy()
              for (init, run), group in shown.groupby(["init", "variant"])}
    inits = sorted(set(shown.init))
    found = {}
    for number, run in enumerate(runs):
        for earlier in runs[:number]:
            if earlier not in found and all((i, run) in series and (i, earlier) in series
                                            and np.array_equal(series[(i, run)], series[(i, earlier)])
                                            for i in inits):
                found[run] = earlier
                break
    return found


def error_against_depth(propagation: pd.DataFrame, against: str):
    """Three panels on one layer axis: absolute error, error relative to the activation's RMS, and the
    activation's RMS itself (absolute and relative quantities never share an axis). Colour: the run; line
    style: the init; a run identical to another is drawn once, under both names."""
    shown = propagation[(propagation.against == against) & (propagation.max_abs_err > 0)]
    repeats = twins(shown)
    inits = list(dict.fromkeys(shown.init))
    styles = dict(zip(inits, INIT_STYLES, strict=False))
    fig, axes = plt.subplots(3, 1, figsize=(12, 10), sharex=True)
    panels = [("max_abs_err", "max |error| (absolute)"), ("rel_err", "max |error| / activation RMS"),
              ("act_rms", "activation RMS (absolute)")]
    order = [r for r in RUN_COLOURS if r in set(shown.variant)] + sorted(set(shown.variant) - set(RUN_COLOURS))
    drawn = [r for r in order if r not in repeats]
    for ax, (column, label) in zip(axes, panels, strict=True):
        for init in inits:
            # every run carries the same activations (to float rounding): one line per init, not one per run
            for run in drawn if column != "act_rms" else drawn[:1]:
                group = shown[(shown.init == init) & (shown.variant == run)].sort_values("depth")
                colour = RUN_COLOURS.get(run, "#9467bd") if column != "act_rms" else "#424242"
                ax.plot(group.depth, group[column], color=colour, linestyle=styles[init], marker="o", markersize=4)
        ax.set(yscale="log", ylabel=label + (" (every run)" if column == "act_rms" else ""), xlabel="")
        boundary = shown[shown.layer == "decoder.Conv1"].depth
        if len(boundary):
            ax.axvline(boundary.iloc[0] - 0.5, color="grey", linestyle=":")
    names = {r: " = ".join([run_name(r), *[run_name(t) for t, of in repeats.items() if of == r]])
             for r in drawn}
    handles = [Line2D([], [], color=RUN_COLOURS.get(r, "#9467bd"), marker="o", label=names[r]
                      + (" (identical: one line)" if " = " in names[r] else "")) for r in drawn]
    handles += [Line2D([], [], color="#424242", linestyle=styles[i], label=f"{i} init") for i in inits]
    axes[0].legend(handles=handles, bbox_to_anchor=(1.01, 1), loc="upper left", fontsize=8)
    axes[0].set_title(f"Error against {run_name(against)}, layer by layer (dotted line: the decoder starts from "
                      "identical codes)")
    _layer_ticks(axes[-1], shown)
    axes[-1].set_xlabel("layer (main path; the points between are the blocks' residual units)")
    fig.tight_layout()
    return fig
