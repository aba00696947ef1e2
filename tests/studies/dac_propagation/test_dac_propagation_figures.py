"""No run hidden under another in the error figures: a run identical to another is drawn once and named for
both; the legend has no header items."""

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402

from exactness.studies.dac_propagation import figures  # noqa: E402


def _propagation(fp32_like_weight_norm=True):
    rows = []
    for init in ("default", "variance_preserving"):
        for run, scale in (("weight_norm", 1.0), ("folded_fp32", 1.0 if fp32_like_weight_norm else 2.0),
                           ("folded_fp64", 3.0)):
            for depth, layer in enumerate(("encoder.Conv1", "encoder.Block0", "decoder.Conv1", "decoder.Conv2")):
                rows.append({"init": init, "variant": run, "against": "float64", "layer": layer, "depth": depth,
                             "role": "main", "max_abs_err": scale * 1e-8 * (depth + 1), "rel_err": 1e-6,
                             "act_rms": 0.1})
    return pd.DataFrame(rows)


def test_a_twin_run_is_one_line_named_for_both_and_the_legend_has_no_headers():
    table = _propagation()
    assert figures.twins(table) == {"folded_fp32": "weight_norm"}
    fig = figures.error_against_depth(table, "float64")
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == ["weight norm recomputed = folded in float32 (identical: one line)", "folded in float64",
                      "default init", "variance_preserving init"]
    assert len(fig.axes[0].lines) == 2 * 2 + 1  # two runs drawn per init, and the decoder's boundary


def test_runs_that_differ_are_each_drawn():
    assert figures.twins(_propagation(fp32_like_weight_norm=False)) == {}
