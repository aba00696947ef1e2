"""One output of one seed compared, as every discrete-choice check compares it: eager against ORT by the export
test's element count, both against the float64 reference with the noise bound, defects planted in ORT's values to
measure what a comparison still catches, and (after a flip) eager with ORT's choices forced against ORT. A study's
check runs the sides its own way (the discrete-ops recorder, the quantizer's pool) and fills its `OutputRow`s here,
so the verdict reads one kind of row whoever checked."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from exactness.compare import export_rule
from exactness.compare.scale import float32_ulp
from exactness.engine.rows import OutputRow

# ORT agrees with the float64 reference "within float noise" when its error is at most this many times eager
# float32's own error there (or one ulp of the output's scale, where eager's is smaller): two runtimes summing
# in another order err by amounts of the same size, while a different computation errs by orders of magnitude
# more (the study's proof states the bound beside every output).
NOISE_FACTOR = 16.0


def scale_ulp(reference: np.ndarray) -> float:
    finite = reference[np.isfinite(reference)]
    rms = float(np.sqrt(np.mean(np.square(finite)))) if finite.size else 0.0
    return float(float32_ulp(rms))


def max_abs(a: np.ndarray, b: np.ndarray) -> float:
    both = np.isfinite(a) & np.isfinite(b)
    return float(np.max(np.abs(a[both] - b[both]), initial=0.0))


def nonfinite_differ(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Where one side is finite and the other not, or NaN on one side and an infinity on the other, or infinities
    of opposite sign."""
    if a.dtype.kind != "f" and b.dtype.kind != "f":
        return np.zeros(np.shape(a), dtype=bool)
    a, b = a.astype(np.float64), b.astype(np.float64)
    return (np.isfinite(a) != np.isfinite(b)) | (np.isnan(a) != np.isnan(b)) | (np.isinf(a) & np.isinf(b) & (a != b))


def nonfinite_mismatch(a: np.ndarray, b: np.ndarray) -> int:
    return int(nonfinite_differ(a, b).sum())


@dataclass(frozen=True)
class Plant:
    """A defect planted in ORT's values of one output, to measure what a comparison still catches."""

    column: str  # the OutputRow field holding the rule's count of not-close elements with it planted
    words: str
    factor: float = 0.0  # for a few elements moved: by this many times the test's tolerance at each


FEW = 3  # elements moved by a "few elements" defect, spread evenly over the flattened output
# smallest first: a comparison's "smallest defect caught" is the first of these it catches on every checked pair
PLANTS = (Plant("planted_few_1x", f"{FEW} elements off by 1x the tolerance", 1.0),
          Plant("planted_few_10x", f"{FEW} elements off by 10x the tolerance", 10.0),
          Plant("planted_few_100x", f"{FEW} elements off by 100x the tolerance", 100.0),
          Plant("planted_nan", "one element NaN"),
          Plant("planted_shift", "every element shifted by one index along the last axis"))


def planted(plant: Plant, got: np.ndarray, wanted: np.ndarray, atol: float, rtol: float) -> np.ndarray:
    """ORT's values (float64) with `plant` in them. A moved element goes away from eager's value by `factor`
    times the tolerance there (atol + rtol * |eager|), beyond the distance it already has."""
    values = np.array(got, dtype=np.float64, copy=True).reshape(wanted.shape)
    flat, reference = values.reshape(-1), wanted.reshape(-1)
    if not flat.size:
        return values
    if plant.factor:
        at = np.unique(np.linspace(0, flat.size - 1, min(FEW, flat.size)).astype(int))
        away = np.where(flat[at] >= reference[at], 1.0, -1.0)
        with np.errstate(invalid="ignore"):  # an infinity moved by an infinite tolerance stays non-finite
            flat[at] = flat[at] + away * plant.factor * (atol + rtol * np.abs(reference[at]))
    elif plant.column == "planted_nan":
        flat[0] = np.nan
    else:
        values = np.roll(values, 1, axis=-1) if values.ndim else values
    return values


def rule_count(row) -> export_rule.OutputCount:
    """The output as the export test's rule counts it, from an `OutputRow` or a table row of one."""
    return export_rule.OutputCount(row.output, int(row.numel), int(row.rule_mismatched), bool(row.zero_dim),
                                   bool(row.same_shape and getattr(row, "same_dtype", True)))


