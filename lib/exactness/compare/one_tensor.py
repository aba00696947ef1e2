"""One tensor compared on its own, in absolute, relative and ulp terms: a module output of the intermediates
table (a model output's comparison is the engine's `OutputRow`)."""

from __future__ import annotations

import numpy as np
import torch

from exactness.compare.export_rule import OutputCount
from exactness.compare.ulp import ulp_distance


def tensor_difference(actual: torch.Tensor, expected: torch.Tensor, atol: float = 1e-3, rtol: float = 1e-3) -> dict:
    actual, expected = actual.detach(), expected.detach()
    if actual.shape != expected.shape:
        return {"shape_mismatch": True, "actual_shape": tuple(actual.shape), "expected_shape": tuple(expected.shape)}
    numel = expected.numel()
    # numpy on float64 copies: exact for the differences of float32 values, and several times faster than
    # torch's element-wise ops on one thread
    wide_actual, wide_expected = _float64(actual), _float64(expected)
    with np.errstate(invalid="ignore"):  # inf - inf: NaN, an equal infinity judged below
        diff = np.abs(wide_actual - wide_expected)
    if not expected.is_floating_point():
        return {"numel": numel, "n_mismatched": int(np.count_nonzero(actual.numpy() != expected.numpy())),
                "max_abs_diff": float(diff.max()) if numel else 0.0}
    if numel == 0:
        return {"numel": 0, "max_abs_diff": 0.0, "n_mismatched": 0, "passes_alone": True}
    magnitude = np.abs(wide_expected)
    # close: equal values (an infinity included), or both finite and within the tolerance (in float64, where
    # `torch.isclose` computes in the tensors' dtype: an element at the tolerance's very edge may count apart);
    # a NaN is never close, as `torch.isclose` counts it
    with np.errstate(invalid="ignore"):
        close = (wide_actual == wide_expected) | (np.isfinite(wide_actual) & np.isfinite(wide_expected)
                                                  & (diff <= atol + rtol * magnitude))
    mismatched = int(close.size - np.count_nonzero(close))
    ulps = ulp_distance(actual.to(expected.dtype), expected).numpy()
    finite = ulps[ulps >= 0]
    median, p99 = np.quantile(finite, (0.5, 0.99)).tolist() if finite.size else (float("nan"), float("nan"))
    scale = float(np.sqrt(np.mean(np.square(wide_expected))))
    max_diff = float(diff.max())
    with np.errstate(invalid="ignore"):  # an infinity's difference over its own magnitude: NaN, as it should read
        max_rel = float((diff / np.maximum(magnitude, 1e-30)).max())
    return {
        "numel": numel,
        "max_abs_diff": max_diff,
        "max_rel_diff": max_rel,
        "rel_rms": max_diff / scale if scale else float("nan"),
        "max_ulp": int(ulps.max()),
        "median_ulp": median,
        "p99_ulp": p99,
        "n_mismatched": mismatched,
        # the export test's allowance applied to this output alone (a scalar gets none)
        "passes_alone": mismatched == 0 or OutputCount(name="", numel=numel, not_close=mismatched,
                                                       zero_dim=expected.dim() == 0).forgiven,
    }


def _float64(tensor: torch.Tensor) -> np.ndarray:
    return (tensor.double() if tensor.dtype == torch.bfloat16 else tensor).numpy().astype(np.float64)
