"""The discrete-ops study's findings: every claim's figures and verdict word come from the tables.

Seed 000 measured one class's flip rate (Wav2Vec2ConformerForPreTraining: 17 seeds with a flipped quantizer
row in 40,000): that class's rate of seeds with a flipped quantizer argmax is set beside it. The two are
compared only where the comparison could contradict the seed: "reproduced" needs enough seeds that finding no
flip at all would have been inconsistent with the seed's rate; with fewer, a consistent count says nothing
and the verdict is "not comparable". Everything else this study measures is new (verdict "new").
"""

from __future__ import annotations

import pandas as pd

from exactness import reference
from exactness.compare.rates import binomial_two_sided_p
from exactness.studies.discrete_ops import verdicts as v
from exactness.workbook.findings import Finding, count, rate_text, rate_verdict, significant

SEED_MODEL = "Wav2Vec2ConformerForPreTraining"
SEED_OP = ("argmax", "quantizer")  # the op seed 000 counted flips of: category and module scope
LEVEL = 0.05


def _names(frame: pd.DataFrame) -> str:
    return ", ".join(frame.model.tolist()) or "none"


def overview(verdicts: pd.DataFrame) -> Finding:
    exported = verdicts[verdicts.verdict != v.EXPORT_FAILED]
    counts = exported.verdict.value_counts()
    parts = "; ".join(f"{n} {verdict}" for verdict, n in counts.items())
    failed = verdicts[verdicts.verdict == v.EXPORT_FAILED]
    return Finding(f"{count(len(exported))} of {count(len(verdicts))} class graphs exported and were checked: {parts}"
                   + (f"; export failed for {_names(failed)}" if len(failed) else "") + ".",
                   f"{count(len(exported))} checked", "new", evidence="verdicts table")


def not_counted(ops: pd.DataFrame) -> Finding | None:
    """Which discrete ops were found but cannot flip on their own, grouped by why (the scanner's reasons)."""
    if not len(ops):
        return None
    skipped = ops[ops.not_counted.fillna("") != ""] if "not_counted" in ops else ops.iloc[:0]
    found = count(len(ops))
    if not len(skipped):
        return Finding(f"Every one of the {found} discrete ops found reads float arithmetic of the weights or inputs "
                       "(or is a random draw): all count.", f"0 of {found} left out", "new", evidence="ops table")
    parts = []
    for reason, group in skipped.groupby("not_counted", sort=False):
        where = "; ".join(f"{', '.join(sorted(set(g.op_type)))} in {model}" for model, g in group.groupby("model"))
        parts.append(f"{count(len(group))} where the op {reason} ({where})")
    left = count(len(skipped))
    return Finding(f"{left} of {found} discrete ops found cannot flip on their own and are not counted as near-ties, "
                   "flips or tie fractions: " + "; ".join(parts) + ".", f"{left} of {found} left out", "new",
                   evidence="ops table, column not counted")


def control(verdicts: pd.DataFrame) -> Finding | None:
    clean = verdicts[verdicts.verdict == v.NO_DISCRETE]
    if not len(clean):
        return None
    worst = clean.tolerance_ulps.max()
    return Finding(f"No discrete op that can flip reaches an output of {_names(clean)}: their values compare within "
                   f"the test's tolerance, the largest eager-ORT difference being {worst:.3g} ulps of the output's "
                   "scale.", f"{worst:.3g} ulps of scale", "new", evidence="ops and verdicts tables")


def noise_only(verdicts: pd.DataFrame) -> Finding | None:
    noisy = verdicts[verdicts.verdict == v.NOISE_ONLY]
    if not len(noisy):
        return None
    parts = "; ".join(f"{r.model} by up to {r.tolerance_abs:.2g} ({r.tolerance_ulps:.3g} ulps of scale)"
                      for r in noisy.itertuples())
    return Finding(f"No discrete op reaches an output, yet the values differ beyond the test's tolerance: {parts}. "
                   "The skip's reason is set beside it in the verdicts table.",
                   f"{noisy.tolerance_abs.max():.2g} largest", "new", evidence="verdicts table")


def skip_reasons(verdicts: pd.DataFrame) -> Finding | None:
    skipped = verdicts[(verdicts.skip_reason_reference != "") & (verdicts.verdict != v.EXPORT_FAILED)]
    if not len(skipped):
        return None
    judged = skipped[skipped.reason_holds.notna()]
    holds = judged[judged.reason_holds.astype(bool)]
    other = judged[~judged.reason_holds.astype(bool)]
    open_ = skipped[skipped.reason_holds.isna()]
    return Finding(f"The export test's stated reason matches the measured verdict for {len(holds)} of {len(skipped)} "
                   f"skipped classes" + (f" ({_names(holds)})" if len(holds) else "") + (
                       "; it does not for " + "; ".join(
                           f"{r.model} (claimed {r.reason_claim}, measured {r.measured_cause or r.verdict})"
                           for r in other.itertuples()) if len(other) else "") + (
                       f"; undecided for {_names(open_)}, where a mismatch remains unexplained" if len(open_) else "")
                   + ".", f"{len(holds)} of {len(skipped)}", "new", evidence="verdicts table, reason beside verdict")


