"""The same model in another precision: every module's output, eager in that precision (emulated on this CPU)
against eager float32, in ulps of that precision, and each side's error from a float64 run.

A precision's ulp at x is float32's times 2^(23 - its mantissa bits): TF32 and fp16 keep 10 bits, bf16 7. An
element near zero has a tiny ulp, so a tensor's worst difference is also stated in ulps of its RMS in that
precision; the float64 columns say which side the difference comes from.
"""

from __future__ import annotations

import copy

import pandas as pd
import torch

from exactness.compare.ulp import ulp
from exactness.models import tensor_subjects
from exactness.runtimes import eager_capture
from exactness.runtimes.sides import Precision, Side

MANTISSA_BITS = {Precision.TF32_CONV: 10, Precision.TF32: 10, Precision.FP16: 10, Precision.BF16: 7}
COLUMNS = ["precision", "side", "seed", "tensor", "label", "max_abs_diff", "max_ulp", "median_ulp", "max_ulp_of_rms",
           "fp32_vs_float64", "other_vs_float64"]


def ulp_in(values: torch.Tensor, precision: Precision) -> torch.Tensor:
    return ulp(values.float()) * 2.0 ** (23 - MANTISSA_BITS[precision])


def precision_noise(model: str, seeds, precisions: list[str], transformers_tests: str = "") -> pd.DataFrame:
    rows = []
    for seed in seeds:
        made = tensor_subjects.make(model, int(seed), transformers_tests)
        named = tensor_subjects.named_tensors(model, made.model)
        fp32 = eager_capture.run(made.model, made.inputs)
        wide = eager_capture.run(copy.deepcopy(made.model).double(),
                                 {k: v.double() if v.is_floating_point() else v for k, v in made.inputs.items()})
        for name in precisions:
            side = Side.parse(f"eager:cpu:{name}")
            with side.applied():
                other = eager_capture.run(made.model, made.inputs)
            for path, values in fp32.modules.items():
                if path not in other.modules or path not in wide.modules:
                    continue
                pairs = [(a, b, r) for a, b, r in zip(values, other.modules[path], wide.modules[path], strict=False)
                         if a.is_floating_point() and a.shape == b.shape and a.numel()]
                if not pairs:
                    continue
                a, b, r = pairs[0]
                difference = (b.double() - a.double()).abs()
                in_ulps = (difference / ulp_in(a, side.precision).double()).flatten()
                rms = a.double().pow(2).mean().sqrt().float().reshape(1)
                rows.append({"precision": side.precision.value, "side": side.label, "seed": int(seed), "tensor": path,
                             "label": named.get(path, ""), "max_abs_diff": float(difference.max()),
                             "max_ulp": float(in_ulps.max()), "median_ulp": float(in_ulps.median()),
                             "max_ulp_of_rms": float(difference.max() / ulp_in(rms, side.precision).double()),
                             "fp32_vs_float64": float((a.double() - r).abs().max()),
                             "other_vs_float64": float((b.double() - r).abs().max())})
    return pd.DataFrame(rows, columns=COLUMNS)


def per_tensor(noise: pd.DataFrame) -> pd.DataFrame:
    """Median over seeds, per precision and tensor; the named tensors first."""
    table = noise.groupby(["precision", "side", "tensor", "label"], sort=False)[
        ["max_abs_diff", "max_ulp", "median_ulp", "max_ulp_of_rms", "fp32_vs_float64", "other_vs_float64"]
    ].median().reset_index()
    return table.sort_values(["side", "label"], ascending=[True, False], kind="stable").reset_index(drop=True)


