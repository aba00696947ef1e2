"""A class has one colour in every near-tie figure: the palette's, whatever order a figure draws in."""

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
    return pd.DataFrame({"model": np.repeat(CLASSES, 50), "seed": np.tile(np.arange(50), 2),
                         "min_gap": rng.uniform(1e-6, 1e-2, 100), "smallest_gap_ulps": rng.uniform(1, 1e4, 100)})


@pytest.mark.parametrize("order", [CLASSES, CLASSES[::-1]])
def test_each_class_keeps_its_palette_colour_in_every_figure(order):
    screen = _screen()
    screen = pd.concat([screen[screen.model == m] for m in order])
    drawn = [figures.gap_distribution(screen, 1e-4), figures.gap_ulps_distribution(screen, dict.fromkeys(CLASSES, 4)),
             figures.noise_histogram({m: np.random.default_rng(1).normal(0, 1e-6, 200) for m in order})]
    for fig in drawn:
        colours = _legend_colours(fig)
        for model in CLASSES:
            label = next(k for k in colours if k.startswith(model))
            assert colours[label] == colour(model), (fig.axes[0].get_title(), label)
