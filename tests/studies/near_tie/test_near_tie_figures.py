"""A class has one colour in every near-tie figure: the palette's, whatever order a figure draws in; every gap axis is
in ulps of the row's top logit, exact ties drawn at the same place."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.colors as mcolors  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from exactness.palette import colour  # noqa: E402
from exactness.studies.near_tie import figures  # noqa: E402

CLASSES = ["Wav2Vec2ForPreTraining", "UniSpeechForPreTraining"]  # in the order the issue saw them swap


def _legend_colours(fig) -> dict[str, str]:
    """Each legend label's colour, whichever axes holds the legend."""
    found = {}
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is None:
            continue
        for handle, text in zip(legend.legend_handles, legend.get_texts(), strict=True):
            rgba = handle.get_edgecolor() if isinstance(handle, Patch) else handle.get_color()  # a step histogram
            found[text.get_text()] = mcolors.to_hex(rgba)
    return found


def _screen():
    rng = np.random.default_rng(0)
    screen = pd.DataFrame({"model": np.repeat(CLASSES, 50), "seed": np.tile(np.arange(50), 2),
                           "min_gap": rng.uniform(1e-6, 1e-2, 100), "smallest_gap_ulps": rng.uniform(1, 1e4, 100),
                           "top_logit": np.repeat([1.5, 6.0], 50)})
    screen.loc[[0, 1, 60], ["min_gap", "smallest_gap_ulps"]] = 0.0  # exact ties
    return screen


def _checks():
    screen = _screen()
    return pd.DataFrame({"model": screen.model, "min_gap_ulps": screen.smallest_gap_ulps, "test_rule_passed": True,
                         "n_flipped_rows": 0, "flipped": False, "p_flip": 0.01})


@pytest.mark.parametrize("order", [CLASSES, CLASSES[::-1]])
def test_each_class_keeps_its_palette_colour_in_every_figure(order):
    screen = _screen()
    screen = pd.concat([screen[screen.model == m] for m in order])
    drawn = [figures.gap_distribution(screen, 1e-4), figures.gap_ulps_distribution(screen, dict.fromkeys(CLASSES, 4)),
             figures.noise_histogram({m: np.random.default_rng(1).normal(0, 8, 200) for m in order})]
    for fig in drawn:
        colours = _legend_colours(fig)
        for model in CLASSES:
            label = next(k for k in colours if k.startswith(model))
            assert colours[label] == colour(model), (fig.axes[0].get_title(), label)


def _gap_figures():
    screen, checks = _screen(), _checks()
    return {"gap_distribution": figures.gap_distribution(screen, 1e-4),
            "gap_ulps_distribution": figures.gap_ulps_distribution(screen, dict.fromkeys(CLASSES, 4)),
            "flips_against_gap": figures.flips_against_gap(checks),
            "flip_probability": figures.flip_probability_against_ulps(checks)}


def test_every_gap_figure_is_in_ulps_of_the_top_logit_with_exact_ties_at_one_place():
    for name, fig in _gap_figures().items():
        ax = fig.axes[0]
        assert ax.get_xscale() == "log", name
        assert figures.GAP_UNIT in ax.get_xlabel() and "logit units" not in ax.get_xlabel(), (name, ax.get_xlabel())
        assert ax.get_xlim()[0] == pytest.approx(figures.TIE_ULPS / 2), name
        ties = [line for line in ax.get_lines() if list(line.get_xdata()) == [figures.TIE_ULPS] * 2]
        assert len(ties) == 1 and "exact ties" in {t.get_text().strip() for t in ax.texts}, name
        fig.canvas.draw()
        labels = {float(t.get_position()[0]): t.get_text() for t in ax.get_xticklabels() if t.get_text()}
        assert labels.get(figures.TIE_ULPS) == "tie", (name, labels)  # the tie's place is no number of ulps


def test_exact_ties_are_drawn_not_dropped():
    """3 of the 100 seeds tie: the histogram's tie bin counts them, and the curve starts at the ties' place."""
    figs = _gap_figures()
    drawn = figs["gap_distribution"].axes[0].patches
    tie_counts = [p.get_path().vertices for p in drawn]
    at_tie = sum(float(v[(v[:, 0] > figures.TIE_ULPS / 1.31) & (v[:, 0] < figures.TIE_ULPS * 1.29), 1].max(initial=0))
                 for v in tie_counts)
    assert at_tie == 3
    curves = [line for line in figs["gap_ulps_distribution"].axes[0].get_lines() if len(line.get_xdata()) > 2]
    assert min(float(np.min(line.get_xdata())) for line in curves) == figures.TIE_ULPS


def test_the_threshold_is_drawn_in_each_classs_ulps():
    """1e-4 is 839 ulps of a top logit near 1.5 (ulp 1.19e-7) and 210 near 6 (ulp 4.77e-7)."""
    ax = figures.gap_distribution(_screen(), 1e-4).axes[0]
    dashed = sorted(float(line.get_xdata()[0]) for line in ax.get_lines() if line.get_linestyle() == "--")
    assert dashed == pytest.approx([1e-4 / np.spacing(np.float32(6.0)), 1e-4 / np.spacing(np.float32(1.5))])
    ax = figures.gap_distribution(_screen(), 1e-4, threshold_ulps=50).axes[0]
    assert [float(line.get_xdata()[0]) for line in ax.get_lines() if line.get_linestyle() == "--"] == [50]


def test_gap_noise_is_in_ulps_of_each_rows_top_logit():
    fig = figures.noise_histogram({CLASSES[0]: np.array([-3.0, 3.0])})
    ax = fig.axes[0]
    assert "ulps" in ax.get_xlabel() and "logit units" not in ax.get_xlabel()
    xs = np.concatenate([p.get_path().vertices[:, 0] for p in ax.patches])
    assert -4 < xs.min() <= -3 and 3 <= xs.max() < 4  # moves of 3 ulps, in one-ulp bins
