"""The environment study: the machine and software facts that decide how floats round in every other report
of the batch, measured in the run. Its findings, answer line and sentences are in `findings`, `answers` and
`sentences`.

Everything here takes seconds: the environment study is the first run of every batch.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from exactness.workbook import machine

FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
# Explicit mantissa bits: 1 ulp at a magnitude m is 2 ** (floor(log2 m) - bits) for a normal m (IEEE 754;
# bfloat16 keeps float32's exponent with 7 bits).
MANTISSA_BITS = {"float16": 10, "bfloat16": 7, "float32": 23, "float64": 52}
# The smallest and largest exponent of a normal number: below the first, spacing stops shrinking (subnormals);
# above the second (and its mantissa's top), the value is not representable.
EXPONENTS = {"float16": (-14, 15), "bfloat16": (-126, 127), "float32": (-126, 127), "float64": (-1022, 1023)}
SEED_ULP_MAGNITUDE = 10.0  # transformers #50575, section 3: "with logits around 10, 1 ulp is 9.5e-7"


def hardware_facts() -> dict[str, object]:
    """CPU, vector extensions, the kernels torch dispatches and the thread counts, as one flat record."""
    return {**machine.cpu_facts(), "torch_cpu_capability": machine.torch_cpu_capability(), **machine.thread_counts()}


def float_behaviour() -> dict[str, object]:
    return {**machine.denormal_behaviour(), **machine.ort_settings()}


def representable(magnitude: float, dtype: str) -> bool:
    """Whether `magnitude` rounds to a finite value of `dtype` (below the largest finite value plus half an
    ulp; the round-to-nearest boundary is close enough here: the study's magnitudes are far from it)."""
    bits, (_, top) = MANTISSA_BITS[dtype], EXPONENTS[dtype]
    return abs(magnitude) < (2.0 - 2.0 ** -bits) * 2.0 ** top


def ieee_ulp(magnitude: float, dtype: str) -> float:
    """The spacing IEEE 754 prescribes just above `magnitude` in `dtype`: 2 ** (exponent - mantissa bits),
    with the exponent held at its normal minimum for subnormals (their spacing is constant); NaN where the
    magnitude is beyond the dtype's range."""
    if not representable(magnitude, dtype):
        return math.nan
    lowest = EXPONENTS[dtype][0]
    exponent = max(math.floor(math.log2(abs(magnitude))), lowest) if magnitude else lowest
    return 2.0 ** (exponent - MANTISSA_BITS[dtype])


def spacing_against_ieee(spacing: pd.DataFrame) -> pd.DataFrame:
    """One row per magnitude and dtype: the measured spacing, the IEEE expectation and whether they agree
    exactly (both are powers of two, so equality is the right test)."""
    rows = []
    for row in spacing.itertuples(index=False):
        for dtype in FLOAT_DTYPES:
            measured, expected = float(getattr(row, dtype)), ieee_ulp(row.magnitude, dtype)
            rows.append({"magnitude": float(row.magnitude), "dtype": dtype, "measured_ulp": measured,
                         "ieee_ulp": expected, "representable": not math.isnan(expected),
                         "agrees": measured == expected})
    return pd.DataFrame(rows, columns=["magnitude", "dtype", "measured_ulp", "ieee_ulp", "representable", "agrees"])


def relative_spacing_range(spacing: pd.DataFrame) -> tuple[float, float]:
    relative = np.asarray(spacing.float32_relative, dtype=float)
    return float(relative.min()), float(relative.max())


def flushing_runtimes(behaviour: dict) -> list[str]:
    """The runtimes whose subnormal probe came back as zero."""
    return [name.removesuffix("_keeps_subnormals") for name, kept in behaviour.items()
            if name.endswith("_keeps_subnormals") and not kept]


def float32_ulp_at_one(spacing: pd.DataFrame) -> float | None:
    at_one = spacing.loc[spacing.magnitude == 1.0, "float32"]
    return float(at_one.iloc[0]) if len(at_one) else None


def summary_values(versions: dict, hardware: dict, behaviour: dict, spacing: pd.DataFrame) -> dict:
    return {"cpu": hardware["cpu_model"], "torch": versions["torch"], "onnxruntime": versions["onnxruntime"],
            "torch_threads": hardware["torch_intra_op_threads"], "subnormals_kept": not flushing_runtimes(behaviour),
            "float32_ulp_at_1": float32_ulp_at_one(spacing)}
