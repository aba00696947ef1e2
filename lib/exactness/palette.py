"""One colour per class, the same in every figure of the workbook: a class keeps its colour from report to
report because the colour comes from its place in the registered classes, never from a figure's own order."""

from __future__ import annotations

import hashlib

from exactness.models import class_registry, names

# matplotlib's tab20, dark shades first: 20 distinguishable colours
TAB20 = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
         "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#c7c7c7",
         "#dbdb8d", "#9edae5")
ORDER = tuple(dict.fromkeys(names.WAV2VEC2_FAMILY + class_registry.NAMES + names.NOISE_SUBJECTS))


def colour(name: str) -> str:
    if name in ORDER:
        return TAB20[ORDER.index(name) % len(TAB20)]
    return TAB20[int(hashlib.sha256(name.encode()).hexdigest(), 16) % len(TAB20)]


def colours(classes) -> dict[str, str]:
    """A seaborn/matplotlib palette for these classes."""
    return {name: colour(name) for name in classes}
