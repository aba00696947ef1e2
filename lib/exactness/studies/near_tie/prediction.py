"""The one prediction of flips and failures, with a 95% interval, from screened gaps and the gap-noise law:
per 40,000 seeds from a screen against ONNX Runtime (`predict`), and on a precision pair's held-out seeds
(`precision.summarize`), both through `forecast`.

A seed flips when the other side's change to a row's top-1 minus top-2 difference (the gap noise) is below
minus the eager gap: P(flip) = P(delta < -gap), from the empirical law of the noise over every row of every
check (`rate.noise_below`). Summed over the seeds (and multiplied by whether one flip would fail the export
test), it gives the expected count. Three things are uncertain, and all three enter the interval by a bootstrap
with a fixed seed (same tables, same interval, bit for bit):

- the density of the smallest gap near zero, where the seeds stand for a fresh run's: the screened seeds are
  resampled (a class with 3 seeds in the few-ulp range has a density known to a factor of two at best); a
  count on the very seeds whose gaps are known (a pair's held-out seeds) does not resample them;
- the noise law: the checked seeds are resampled whole (the rows of one seed share its weights, so they are
  not independent draws);
- whether a flip fails: the measured fraction is resampled.

Each replicate's expected count then draws a Poisson count: the interval says where the count measured on
that many seeds should fall, not only where its mean is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

import numpy as np
import pandas as pd

from exactness.compare.rates import PER
from exactness.studies.near_tie.rate import Tally, flip_curve, noise_below

PAPER_SEEDS = PER  # the seed's scale, per class: the one every rate is stated per
DEFAULT_SEEDS = 2_000  # the calibration: the first seeds a prediction is made from, then held against the rest
TARGET_FACTOR = 2.0  # the calibration target: predicted within this factor of the measured count
BOOTSTRAP = 2_000
RANDOM_SEED = 14


def _clusters(deltas: np.ndarray, checks: int) -> np.ndarray:
    """The gap noise as (checked seed, row): every check of a class has the same number of rows."""
    if checks == 0 or len(deltas) % checks:
        raise ValueError(f"gap noise of {len(deltas)} rows does not split into {checks} checked seeds of equal rows")
    return np.asarray(deltas, dtype=float).reshape(checks, -1)


@dataclass(frozen=True)
class Predicted:
    """A count expected on some seeds, with the 95% interval where the count measured on them should fall."""

    expected: float
    low: float
    high: float


@dataclass(frozen=True)
class Forecast:
    """Flips and failures expected on some seeds: by each seed's smallest-gap row alone, and by every row a seed
    kept (it flips when any of them does; the same law where a seed kept one row)."""

    near_seeds: int  # seeds with a gap within the noise's reach: the only ones that can flip
    flips: Predicted
    failures: Predicted
    every_row_flips: Predicted
    every_row_failures: Predicted


def forecast(gaps: np.ndarray, noise: np.ndarray, fail_given_flip: np.ndarray, scales: list[float],
             rng: np.random.Generator, replicates: int, known: np.ndarray | None = None,
             resample_seeds: bool = True) -> list[Forecast]:
    """The one prediction of flips and failures from screened gaps and a measured gap-noise law, per scale.

    `gaps`: (seeds, rows), each seed's smallest gaps ascending; `noise`: (checked seeds, rows), the gap noise
    of every row of each checked seed; `fail_given_flip`: the measured chance that a flip fails the test, one
    value per measurement (none measured: every flip counts as a failure, an upper bound); `known`: per seed,
    its own measured chance where there is one (NaN: the mean). `resample_seeds`: the seeds stand for a fresh
    run's (their density near a tie is uncertain); False: the count on these very seeds is predicted."""
    n, (n_checks, rows) = len(gaps), noise.shape
    reach = float(np.nanmax(np.clip(-noise, 0, None), initial=0.0))  # a NaN move (inf - inf) flips nothing
    # only a gap the noise reaches can flip: the others are never looked up
    seed_of, row_of = np.nonzero(gaps < reach) if reach > 0 else (np.array([], int),) * 2
    near = np.unique(seed_of)
    at = np.searchsorted(near, seed_of)
    # every check's rows pooled in order: a replicate's weighted count of noise below minus a gap is a cumulative
    # sum of its checks' weights up to that gap's place (integers, so exact whatever the order of the sum)
    order = np.argsort(noise.ravel(), kind="stable")
    owner = np.repeat(np.arange(n_checks), rows)[order]
    place = noise_below(gaps[seed_of, row_of], noise.ravel())  # its place in that order
    own = np.full(len(near), np.nan) if known is None else np.asarray(known, dtype=float)[near]
    smallest = row_of == 0
    one_row = gaps.shape[1] == 1

    def expected(check_weights, seed_weights, fail_mean) -> np.ndarray:
        below = np.concatenate([[0.0], np.cumsum(check_weights[owner])])[place]
        p = below / (check_weights.sum() * rows)
        fails = np.where(np.isnan(own), fail_mean, own)
        flip = np.zeros(len(near))
        flip[at[smallest]] = p[smallest]
        laws = [flip]
        if not one_row:
            survive = np.bincount(at, np.log1p(-np.minimum(p, 1 - 1e-16)), minlength=len(near))
            laws.append(1.0 - np.exp(survive))
        return np.array([[float(seed_weights @ f) / n, float(seed_weights @ (f * fails)) / n] for f in laws])

    fail_mean = float(fail_given_flip.mean()) if len(fail_given_flip) else 1.0
    point = expected(np.ones(n_checks), np.ones(len(near)), fail_mean)
    draws = np.empty((replicates, *point.shape))
    for b in range(replicates):
        check_weights = rng.multinomial(n_checks, np.full(n_checks, 1 / n_checks)).astype(float)
        # the near seeds' weights in a resample of all n: a binomial count each (the rest carry no probability)
        seed_weights = rng.binomial(n, 1 / n, size=len(near)).astype(float) if resample_seeds else \
            np.ones(len(near))
        mean_b = float(rng.choice(fail_given_flip, len(fail_given_flip)).mean()) if len(fail_given_flip) else 1.0
        draws[b] = expected(check_weights, seed_weights, mean_b)
    out, made = [], {}
    for scale in scales:
        # each replicate's expected count draws a Poisson count: where a measured count should fall
        counts = np.stack([rng.poisson(draws[:, law] * scale) for law in range(len(point))], axis=1)
        low, high = np.percentile(counts, [2.5, 97.5], axis=0)
        laws = [[Predicted(float(point[law, k] * scale), float(low[law, k]), float(high[law, k])) for k in (0, 1)]
                for law in range(len(point))]
        # one scale asked twice (a run of exactly `scale` seeds) is one prediction: its interval drawn once, shown
        # the same in both places (the draw still happens, so later classes' draws do not move)
        out.append(made.setdefault(scale, Forecast(len(near), *laws[0], *laws[-1])))
    return out