def counterfactual(table: pd.DataFrame) -> Finding | None:
    if not len(table):
        return Finding("No discrete op flipped on any checked seed: there was nothing for the counterfactual to "
                       "explain.", "0 flipped seeds", "new", evidence="margins table")
    per_seed = table.groupby(["model", "shape_mode", "seed"]).explained_by_flip.all()
    explained = int(per_seed.sum())
    left = per_seed[~per_seed].reset_index()
    return Finding(f"Forcing ORT's choices on eager makes every output agree with ORT within float noise on "
                   f"{explained} of {len(per_seed)} seeds with a flip"
                   + (f"; a difference remains on {len(left)} ({', '.join(sorted(set(left.model)))})" if len(left)
                      else ": every mismatch there is the flipped choice") + ".",
                   f"{explained} of {len(per_seed)} seeds", "new", evidence="counterfactual table")


def seeds_for_power(seed_k: int, seed_n: int, limit: int = 10**9) -> int:
    """The fewest seeds with which finding no flip at all would be inconsistent with the seed's rate."""
    low, high = 1, limit
    if binomial_two_sided_p(0, high, seed_k, seed_n) >= LEVEL:
        return limit
    while low < high:
        mid = (low + high) // 2
        low, high = (mid + 1, high) if binomial_two_sided_p(0, mid, seed_k, seed_n) >= LEVEL else (low, mid)
    return low


def seed_class_rate(verdicts: pd.DataFrame, margins: pd.DataFrame, ops: pd.DataFrame) -> Finding | None:
    """Seeds with a flipped quantizer argmax of the seed's class, beside seed 000's count."""
    row = verdicts[(verdicts.model == SEED_MODEL) & (verdicts.verdict != v.EXPORT_FAILED)]
    if not len(row) or not len(ops) or not len(margins):
        return None
    mode = row.iloc[0].shape_mode
    mine = ops[(ops.model == SEED_MODEL) & (ops.shape_mode == mode) & (ops.category == SEED_OP[0])
               & ops.scope.str.endswith(SEED_OP[1])]
    seeds = margins[(margins.model == SEED_MODEL) & (margins.shape_mode == mode)]
    seed_k, seed_n = int(reference.value("flips")), int(reference.value("seeds_screened"))
    seed_text = f"seed 000, section 5, {SEED_MODEL}: {seed_k} seeds with a flipped quantizer row in {seed_n:,}"
    rows = seeds[seeds.node.isin(set(mine.node))]
    if not len(mine) or rows.flipped.isna().all():
        return Finding(f"{SEED_MODEL}: its quantizer argmax was not found or not matched to eager, so its flips "
                       "were not counted.", "no count", "not comparable", seed=seed_text,
                       why="not the measure the seed counted", evidence="ops and margins tables")
    n = int(seeds.seed.nunique())
    k = int(rows[rows.flipped.fillna(0) > 0].seed.nunique())
    verdict, why = rate_verdict(k, n, seed_k, seed_n)
    needed = seeds_for_power(seed_k, seed_n)
    if verdict == "reproduced" and binomial_two_sided_p(0, n, seed_k, seed_n) >= LEVEL:
        verdict = "not comparable"
        why = (f"{why}; but with {count(n)} seeds no flip at all would be consistent with it too, so agreement says "
               f"nothing: about {count(needed)} seeds are needed before finding none could contradict the seed")
    why += (f" (the seed screened {seed_n:,} seeds by their smallest gap and compared the "
            f"{int(reference.value('candidates'))} below {significant(reference.value('threshold'))}, on torch 2.15; "
            f"we compare every seed, {mode} export)")
    return Finding(f"{SEED_MODEL}: {rate_text(k, n, 'seeds with a flipped quantizer argmax')}.", f"{k} in {n}", verdict,
                   seed=seed_text, why=why, evidence="margins table, the quantizer's ArgMax")


def findings(verdicts: pd.DataFrame, counterfactual_table: pd.DataFrame, ops: pd.DataFrame,
             margins: pd.DataFrame) -> list[Finding]:
    found = [overview(verdicts), not_counted(ops), control(verdicts), noise_only(verdicts), skip_reasons(verdicts),
             counterfactual(counterfactual_table), seed_class_rate(verdicts, margins, ops)]
    return [f for f in found if f is not None]
