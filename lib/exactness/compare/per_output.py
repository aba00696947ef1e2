"""Every output compared on its own, in absolute, relative and ulp terms: what the first-failure rule
never shows."""

from __future__ import annotations

import pandas as pd
import torch

from exactness.compare.export_rule import ALLOWED_FRACTION
from exactness.compare.ulp import ulp_distance


def tensor_difference(actual: torch.Tensor, expected: torch.Tensor, atol: float = 1e-3, rtol: float = 1e-3) -> dict:
    actual, expected = actual.detach(), expected.detach()
    if actual.shape != expected.shape:
        return {"shape_mismatch": True, "actual_shape": tuple(actual.shape), "expected_shape": tuple(expected.shape)}
    if not expected.is_floating_point():
        differs = actual != expected
        return {"numel": expected.numel(), "n_mismatched": int(differs.sum()), "max_abs_diff": float(
            (actual.double() - expected.double()).abs().max()) if expected.numel() else 0.0}
    diff = (actual.double() - expected.double()).abs()
    allowed = atol + rtol * expected.double().abs()
    mismatched = int((diff > allowed).sum())
    ulps = ulp_distance(actual.to(expected.dtype), expected)
    finite_ulps = ulps[ulps >= 0].double()
    scale = expected.double().pow(2).mean().sqrt().item() if expected.numel() else 0.0
    numel = expected.numel()
    return {
        "numel": numel,
        "max_abs_diff": float(diff.max()) if numel else 0.0,
        "max_rel_diff": float((diff / expected.double().abs().clamp_min(1e-30)).max()) if numel else 0.0,
        "rel_rms": (float(diff.max()) / scale) if scale else float("nan"),
        "max_ulp": int(ulps.max()) if numel else 0,
        "median_ulp": float(finite_ulps.median()) if finite_ulps.numel() else float("nan"),
        "p99_ulp": float(torch.quantile(finite_ulps, 0.99)) if 0 < finite_ulps.numel() <= 16_000_000 else float("nan"),
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
