"""Distances in units in the last place: how many representable values of the dtype lie between a and b.

Floats are mapped to integers that are ordered like the floats themselves (sign-magnitude bits turned
into two's complement), so the distance is an exact integer count. -0.0 and +0.0 map to the same integer.
NaN and infinities are never counted: they are reported as not comparable, unless both sides hold the same
infinity or both hold NaN.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

_INT_VIEW = {torch.float64: torch.int64, torch.float32: torch.int32, torch.float16: torch.int16,
             torch.bfloat16: torch.int16}
_NUMPY_INT_VIEW = {torch.float64: np.int64, torch.float32: np.int32, torch.float16: np.int16}


def _ordered(x: torch.Tensor) -> torch.Tensor:
    bits = x.contiguous().view(_INT_VIEW[x.dtype]).to(torch.int64)
    sign_bit = 1 << (torch.finfo(x.dtype).bits - 1)
    magnitude = bits & (sign_bit - 1)
    return torch.where(bits < 0, -magnitude, magnitude)


def _ordered_numpy(x: np.ndarray, int_dtype) -> np.ndarray:
    # The same map as _ordered without widening first: for a negative float, flipping the magnitude bits
    # gives -magnitude - 1, and subtracting the sign (-1) gives -magnitude, which fits the same width.
    bits = x.view(int_dtype)
    sign = bits >> (bits.dtype.itemsize * 8 - 1)  # 0 or -1
    return (bits ^ (sign & np.iinfo(int_dtype).max)) - sign


def ulp_distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Element-wise ulp distance as int64; -1 where the pair is not comparable (NaN or infinity against
    anything different). float64 distances saturate at the int64 maximum across the whole range.
    Shapes broadcast as in numpy: the result holds one distance per compared pair (use check_ulp_close,
    which requires equal shapes, to compare an output with its reference)."""
    if a.dtype != b.dtype or a.dtype not in _INT_VIEW:
        raise TypeError(f"ulp_distance needs two tensors of one float dtype, got {a.dtype} and {b.dtype}")
    if a.shape != b.shape:
        try:
            a, b = torch.broadcast_tensors(a, b)
        except RuntimeError as error:  # torch's message names neither shape
            raise ValueError(f"ulp_distance: shapes {list(a.shape)} and {list(b.shape)} do not broadcast") from error
    if a.dtype in _NUMPY_INT_VIEW and a.device.type == "cpu":
        # numpy runs these integer maps several times faster than torch on one thread (same integers, tested)
        return torch.from_numpy(_distance_numpy(a.detach().contiguous().numpy(), b.detach().contiguous().numpy(),
                                                _NUMPY_INT_VIEW[a.dtype]))
    return _distance_torch(a, b)


def _distance_numpy(a: np.ndarray, b: np.ndarray, int_dtype) -> np.ndarray:
    ka, kb = _ordered_numpy(a, int_dtype), _ordered_numpy(b, int_dtype)
    if int_dtype is np.int64:  # the difference of two int64 keys can overflow: saturate instead
        with np.errstate(over="ignore"):
            distance = np.where((ka >= 0) == (kb >= 0), np.abs(ka - kb),
                                np.minimum(np.abs(ka), 2**62 - 1) + np.minimum(np.abs(kb), 2**62 - 1))
    else:
        distance = np.abs(ka.astype(np.int64) - kb)
    distance = np.asarray(distance)  # numpy gives a scalar for 0-d operands
    finite_a, finite_b = np.isfinite(a), np.isfinite(b)
    if finite_a.all() and finite_b.all():
        return distance
    special = ~(finite_a & finite_b)
    same_special = (np.isnan(a) & np.isnan(b)) | (np.isinf(a) & (a == b))
    distance[special & same_special] = 0
    distance[special & ~same_special] = -1
    return distance


