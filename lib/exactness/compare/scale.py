"""Noise in units of a tensor's own scale: the difference divided by 1 ulp of the tensor's RMS.

Element-wise ulp distances are meaningless near zero: an element of 1e-9 next to values of order 1 has a
tiny ulp, so a rounding step of the large values counts as 10^4 to 10^9 of its ulps. Measuring against the
ulp of the tensor's RMS says how many rounding steps of a typical element the difference is.
"""

from __future__ import annotations

import numpy as np
import torch

from exactness.compare.ulp import ulp_distance


def float32_ulp(magnitude) -> np.ndarray:
    """1 float32 ulp just above |magnitude| (the spacing there), element-wise."""
    return np.spacing(np.abs(np.asarray(magnitude, dtype=np.float32))).astype(np.float64)


def rms_ulps(max_abs_diff, rel_rms) -> np.ndarray:
    """max |diff| in ulps of the tensor's RMS, from a comparison row's `max_abs_diff` and `rel_rms`
    (= max |diff| / RMS, so RMS = max_abs_diff / rel_rms). A zero difference is 0 ulps; an undefined RMS
    (all-zero tensor) gives NaN."""
    diff, rel = np.asarray(max_abs_diff, dtype=float), np.asarray(rel_rms, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        rms = np.where(rel > 0, diff / rel, np.nan)
        out = np.where(diff == 0, 0.0, diff / float32_ulp(np.nan_to_num(rms, nan=0.0)))
    return np.where((diff != 0) & ~(rel > 0), np.nan, out)


def worst_elements(actual, expected) -> dict:
    """Which elements carry the worst element-wise ulp counts, by their size against the tensor's RMS:
    `worst_of_rms`, |expected| / RMS at the element with the largest ulp distance, and `top_ulps_below_rms`,
    the largest |expected| / RMS among the elements whose ulp distance is above the tensor's 99th percentile
    (every one of that worst 1% lies below this fraction of the RMS). NaN where nothing differs or the RMS is 0."""
    nothing = {"worst_of_rms": float("nan"), "top_ulps_below_rms": float("nan")}
    if not (isinstance(expected, torch.Tensor) and expected.is_floating_point()) or expected.numel() == 0:
        return nothing
    distance = ulp_distance(actual.detach(), expected.detach()).numpy().reshape(-1)
    wide = expected.detach().double().numpy().reshape(-1)
    rms = float(np.sqrt(np.mean(np.square(wide))))
    finite = distance >= 0
    if rms == 0 or not finite.any() or distance[finite].max() == 0:
        return nothing
    magnitude = np.abs(wide) / rms
    counted = np.where(finite, distance, -1)
    (p99,) = np.quantile(distance[finite], (0.99,)).tolist()
    above = counted > p99
    return {"worst_of_rms": float(magnitude[int(counted.argmax())]),
            "top_ulps_below_rms": float(magnitude[above].max()) if above.any() else float("nan")}