def _class_prediction(gaps: np.ndarray, noise: np.ndarray, fails_known: dict[int, float], seeds: np.ndarray,
                      scale: int, run_seeds: int, rng: np.random.Generator, replicates: int) -> dict:
    measured = np.array(list(fails_known.values()), dtype=float)
    known = np.array([fails_known.get(int(s), np.nan) for s in seeds])
    forecasts = forecast(gaps[:, None], noise, measured, [scale, run_seeds], rng, replicates, known)
    row = {}
    for at, f in zip(("per_scale", "at_run"), forecasts, strict=True):
        for what in ("flips", "failures"):
            p = getattr(f, what)
            row |= {f"{what}_{at}": p.expected, f"{what}_{at}_low": p.low, f"{what}_{at}_high": p.high}
    return row | {"near_seeds": forecasts[0].near_seeds, "noise_checks": len(noise), "noise_rows": noise.size,
                  "fail_given_flip": float(measured.mean()) if len(measured) else 1.0}


def predict(screen: pd.DataFrame, checks: pd.DataFrame, deltas: dict[str, np.ndarray], from_seeds: int = 0,
            scale: int = PAPER_SEEDS, replicates: int = BOOTSTRAP) -> pd.DataFrame:
    """Per class: flips and failures predicted per `scale` seeds from the first `from_seeds` screened seeds
    (0: all) and the gap noise of the checks among them, with 95% intervals; and the same at the run's own
    number of screened seeds beside the measured counts there. `checks`: one shape mode, rows in the order of
    `deltas` (as `run_checks` returns them)."""
    rng = np.random.default_rng(RANDOM_SEED)
    rows = []
    for model, screened in screen.groupby("model", sort=True):
        own = checks[checks.model == model] if len(checks) else checks
        if model not in deltas or not len(own):
            continue
        noise = _clusters(deltas[model], len(own))
        basis = screened.sort_values("seed").head(from_seeds) if from_seeds else screened
        inside = own.seed.isin(set(basis.seed)).to_numpy()
        if not inside.any():
            continue
        used = own[inside]
        fails = used[used.fails_if_flipped.notna()]
        known = dict(zip(fails.seed.astype(int), fails.fails_if_flipped.astype(float), strict=True))
        row = _class_prediction(basis.min_gap.to_numpy(dtype=float), noise[inside], known,
                                basis.seed.to_numpy(), scale, len(screened), rng, replicates)
        rows.append({"model": model, "screened": len(screened), "predicted_from": len(basis), "scale": scale, **row,
                     "measured_flips": Tally.of(own).flipped, "measured_failures": Tally.of(own).failed})
    return pd.DataFrame(rows)


MIN_NOISE_CHECKS = 5  # fewer checked seeds leave the noise law's tail (what reaches a gap) unmeasured
# fewer screened gaps within the noise's reach leave the density near a tie unmeasured: a bootstrap of the seeds
# seen never draws one closer to zero than the closest of them
MIN_NEAR_SEEDS = 3


class Thin(Enum):
    """Why one class's prediction cannot be held against a measured count."""

    FEW_NOISE_CHECKS = "the gap noise was learnt from fewer than MIN_NOISE_CHECKS checked seeds"
    NO_NEAR_SEED = "no screened gap within reach of the noise: the interval is 0 to 0 by construction"
    FEW_NEAR_SEEDS = "fewer than MIN_NEAR_SEEDS screened gaps within reach: a bootstrap cannot go closer to a tie"