def _distance_torch(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    ka, kb = _ordered(a), _ordered(b)
    if a.dtype == torch.float64:
        distance = torch.where((ka >= 0) == (kb >= 0), (ka - kb).abs(),
                               ka.abs().clamp(max=2**62 - 1) + kb.abs().clamp(max=2**62 - 1))
    else:
        distance = (ka - kb).abs()
    special = ~torch.isfinite(a) | ~torch.isfinite(b)
    same_special = (torch.isnan(a) & torch.isnan(b)) | (torch.isinf(a) & (a == b))
    distance = torch.where(special & same_special, torch.zeros_like(distance), distance)
    return torch.where(special & ~same_special, torch.full_like(distance, -1), distance)


def ulp(x: torch.Tensor) -> torch.Tensor:
    """The spacing of the dtype at |x| (1 ulp), like numpy.spacing for finite non-negative x."""
    magnitude = x.abs()
    return torch.nextafter(magnitude, torch.full_like(magnitude, float("inf"))) - magnitude


@dataclass
class UlpCheck:
    """`max_ulp`: the largest distance among comparable pairs (None when no pair is comparable), so a NaN
    against a number never reads as 0 or -1 ulps; those pairs are counted in `n_not_comparable` and are
    part of `n_failed`."""

    passed: bool
    message: str
    max_ulp: int | None
    n_failed: int
    n_not_comparable: int = 0

    def __bool__(self) -> bool:
        return self.passed


def check_ulp_close(actual: torch.Tensor, expected: torch.Tensor, max_ulp: int, atol: float = 0.0,
                    name: str = "tensor", shown: int = 5) -> UlpCheck:
    """Pass when every element is within `max_ulp` ulps, or within `atol` absolutely (near zero a few
    ulps are a vanishing absolute difference); the message says which elements failed, where, and by how much.
    The shapes must be equal: broadcasting would compare pairs that were never meant to be compared, and
    a shape that differs from the reference's is a defect of its own."""
    for label, value in (("actual", actual), ("expected", expected)):
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{name}: {label} is a {type(value).__module__}.{type(value).__name__}, not a "
                            "torch.Tensor (convert with torch.from_numpy)")
    if (isinstance(max_ulp, (int, float)) and max_ulp < 0) or not atol >= 0:  # `not >=` also refuses a NaN atol
        raise ValueError(f"{name}: max_ulp and atol must be zero or more, got max_ulp={max_ulp}, atol={atol}")
    if not _whole_bound(max_ulp):  # NaN compares false with everything: the check would pass anything
        raise ValueError(f"{name}: max_ulp must be a whole number of ulps, 0 or more, got {max_ulp}")
    if actual.shape != expected.shape:
        raise ValueError(f"{name}: actual has shape {list(actual.shape)}, expected has shape "
                         f"{list(expected.shape)}; check_ulp_close compares equal shapes only")
    # distances are int64: a larger bound means the same as the largest one (no OverflowError comparing)
    bound = min(int(max_ulp), _INT64_MAX)
    distance = ulp_distance(actual, expected)
    numel = distance.numel()
    worst = int(distance.max()) if numel else 0
    if numel == 0 or (worst <= bound and int(distance.min()) >= 0):
        # the common case: nothing to look up, and no float64 copy of either tensor
        return UlpCheck(True, f"{name}: all {numel} elements within {max_ulp} ulps", worst, 0)
    comparable = distance >= 0
    worst = int(distance[comparable].max()) if bool(comparable.any()) else None
    # the absolute floor only matters where the ulp count fails, usually a handful of elements
    flat = distance.reshape(-1)
    candidates = ((flat < 0) | (flat > bound)).nonzero().squeeze(1)
    absolute = (actual.reshape(-1)[candidates].double() - expected.reshape(-1)[candidates].double()).abs()
    not_comparable = flat[candidates] < 0
    failing = not_comparable | ~(absolute <= atol)
    where = candidates[failing]
    absolute = absolute[failing]
    n_failed, n_not_comparable = len(where), int(not_comparable.sum())
    if n_failed == 0:
        return UlpCheck(True, f"{name}: all {numel} elements within {max_ulp} ulps or atol={atol:g}", worst, 0)
    too_far = f"differ by more than {max_ulp} ulps (and more than atol={atol:g})"
    special = "not comparable (NaN or infinity against a different value)"
    if n_not_comparable == 0:
        headline = f"{n_failed} of {numel} elements {too_far}"
    elif n_not_comparable == n_failed:
        headline = f"{n_failed} of {numel} elements are {special}"
    else:
        headline = (f"{n_failed} of {numel} elements fail: {n_failed - n_not_comparable} {too_far}, "
                    f"{n_not_comparable} {special}")
    lines = [f"{name}: {headline}"]
    for k, flat_index in enumerate(where[:shown].tolist()):
        i = tuple(int(x) for x in np.unravel_index(flat_index, tuple(distance.shape)))
        d = int(flat[flat_index])
        lines.append(f"  at {list(i)}: actual {actual[i].item()!r}, expected {expected[i].item()!r}, "
                     + ("not comparable (NaN or infinity)" if d < 0 else f"{d} ulps, |diff| {absolute[k].item():.3g}"))
    if n_failed > shown:
        lines.append(f"  ... and {n_failed - shown} more")
    return UlpCheck(False, "\n".join(lines), worst, n_failed, n_not_comparable)


_INT64_MAX = 2**63 - 1


def _whole_bound(value) -> bool:
    """A count of ulps: an int (or a float holding one) of 0 or more; NaN, infinity and 2.5 are not."""
    if isinstance(value, bool):
        return False
    if isinstance(value, float):
        return math.isfinite(value) and value.is_integer() and value >= 0
    return isinstance(value, (int, np.integer)) and value >= 0
