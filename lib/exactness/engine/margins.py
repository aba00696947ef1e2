"""How close each discrete choice came to going the other way, and whether it did.

Per decision (a row of an argmax or top-k, an element of a comparison or a rounding) the margin is the
distance to the other outcome: top-1 minus top-2 for an argmax; for a top-k the smallest gap between
neighbours among the k+1 largest values (the k-th against the (k+1)-th decides membership, the others the
order, and both are outputs); for a comparison the distance between its two sides; for a Round the distance
of the fraction to one half, for Floor and Ceil the distance to the nearest integer. Each margin is also
given in ulps of the values compared (float32 spacing at the largest magnitude involved): a margin of a few
ulps is within reach of rounding noise, a margin of 0 is an exact tie that any runtime may break either way.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from exactness.compare.scale import float32_ulp


@dataclass(frozen=True)
class Reads:
    """Per decision of one call (`fill_reads`): whether every value it weighs is finite in eager and in ORT, and
    whether eager's read holds a NaN (the model's own break, whatever ORT reads)."""

    eager_finite: np.ndarray
    ort_finite: np.ndarray
    eager_nan: np.ndarray


@dataclass(frozen=True)
class Selection:
    """What a selecting op picks: along `axis` (None: the flattened tensor), the `k` largest (or smallest)."""

    axis: int | None
    k: int
    largest: bool = True


@dataclass(frozen=True)
class Margins:
    margin: np.ndarray  # per decision, >= 0 (inf where there is nothing to choose from)
    scale: np.ndarray  # per decision, the largest magnitude involved
    # an Equal whose two sides are equal holds: that is its answer, not a tie to break, so its smallest margin
    # is taken over the sides that differ (the near-equalities noise could make equal)
    zero_is_answer: bool = False

    @property
    def ulps(self) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return np.where(self.margin == 0, 0.0, self.margin / float32_ulp(self.scale))

    def summary(self) -> dict:
        finite = np.isfinite(self.margin) & ((self.margin > 0) if self.zero_is_answer else True)
        ties = 0 if self.zero_is_answer else int((self.margin == 0).sum())  # an Equal that holds is no tie
        if not finite.any():
            return {"decisions": int(self.margin.size), "min_margin": float("nan"), "min_margin_ulps": float("nan"),
                    "exact_ties": ties}
        return {"decisions": int(self.margin.size), "min_margin": float(self.margin[finite].min()),
                "min_margin_ulps": float(self.ulps[finite].min()), "exact_ties": ties}


def _rows(values: np.ndarray, axis: int | None) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    if axis is None or values.ndim == 0:
        return values.reshape(1, -1)
    return np.moveaxis(values, axis, -1).reshape(-1, values.shape[axis])


def selection_margins(values: np.ndarray, selection: Selection) -> Margins:
    rows = _rows(values, selection.axis)
    if not selection.largest:
        rows = -rows
    n = rows.shape[1]
    if n < 2:
        return Margins(np.full(rows.shape[0], np.inf), np.abs(rows[:, 0]) if n else np.zeros(rows.shape[0]))
    kept = min(selection.k + 1, n)
    ordered = -np.sort(-rows, axis=1)[:, :kept]  # the kept largest, descending
    with np.errstate(invalid="ignore"):
        gaps = ordered[:, :-1] - ordered[:, 1:]
    # the scale of the finite values chosen between (an infinity has no ulp to count a margin or noise in)
    return Margins(gaps.min(axis=1), np.where(np.isfinite(ordered), np.abs(ordered), 0.0).max(axis=1))


def compare_margins(left, right) -> Margins:
    a, b = np.broadcast_arrays(np.asarray(left, dtype=np.float64), np.asarray(right, dtype=np.float64))
    return Margins(np.abs(a - b).ravel(), np.maximum(np.abs(a), np.abs(b)).ravel())


def rounding_margins(values, op_type: str) -> Margins:
    x = np.asarray(values, dtype=np.float64).ravel()
    if op_type == "Round":
        margin = np.abs(x - np.floor(x) - 0.5)
    else:  # Floor and Ceil switch at the integers
        margin = np.abs(x - np.round(x))
    return Margins(margin, np.abs(x))


def nonzero_margins(values) -> Margins:
    x = np.asarray(values)
    if x.dtype.kind != "f":
        return Margins(np.full(x.size, np.inf), np.zeros(x.size))  # a boolean mask: no float to be near zero
    return Margins(np.abs(x.astype(np.float64)).ravel(), np.abs(x.astype(np.float64)).ravel())


def margins(category: str, op_type: str, read: list, selection: Selection | None = None) -> Margins | None:
    """The margins of one call: `read` is what the op read (for a comparison, both sides). None for a random
    draw, which has no margin: it differs between runtimes whatever the values."""
    if category in ("argmax", "argmin", "topk"):
        return selection_margins(read[0], selection)
    if category == "compare":
        found = compare_margins(read[0], read[1])
        return Margins(found.margin, found.scale, zero_is_answer=op_type == "Equal")
    if category == "rounding":
        return rounding_margins(read[0], op_type)
    if category == "nonzero":
        return nonzero_margins(read[0])
    return None


def flipped_decisions(category: str, eager_choice, ort_choice, selection: Selection | None = None,
                      shape: tuple | None = None) -> np.ndarray:
    """Per decision (in the order of `margins`), whether ORT chose differently: rows of an argmax or top-k (its
    indices), elements of a comparison or rounding, and for a nonzero (`shape`: what it read) each element, from
    the coordinates each side selected (eager's one row per element, ORT's one row per dimension)."""
    a, b = np.asarray(eager_choice), np.asarray(ort_choice)
    if category == "nonzero":
        chosen = []
        for coordinates in (a.reshape(-1, len(shape)).T if a.size else a.reshape(len(shape), 0),
                            b.reshape(len(shape), -1)):
            mask = np.zeros(shape, dtype=bool)
            mask[tuple(coordinates.astype(np.int64))] = True
            chosen.append(mask.ravel())
        return chosen[0] != chosen[1]
    if a.size != b.size:
        raise ValueError(f"eager chose {a.shape} values, ORT {b.shape}: the two do not describe the same op")
    if category == "topk" and selection is not None and selection.axis is not None:
        k = a.shape[selection.axis] if a.ndim else 1
        rows_a = np.moveaxis(a, selection.axis, -1).reshape(-1, k)
        rows_b = np.moveaxis(b.reshape(a.shape), selection.axis, -1).reshape(-1, k)
        return (rows_a != rows_b).any(axis=1)
    return a.reshape(-1) != b.reshape(-1)


def flipped(category: str, eager_choice, ort_choice, selection: Selection | None = None) -> int:
    """How many decisions came out differently (for a nonzero, 1 when the selected positions differ at all)."""
    return int(flipped_decisions(category, eager_choice, ort_choice, selection).sum())


def finite_decisions(category: str, read: list, selection: Selection | None = None,
                     other: list | None = None) -> np.ndarray:
    """Per decision (in the order of `margins`), whether every value it weighs is finite. A selection weighs the
    k + 1 values it ranks first, and a NaN anywhere in its row (unordered: torch's argmax takes it as the largest);
    a masked -inf far down the row is never chosen and leaves the decision finite. With `other` (the other
    side's read of the same call, same size) it also weighs the values the other side ranks first, and any value
    non-finite here that the other side does not have: an infinity one side alone makes is never a mask."""
    if category in ("argmax", "argmin", "topk"):
        rows = _rows(read[0], selection.axis)
        if not rows.shape[1]:
            return np.ones(rows.shape[0], dtype=bool)
        theirs = (_rows(np.asarray(other[0], np.float64).reshape(np.shape(read[0])), selection.axis)
                  if other is not None and np.size(other[0]) == rows.size else None)
        at = _first(rows, selection)
        if theirs is not None:
            at = np.concatenate([at, _first(theirs, selection)], axis=1)
        with np.errstate(invalid="ignore"):
            finite = ~np.isnan(rows).any(axis=1) & np.isfinite(np.take_along_axis(rows, at, axis=1)).all(axis=1)
            if theirs is not None:
                finite &= ~(~np.isfinite(rows) & (rows != theirs)).any(axis=1)
        return finite
    if category == "compare":
        a, b = np.broadcast_arrays(np.asarray(read[0], dtype=np.float64), np.asarray(read[1], dtype=np.float64))
        return (np.isfinite(a) & np.isfinite(b)).ravel()
    x = np.asarray(read[0])
    if x.dtype.kind != "f":
        return np.ones(x.size, dtype=bool)
    return np.isfinite(x.astype(np.float64)).ravel()


def nan_decisions(category: str, read: list, selection: Selection | None = None) -> np.ndarray:
    """Per decision (in the order of `margins`), whether what it reads holds a NaN: anywhere in a selection's row,
    on either side of a comparison, in a rounding's value."""
    if category in ("argmax", "argmin", "topk"):
        rows = _rows(read[0], selection.axis)
        return np.isnan(rows).any(axis=1) if rows.shape[1] else np.zeros(rows.shape[0], dtype=bool)
    if category == "compare":
        a, b = np.broadcast_arrays(np.asarray(read[0], dtype=np.float64), np.asarray(read[1], dtype=np.float64))
        return (np.isnan(a) | np.isnan(b)).ravel()
    x = np.asarray(read[0])
    return np.isnan(x.astype(np.float64)).ravel() if x.dtype.kind == "f" else np.zeros(x.size, dtype=bool)


def _first(rows: np.ndarray, selection: Selection) -> np.ndarray:
    """Per row, the positions of the k + 1 values a selection ranks first (in no particular order)."""
    keys = -rows if selection.largest else rows
    kept = min(selection.k + 1, rows.shape[1])
    if kept >= rows.shape[1]:
        return np.broadcast_to(np.arange(rows.shape[1]), rows.shape)
    return np.argpartition(keys, kept - 1, axis=1)[:, :kept]


def read_noise_ulps(category: str, eager_read: list, ort_read: list, selection: Selection | None = None) -> float:
    """How far ORT's copy of what the op read is from eager's, in the margins' own unit: per decision, the
    largest |eager - ORT| among the values it weighs (a selection's k + 1 first values on either side; a comparison's
    difference of its two sides; a rounding's value) over 1 float32 ulp of that decision's scale (the margin's own:
    `Margins.scale`); the largest over decisions. A margin below it can flip. Decisions whose values are all zero
    in eager are left out (no scale). NaN where the two reads differ in size."""
    if category in ("argmax", "argmin", "topk"):
        eager, ort = np.asarray(eager_read[0], np.float64), np.asarray(ort_read[0], np.float64)
        if eager.size != ort.size or not eager.size:
            return float("nan")
        rows_e, rows_o = _rows(eager, selection.axis), _rows(ort.reshape(eager.shape), selection.axis)
        # in the unit of the decision's margin, and of the values it weighs: the noise at the positions either side
        # ranks among its k + 1 first (what the choice is between), in ulps at their magnitude; a far-off value,
        # a masked -1e4 logit, neither moves the choice nor sets the unit its noise is counted in
        chosen = np.concatenate([_first(rows_e, selection), _first(rows_o, selection)], axis=1)
        picked_e, picked_o = np.take_along_axis(rows_e, chosen, 1), np.take_along_axis(rows_o, chosen, 1)
        with np.errstate(invalid="ignore"):  # the same infinity on both sides (a masked value) has not moved
            diff = np.where(picked_e == picked_o, 0.0, np.abs(picked_e - picked_o)).max(axis=1)
        scale = selection_margins(eager, selection).scale
    elif category == "compare":
        sides = [np.broadcast_arrays(*(np.asarray(x, np.float64) for x in read[:2])) for read in (eager_read, ort_read)]
        if sides[0][0].size != sides[1][0].size:
            return float("nan")
        diff = np.abs((sides[0][0] - sides[0][1]).ravel() - (sides[1][0] - sides[1][1]).ravel())
        scale = np.maximum(np.abs(sides[0][0]), np.abs(sides[0][1])).ravel()
    else:
        eager, ort = np.asarray(eager_read[0], np.float64).ravel(), np.asarray(ort_read[0], np.float64).ravel()
        if eager.size != ort.size:
            return float("nan")
        diff, scale = np.abs(eager - ort), np.abs(eager)
    keep = scale > 0  # where eager's values are all zero an ulp is a subnormal's: no scale to measure noise in
    if not keep.any():
        return float("nan")
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ulps = np.where(diff[keep] == 0, 0.0, diff[keep] / float32_ulp(scale[keep]))
    return float(np.max(ulps))


def fill_ort(row, category: str, op_type: str, ort_read: list, ort_sel: Selection | None,
             eager_read: list | None = None) -> tuple[dict, np.ndarray]:
    """Fill a margin row's ORT side (its margins and non-finite decisions, against eager's read where there is
    one); returns the margins' summary and which of ORT's decisions weigh only finite values."""
    summary = margins(category, op_type, ort_read, ort_sel).summary()
    row.ort_min_margin, row.ort_min_margin_ulps = summary["min_margin"], summary["min_margin_ulps"]
    row.ort_exact_ties = summary["exact_ties"]
    finite = finite_decisions(category, ort_read, ort_sel, eager_read)
    row.reads_nonfinite_ort = int((~finite).sum())
    return summary, finite


def fill_reads(row, category: str, op_type: str, eager_read: list, ort_read: list, eager_sel: Selection | None,
               ort_sel: Selection | None, atol: float, rtol: float) -> tuple[Margins, Reads]:
    """Fill a margin row (`engine.rows.MarginRow`) from what both sides read at one call: each side's margins,
    their non-finite decisions, how far apart the reads are (and whether that is within the test's tolerance,
    `match_verified`), and the read noise in ulps. Returns eager's margins and what each decision read (`Reads`)."""
    _, ort_finite = fill_ort(row, category, op_type, ort_read, ort_sel, eager_read)
    eager_margins = margins(category, op_type, eager_read, eager_sel)
    summary = eager_margins.summary()
    row.decisions, row.min_margin, row.min_margin_ulps = (summary["decisions"], summary["min_margin"],
                                                          summary["min_margin_ulps"])
    row.exact_ties = summary["exact_ties"]
    eager_finite = finite_decisions(category, eager_read, eager_sel, ort_read)
    row.reads_nonfinite_eager = int((~eager_finite).sum())
    # what ORT alone breaks is the export's; where the decisions do not align, what ORT breaks beyond eager
    row.reads_nonfinite_ort_only = (int((~ort_finite & eager_finite).sum()) if ort_finite.size == eager_finite.size
                                    else max(row.reads_nonfinite_ort - row.reads_nonfinite_eager, 0))
    first_eager, first_ort = eager_read[0], np.asarray(ort_read[0])
    same_size = np.size(first_eager) == first_ort.size
    if same_size and first_ort.size:
        with np.errstate(invalid="ignore"):
            row.read_max_diff = float(np.nanmax(np.abs(np.asarray(first_eager, np.float64).reshape(-1)
                                                       - first_ort.reshape(-1).astype(np.float64)), initial=0.0))
    magnitudes = np.abs(np.asarray(first_eager, np.float64))
    # an infinity (a masked value) would make any difference relative to it pass
    largest = float(magnitudes[np.isfinite(magnitudes)].max(initial=0.0))
    row.match_verified = bool(same_size and row.read_max_diff <= atol + rtol * largest)
    if same_size:
        row.read_noise_ulps = read_noise_ulps(category, eager_read, ort_read, eager_sel)
    return eager_margins, Reads(eager_finite, ort_finite, nan_decisions(category, eager_read, eager_sel))


def fill_flips(row, changed: np.ndarray, eager_margins: Margins, reads: Reads) -> None:
    """Fill a margin row's flips from `changed` (`flipped_decisions`): how many, eager's smallest margin among
    the flipped decisions whose values are finite in eager (NaN: none is; a margin over a row holding a NaN
    measures nothing), how many weighed a value that is not finite on one side or both, and how many read a NaN
    in eager itself (`reads`: from `fill_reads`)."""
    row.flipped = float(changed.sum())
    if not changed.any():
        return
    at = changed if changed.size == eager_margins.margin.size else np.ones_like(eager_margins.margin, dtype=bool)
    finite = reads.eager_finite & reads.ort_finite if reads.ort_finite.size == reads.eager_finite.size \
        else reads.eager_finite
    aligned = finite.size == at.size
    measured = eager_margins.ulps[at & reads.eager_finite] if aligned else eager_margins.ulps[at]
    row.flipped_margin_ulps = float(np.min(measured)) if measured.size else float("nan")
    row.flipped_nonfinite = int((at & ~finite).sum()) if aligned else int(at.sum())
    # where the decisions do not align, no flip is claimed to be the model's
    row.flipped_nan_eager = int((at & reads.eager_nan).sum()) if reads.eager_nan.size == at.size else 0