def too_thin(row) -> tuple[Thin, ...]:
    """Why one class's prediction (a row of the prediction table) cannot be held against a measured count; empty
    when it can."""
    near = int(row.near_seeds)
    return tuple(reason for reason, holds in (
        (Thin.FEW_NOISE_CHECKS, int(row.noise_checks) < MIN_NOISE_CHECKS), (Thin.NO_NEAR_SEED, near == 0),
        (Thin.FEW_NEAR_SEEDS, 0 < near < MIN_NEAR_SEEDS)) if holds)


def calibration(prediction: pd.DataFrame) -> pd.DataFrame:
    """Per class: predicted against measured failures at the run's scale (inside the 95% interval?), and, where
    the run screened at least `scale` seeds, the factor between predicted and measured per `scale` seeds."""
    rows = []
    for r in prediction.itertuples():
        inside = r.failures_at_run_low <= r.measured_failures <= r.failures_at_run_high
        measured_per_scale = r.measured_failures * r.scale / r.screened
        comparable = r.screened >= r.scale and r.predicted_from < r.screened
        if not comparable:
            factor = float("nan")
        elif r.measured_failures == 0 or r.failures_per_scale == 0:
            factor = 1.0 if r.measured_failures == r.failures_per_scale else float("inf")
        else:
            factor = max(r.failures_per_scale / measured_per_scale, measured_per_scale / r.failures_per_scale)
        rows.append({"model": r.model, "failures_at_run": r.failures_at_run,
                     "failures_at_run_low": r.failures_at_run_low,
                     "failures_at_run_high": r.failures_at_run_high, "measured_failures": r.measured_failures,
                     "inside_at_run": bool(inside), "failures_per_scale": r.failures_per_scale,
                     "measured_per_scale": measured_per_scale, "paper_scale": bool(comparable), "factor": factor,
                     "within_target": bool(comparable and factor <= TARGET_FACTOR)})
    return pd.DataFrame(rows)


def miss_reasons(screen: pd.DataFrame, checks: pd.DataFrame, deltas: dict[str, np.ndarray],
                 from_seeds: int = DEFAULT_SEEDS, scale: int = PAPER_SEEDS) -> pd.DataFrame:
    """Why a prediction from the first `from_seeds` seeds misses the count measured on the whole run, split in
    two measured factors: `sample_factor`, the prediction from the first seeds over the prediction from every
    screened seed and every check (did the small sample see too many or too few gaps near zero, and too loud or
    too quiet a noise?), and `law_factor`, the prediction from everything over the measured count (does the
    pooled noise law, one law for every row of a class, predict the class's flips at all?)."""
    first = predict(screen, checks, deltas, from_seeds, scale, replicates=1).set_index("model")
    everything = predict(screen, checks, deltas, 0, scale, replicates=1).set_index("model")
    rows = []
    for model in first.index:
        small, full = first.loc[model], everything.loc[model]
        measured = full.measured_failures * scale / full.screened
        rows.append({"model": model, "predicted_first": small.failures_per_scale,
                     "predicted_all": full.failures_per_scale, "measured_per_scale": measured,
                     "sample_factor": _ratio(small.failures_per_scale, full.failures_per_scale),
                     "law_factor": _ratio(full.failures_per_scale, measured)})
    return pd.DataFrame(rows)


def _ratio(a: float, b: float) -> float:
    if b > 0:
        return float(a / b)
    return float("inf") if a > 0 else 1.0


@dataclass
class Prediction:
    """The rate predicted from the gap-noise law, beside what was measured (empty tables without checks)."""

    # the `prediction` table, from the first DEFAULT_SEEDS screened seeds: point estimates, intervals
    calibrated: pd.DataFrame = field(default_factory=pd.DataFrame)
    calibration: pd.DataFrame = field(default_factory=pd.DataFrame)
    curve: pd.DataFrame = field(default_factory=pd.DataFrame)  # per checked seed: P(flip) and whether it flipped
    reasons: pd.DataFrame = field(default_factory=pd.DataFrame)  # a larger run: why a class missed
    reasons_measured: bool = False  # a run larger than the calibration's seeds: `reasons` is a table of the run


def beside_measured(screen: pd.DataFrame, first_mode: pd.DataFrame, deltas: dict, n_seeds: int) -> Prediction:
    """The run's prediction section: predicted from the first `DEFAULT_SEEDS` screened seeds, held against the
    measured counts. `first_mode`: the checks of the first shape mode (the one whose gap noise `deltas` holds)."""
    if not len(first_mode):
        return Prediction()
    # from the first 2,000 screened seeds: a larger run (the default's 40,000) measures how well that predicts
    calibrated = predict(screen, first_mode, deltas, DEFAULT_SEEDS)
    larger = n_seeds > DEFAULT_SEEDS
    reasons = miss_reasons(screen, first_mode, deltas) if larger else pd.DataFrame()
    return Prediction(calibrated, calibration(calibrated), flip_curve(first_mode, deltas), reasons, larger)
