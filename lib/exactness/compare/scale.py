"""Noise in units of a tensor's own scale: the difference divided by 1 ulp of the tensor's RMS.

Element-wise ulp distances are meaningless near zero: an element of 1e-9 next to values of order 1 has a
tiny ulp, so a rounding step of the large values counts as 10^4 to 10^9 of its ulps. Measuring against the
ulp of the tensor's RMS says how many rounding steps of a typical element the difference is.
"""

from __future__ import annotations

import numpy as np


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
