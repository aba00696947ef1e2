"""The near-tie study's findings: what a failing export check is, how often, and whether the seed's figures
hold. Every verdict and every claim's wording comes from the tables; nothing is a fixed sentence.

Seed 000 measured one class, Wav2Vec2ConformerForPreTraining: its rate, candidates, noise medians and
tolerances are set beside that class only; the other classes get ours alone (verdict "new").
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from exactness import reference
from exactness.findings import Finding, count, one_in, rate_text, rate_verdict, significant

SEED_MODEL = "Wav2Vec2ConformerForPreTraining"
NOISE_FACTOR = 3.0  # a median within this factor of the seed's counts as the same noise (same order, same CPU class)


def _seed_label(section: str) -> str:
    return f"seed 000, section {section}, {SEED_MODEL}"


# ---------------------------------------------------------------------------------------------------------
# What a failure is


def failure_causes(checks: pd.DataFrame) -> pd.DataFrame:
    """Per model: checks, failures, and how each failure is explained. A flipped near-tie: a code flipped and
    forcing ORT's codes on eager makes every output agree (`aligned_ok`). A flip that leaves outputs apart
    when aligned, or a failure without any flip, is not explained by a tie: possible bug (or float noise
    beyond the tolerance, which the export test's rule cannot tell apart from one)."""
    rows = []
    for model, group in checks.groupby("model", sort=True):
        failed = ~group.test_rule_passed.astype(bool)
        flipped = group.n_flipped_rows > 0
        aligned = group.aligned_ok.astype(bool)
        rows.append({"model": model, "checks": len(group), "failures": int(failed.sum()),
                     "flipped_near_tie": int((failed & flipped & aligned).sum()),
                     "flip_not_aligned": int((failed & flipped & ~aligned).sum()),
                     "no_flip": int((failed & ~flipped).sum())})
    return pd.DataFrame(rows, columns=["model", "checks", "failures", "flipped_near_tie", "flip_not_aligned",
                                       "no_flip"])


def _cause_words(cause) -> str:
    if cause.failures == 0:
        return "no check failed"
    if cause.flipped_near_tie == cause.failures:
        every = "the one failure is" if cause.failures == 1 else f"every one of the {count(cause.failures)} failures is"
        return (f"{every} a flipped near-tie (forcing ORT's codes on eager makes every output agree; no failure "
                "without a flip)")
    parts = []
    if cause.no_flip:
        parts.append(f"{count(cause.no_flip)} without any flipped code (float noise beyond the tolerance, or a bug)")
    if cause.flip_not_aligned:
        parts.append(f"{count(cause.flip_not_aligned)} flipped but still differ with ORT's codes forced on eager")
    return (f"{count(cause.failures - cause.flipped_near_tie)} of {count(cause.failures)} failures are not explained "
            f"by a flipped near-tie, possible bug: {'; '.join(parts)}")


def _first_mode(rates: pd.DataFrame, model: str):
    rows = rates[rates.model == model]
    return rows.iloc[0] if len(rows) else None


def class_finding(model: str, checks: pd.DataFrame, rates: pd.DataFrame) -> Finding:
    """The question itself for one class: what its failing checks are, and how often per seed (first shape
    mode), beside the seed's rate for the class it measured."""
    mode_checks = checks[(checks.model == model) & (checks.shape_mode == checks.shape_mode.iloc[0])]
    cause = failure_causes(mode_checks).iloc[0]
    rate = _first_mode(rates, model)
    failed, screened = int(rate.failed), int(rate.screened)
    ours = rate_text(failed, screened)
    partial = int(rate.checked) < int(rate.below_threshold)
    capped = (f" (only {count(rate.checked)} of {count(rate.below_threshold)} candidates checked: the rate is a lower "
              "bound)" if partial else "")
    claim = f"{model} ({rate.shape_mode} export): {_cause_words(cause)}; {ours}{capped}."
    unexplained = cause.failures - cause.flipped_near_tie
    if model != SEED_MODEL:
        return Finding(claim, ours, "new", evidence="failure causes and rates tables")
    seed_k, seed_n = int(reference.value("failures")), int(reference.value("seeds_screened"))
    seed = (f"{count(seed_k)} failures in {count(seed_n)} seeds, {one_in(seed_k / seed_n)}, every one a flipped "
            f"near-tie ({_seed_label('5')})")
    verdict, expected = rate_verdict(failed, screened, seed_k, seed_n)
    ours = f"{ours}; {expected}"  # a zero is shown with what the seed's rate expected
    if partial and not unexplained:
        return Finding(claim, ours, "not comparable", seed=seed, evidence="failure causes and rates tables",
                       why=f"only {count(rate.checked)} of {count(rate.below_threshold)} candidates checked "
                           "(max_checks)")
    if unexplained:
        return Finding(claim, ours, "differs", seed=seed, evidence="failure causes and rates tables",
                       why=f"{count(unexplained)} failures not explained by a flipped near-tie (possible bug)")
    return Finding(claim, ours, verdict, seed=seed, why="" if verdict == "reproduced" else expected,
                   evidence="failure causes and rates tables")


def other_classes_finding(models: list[str], checks: pd.DataFrame, rates: pd.DataFrame,
                          immune: list[str]) -> Finding:
    """The classes the seed did not measure, in one record (ours only)."""
    parts = [class_finding(m, checks, rates).claim.rstrip(".") for m in models]
    parts += [f"{m} never calls its quantizer in eval forward (no argmax, no flip possible)" for m in immune]
    ours = "; ".join(rate_text(int(_first_mode(rates, m).failed), int(_first_mode(rates, m).screened))
                     for m in models) or "no argmax to flip"
    return Finding("Classes the seed did not measure: " + "; ".join(parts) + ".", ours, "new",
                   evidence="failure causes and rates tables")


# ---------------------------------------------------------------------------------------------------------
# Candidates, exact ties, prediction


def candidates_finding(screen: pd.DataFrame, checks: pd.DataFrame, threshold: float) -> Finding:
    """Seeds below the threshold per class; the seed's 273 of 40,000 only beside the conformer, and only at
    its threshold (a candidate count depends on it). Exact ties: checked seeds with gap 0, and their flips."""
    below = (screen.min_gap < threshold).groupby(screen.model).sum()
    screened = screen.groupby("model").size()
    ties = checks[checks.exact_tie.astype(bool)] if len(checks) else checks
    tie_flips = int((ties.n_flipped_rows > 0).sum()) if len(ties) else 0
    per_class = "; ".join(f"{m} {count(below[m])} of {count(screened[m])}" for m in below.index)
    tie_words = (f"{count(ties.seed.nunique() if len(ties) else 0)} checked seeds had an exact tie (gap 0), "
                 f"{count(tie_flips)} of them flipped")
    claim = f"Seeds whose smallest gap is below {threshold:g}: {per_class}. {tie_words}."
    ours = per_class
    if SEED_MODEL not in below.index:
        return Finding(claim, ours, "new", evidence="screen per class table")
    seed_k, seed_n = int(reference.value("candidates")), int(reference.value("seeds_screened"))
    seed_threshold = reference.value("threshold")
    seed = f"{count(seed_k)} candidates in {count(seed_n)} seeds below {seed_threshold:g} ({_seed_label('5')})"
    if not math.isclose(threshold, seed_threshold, rel_tol=1e-9):
        return Finding(claim, ours, "not comparable", seed=seed,
                       why=f"other threshold (ours {threshold:g}, the seed's {seed_threshold:g})",
                       evidence="screen per class table")
    verdict, why = rate_verdict(int(below[SEED_MODEL]), int(screened[SEED_MODEL]), seed_k, seed_n)
    ours = f"{ours}; {SEED_MODEL}: {why}"
    return Finding(claim, ours, verdict, seed=seed, why=why if verdict != "reproduced" else "",
                   evidence="screen per class table")


def _poisson_cdf(k: int, mean: float) -> float:
    if k < 0:
        return 0.0
    term = total = math.exp(-mean)
    for i in range(1, k + 1):
        term *= mean / i
        total += term
    return min(1.0, total)


def poisson_interval(mean: float, level: float = 0.95) -> tuple[int, int]:
    """The central `level` interval of a Poisson count with this mean: the smallest low with
    P(X < low) <= (1 - level) / 2, the smallest high with P(X > high) <= (1 - level) / 2."""
    tail = (1 - level) / 2
    low = 0
    while _poisson_cdf(low, mean) <= tail:  # P(X <= low) <= tail: low is still in the lower tail
        low += 1
    high = low
    while 1 - _poisson_cdf(high, mean) > tail:
        high += 1
    return low, high


def prediction_check(prediction: pd.DataFrame) -> pd.DataFrame:
    """Per class: predicted flips and failures, their 95% Poisson intervals, and whether the measured counts
    fall inside them."""
    rows = []
    for r in prediction.itertuples():
        flips, fails = poisson_interval(r.predicted_flips), poisson_interval(r.predicted_failures)
        rows.append({"model": r.model, "predicted_flips": r.predicted_flips, "flips_low": flips[0],
                     "flips_high": flips[1], "measured_flips": int(r.measured_flips),
                     "predicted_failures": r.predicted_failures, "failures_low": fails[0],
                     "failures_high": fails[1], "measured_failures": int(r.measured_failures),
                     "flips_inside": flips[0] <= r.measured_flips <= flips[1],
                     "failures_inside": fails[0] <= r.measured_failures <= fails[1]})
    return pd.DataFrame(rows)


def prediction_finding(prediction: pd.DataFrame) -> Finding:
    checked = prediction_check(prediction)
    outside = checked[~(checked.flips_inside & checked.failures_inside)]
    ours = "; ".join(f"{r.model}: flips {significant(r.predicted_flips)} predicted ({r.flips_low} to {r.flips_high}), "
                     f"{r.measured_flips} measured; failures {significant(r.predicted_failures)} predicted "
                     f"({r.failures_low} to {r.failures_high}), {r.measured_failures} measured"
                     for r in checked.itertuples())
    if len(outside):
        claim = (f"A screen of gaps alone does not predict the rate in {len(outside)} of {len(checked)} classes "
                 f"({', '.join(outside.model)}): measured flips or failures outside the 95% Poisson interval of "
                 "the predicted count.")
    else:
        where = "in the one class" if len(checked) == 1 else f"in all {len(checked)} classes"
        claim = (f"A screen of gaps alone (no export) predicts the rate: {where} the measured flips and failures "
                 "lie within the 95% Poisson interval of the predicted count.")
    return Finding(claim, ours, "new", evidence="prediction table and predicted-against-measured figure")


# ---------------------------------------------------------------------------------------------------------
# Noise, tolerance, the tie-aware comparison

_NOISE_KEYS = {"conv_features": "noise_conv_features", "extract_features": "noise_extract_features",
               "logits": "noise_logits"}


def noise_finding(noise: pd.DataFrame) -> Finding | None:
    """The conformer's median max abs diffs (over all its checked seeds' named tensors) beside the seed's
    three medians: reproduced when each is within NOISE_FACTOR of the seed's."""
    ours_rows = noise[noise.model == SEED_MODEL] if len(noise) else noise
    if not len(ours_rows):
        return None
    sides = [c for c in ("passing", "failing") if c in ours_rows]
    medians = {r.label: float(np.nanmedian([getattr(r, c) for c in sides])) for r in ours_rows.itertuples()}
    seed_values = {label: reference.value(key) for label, key in _NOISE_KEYS.items() if label in medians}
    ratios = {label: medians[label] / seed_values[label] for label in seed_values}
    within = all(1 / NOISE_FACTOR <= x <= NOISE_FACTOR for x in ratios.values())
    ours = ", ".join(f"{label} {significant(medians[label])}" for label in seed_values)
    seed = ", ".join(f"{label} {significant(v)}" for label, v in seed_values.items()) + f" ({_seed_label('3')})"
    words = "within" if within else "not all within"
    claim = (f"Eager and ORT differ by float noise on the way to the argmax: {SEED_MODEL} median max abs "
             f"difference {ours}, {words} a factor {NOISE_FACTOR:g} of the seed's.")
    why = "" if within else ("ratios to the seed's medians: "
                             + ", ".join(f"{label} {significant(x)}" for label, x in ratios.items()))
    return Finding(claim, ours, "reproduced" if within else "differs", seed=seed, why=why,
                   evidence="noise table")


def tolerance_finding(tolerance: pd.DataFrame) -> Finding | None:
    """The rtol one flip of the smallest-gap row needs on the perplexity (median per class), beside the
    seed's rough ~1e-2 observed / 3e-2 worst (measured on the conformer)."""
    measured = tolerance[tolerance.simulated_flips > 0] if len(tolerance) else tolerance
    if not len(measured):
        return None
    per_class = "; ".join(f"{r.model} median {significant(r.rtol_one_flip_median)}, worst "
                          f"{significant(r.rtol_one_flip_worst)}" for r in measured.itertuples())
    claim = (f"A tolerance that absorbs one flip of the smallest-gap row would need an rtol on the perplexity of: "
             f"{per_class}; it would apply to every output of every class.")
    conformer = measured[measured.model == SEED_MODEL]
    if not len(conformer):
        return Finding(claim, per_class, "new", evidence="tolerance table")
    row = conformer.iloc[0]
    seed_obs, seed_worst = reference.value("rtol_observed"), reference.value("rtol_worst")
    seed = f"about {seed_obs:.0e} observed, {seed_worst:.0e} worst ({_seed_label('6')})"
    # the seed's figures are orders of magnitude: the same order means the median within a factor 10 of
    # the observed one and the worst case not above ten times the seed's worst
    same_order = (seed_obs / 10 <= row.rtol_one_flip_median <= seed_obs * 10
                  and row.rtol_one_flip_worst <= 10 * seed_worst)
    why = "" if same_order else (f"{SEED_MODEL} median {significant(row.rtol_one_flip_median)}, worst "
                                 f"{significant(row.rtol_one_flip_worst)}: not the seed's order of magnitude")
    return Finding(claim, per_class, "reproduced" if same_order else "differs", seed=seed, why=why,
                   evidence="tolerance table")


def tie_aware_finding(checks: pd.DataFrame, defects: pd.DataFrame, bound: float) -> Finding:
    """Does the tie-aware comparison pass every check whose only difference is a flipped near-tie, and catch
    every injected defect? (The seed proposed skipping the values; it measured no such comparison.)"""
    flipped = checks[checks.n_flipped_rows > 0]
    ties_passed = int(flipped.tie_aware_passed.astype(bool).sum())
    all_passed = int(checks.tie_aware_passed.astype(bool).sum())
    caught = int(defects.caught_by_tie_aware.sum()) if len(defects) else 0
    rule_caught = int(defects.caught_by_test_rule.sum()) if len(defects) else 0
    ours = (f"passes {count(all_passed)} of {count(len(checks))} checks ({count(ties_passed)} of "
            f"{count(len(flipped))} with a flip); catches {count(caught)} of {count(len(defects))} defects")
    keeps = all_passed == len(checks) and caught == len(defects) and len(defects) > 0
    verb = "keeps" if keeps else "does not keep"
    claim = (f"A tie-aware comparison (flips excused within the noise bound {significant(bound)}, every output "
             f"then compared at full tolerance) {verb} value checks: it {ours} (the export test's rule catches "
             f"{count(rule_caught)}).")
    return Finding(claim, ours, "new", evidence="defects table")


# ---------------------------------------------------------------------------------------------------------


def findings(screen: pd.DataFrame, checks: pd.DataFrame, rates: pd.DataFrame, prediction: pd.DataFrame,
             noise: pd.DataFrame, tolerance: pd.DataFrame, defects: pd.DataFrame, threshold: float,
             bound: float, immune: list[str] = ()) -> list[Finding]:
    """3 to 7 records: the conformer's failures beside the seed, the other classes, candidates and exact
    ties, the prediction, noise, tolerance and the tie-aware comparison (those that the run measured)."""
    if not len(checks):
        return [candidates_finding(screen, checks, threshold)]
    models = sorted(checks.model.unique())
    out = [class_finding(SEED_MODEL, checks, rates)] if SEED_MODEL in models else []
    others = [m for m in models if m != SEED_MODEL]
    if others or immune:
        out.append(other_classes_finding(others, checks, rates, list(immune)))
    out.append(candidates_finding(screen, checks, threshold))
    if len(prediction):
        out.append(prediction_finding(prediction))
    out += [f for f in (noise_finding(noise), tolerance_finding(tolerance)) if f]
    out.append(tie_aware_finding(checks, defects, bound))
    return out[:7]
