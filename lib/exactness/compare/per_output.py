"""Every output compared on its own, in absolute, relative and ulp terms: what the first-failure rule
never shows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from exactness.compare.export_rule import ALLOWED_FRACTION
from exactness.compare.ulp import ulp_distance


def tensor_difference(actual: torch.Tensor, expected: torch.Tensor, atol: float = 1e-3, rtol: float = 1e-3) -> dict:
    actual, expected = actual.detach(), expected.detach()
    if actual.shape != expected.shape:
        return {"shape_mismatch": True, "actual_shape": tuple(actual.shape), "expected_shape": tuple(expected.shape)}
    numel = expected.numel()
    wide_actual, wide_expected = actual.double(), expected.double()
    diff = (wide_actual - wide_expected).abs()
    if not expected.is_floating_point():
        return {"numel": numel, "n_mismatched": int((actual != expected).sum()),
                "max_abs_diff": float(diff.max()) if numel else 0.0}
    if numel == 0:
        return {"numel": 0, "max_abs_diff": 0.0, "n_mismatched": 0, "passes_alone": True}
    magnitude = wide_expected.abs()
    mismatched = int((diff > atol + rtol * magnitude).sum())
    ulps = ulp_distance(actual.to(expected.dtype), expected)
    finite = ulps[ulps >= 0].double().numpy()
    # numpy partitions (linear time) where torch.quantile sorts; both interpolate linearly
    median, p99 = np.quantile(finite, [0.5, 0.99]).tolist() if finite.size else (float("nan"), float("nan"))
    scale = float(wide_expected.square().mean().sqrt())
    max_diff = float(diff.max())
    return {
        "numel": numel,
        "max_abs_diff": max_diff,
        "max_rel_diff": float((diff / magnitude.clamp_min(1e-30)).max()),
        "rel_rms": max_diff / scale if scale else float("nan"),
        "max_ulp": int(ulps.max()),
        "median_ulp": median,
        "p99_ulp": p99,
        "n_mismatched": mismatched,
        # the export test's allowance applied to this output alone (a scalar gets none)
        "passes_alone": mismatched == 0 or (numel > 1 and mismatched / numel < ALLOWED_FRACTION),
    }


def per_output_report(actual: dict[str, torch.Tensor], expected: dict[str, torch.Tensor],
                      atol: float = 1e-3, rtol: float = 1e-3) -> pd.DataFrame:
    rows = []
    for name in sorted(expected):
        row = {"output": name}
        row.update(tensor_difference(actual[name], expected[name], atol, rtol) if name in actual
                   else {"missing": True})
        rows.append(row)
    return pd.DataFrame(rows)