def passes_alone(row) -> bool:
    """The export test's rule on this output alone: every element close, or few enough not close for its 5%
    allowance (which a 0-d output does not get)."""
    count = rule_count(row)
    return count.close or count.forgiven


def compare_output(row: OutputRow, produced: np.ndarray, eager: torch.Tensor, reference: torch.Tensor | None,
                   atol: float, rtol: float) -> None:
    """Fill `row`: eager against ORT, and both against the float64 reference with the noise bound."""
    wanted = eager.detach().double().numpy()
    got = np.asarray(produced)
    row.numel, row.zero_dim = int(wanted.size), eager.dim() == 0
    row.same_shape = got.size == wanted.size and tuple(got.shape) == tuple(wanted.shape)
    if not row.same_shape:
        row.max_abs_diff, row.mismatched, row.rule_mismatched = float("inf"), int(wanted.size), int(wanted.size)
        return
    row.same_dtype = str(got.dtype) == str(eager.detach().numpy().dtype) if eager.dtype != torch.bfloat16 else True
    actual = torch.from_numpy(np.array(got)).to(torch.float64)
    native = torch.from_numpy(np.array(got)).reshape(eager.shape)
    # the export test's element count, in the outputs' own dtype as `assert_close` computes it (a bfloat16
    # output, which numpy cannot hold, in float64)
    row.rule_mismatched = (int(wanted.size) if not row.same_dtype else
                           export_rule.not_close(native, eager.detach(), atol, rtol) if native.dtype == eager.dtype
                           else export_rule.not_close(actual, eager.detach().double(), atol, rtol))
    if row.same_dtype and row.floating:
        expected = eager.detach().to(torch.float64)
        for plant in PLANTS:
            moved = torch.from_numpy(planted(plant, actual.numpy(), wanted, atol, rtol))
            setattr(row, plant.column, export_rule.not_close(moved, expected, atol, rtol))
    got = got.astype(np.float64)
    differ, nan = nonfinite_differ(got, wanted), np.isnan(wanted)
    row.nonfinite_mismatch = int(differ.sum())
    row.nonfinite_by_export = int((differ & ~nan).sum())
    row.nan_in_eager = int(nan.sum())
    with np.errstate(invalid="ignore"):  # the same infinity on both sides: NaN, judged by the finiteness above
        diff = np.abs(got - wanted)
    diff = np.where(np.isnan(got) & np.isnan(wanted), 0.0, diff)
    row.max_abs_diff = float(np.nanmax(diff)) if diff.size else 0.0
    row.mismatched = int((~(diff <= atol + rtol * np.abs(wanted))).sum())
    if not row.floating:
        return
    row.scale_ulp = scale_ulp(wanted)
    row.max_ulps_of_scale = 0.0 if row.max_abs_diff == 0 else row.max_abs_diff / row.scale_ulp
    if reference is None:
        return
    wide = reference.detach().double().numpy()
    row.scale_ulp = scale_ulp(wide)
    row.eager_f64_err, row.ort_f64_err = max_abs(wanted, wide), max_abs(got, wide)
    row.noise_bound = NOISE_FACTOR * max(row.eager_f64_err, row.scale_ulp)
    if not (row.reached_by_flip or row.reached_by_draw):
        row.within_noise = bool(row.nonfinite_by_export == 0 and row.ort_f64_err <= row.noise_bound)


def compare_forced(row: OutputRow, produced: np.ndarray, forced: torch.Tensor, atol: float, rtol: float) -> None:
    """Fill `row`'s counterfactual: eager with ORT's choices forced against ORT. Explained when the two agree
    within the output's noise bound (exactly, for an integer output) and neither side alone is non-finite."""
    after = np.asarray(forced.detach().double().numpy())
    got = np.asarray(produced, dtype=np.float64).reshape(after.shape)
    diff = np.where(np.isnan(got) & np.isnan(after), 0.0, np.abs(got - after))
    row.forced_max_abs_diff = float(np.nanmax(diff)) if diff.size else 0.0
    row.forced_mismatched = int((~(diff <= atol + rtol * np.abs(after))).sum())
    bound = row.noise_bound if row.noise_bound == row.noise_bound else NOISE_FACTOR * max(row.scale_ulp, 0.0)
    row.explained_by_flip = bool(nonfinite_mismatch(got, after) == 0 and (
        row.forced_max_abs_diff <= bound if row.floating else row.forced_max_abs_diff == 0))
