"""The discrete-ops study's findings, each at most two lines, every figure from the run's `Result`.

The quantizer argmax near-tie investigation (transformers #50575) measured one class's flips: 17 seeds with a
flipped quantizer row in 40,000 draws of Wav2Vec2ConformerForPreTraining. That class's count of seeds with a
flipped quantizer argmax is set beside it, and compared only where the comparison could contradict the
investigation's: "reproduced" needs enough seeds that finding no flip at all would have been inconsistent with
its rate; with fewer, agreement says nothing ("not comparable"). Everything else is new.
"""

from __future__ import annotations

from exactness import published
from exactness.engine import place_words, verdict_words
from exactness.engine import verdicts as v
from exactness.engine.answers import catch_words
from exactness.engine.outputs import PLANTS
from exactness.studies.discrete_ops.sentences import made_by, plural
from exactness.studies.discrete_ops.study import Result
from exactness.workbook.findings import Finding, count, rate_text, rate_verdict

SEED_MODEL = published.NEAR_TIE_CLASS
SEED_OP = ("argmax", "quantizer")  # the op the investigation counted flips of: category and module scope


def overview(result: Result) -> Finding:
    causes = {}
    for verdict in result.verdicts:
        causes.setdefault(verdict.cause.value, []).append(verdict.model)
    parts = "; ".join(f"{len(names)} {cause}" for cause, names in sorted(causes.items(), key=lambda i: -len(i[1])))
    modes = list(dict.fromkeys(verdict.shape_mode for verdict in result.verdicts))
    judged = plural(len(result.verdicts), "class", "classes") if len(modes) <= 1 else (
        f"{len(result.verdicts)} exports ({plural(len({x.model for x in result.verdicts}), 'class', 'classes')} "
        f"in {' and '.join(modes)})")
    # an undecided class, or one that did not run, has no cause proven
    undecided = sum(verdict.cause is v.Cause.UNDECIDED for verdict in result.verdicts)
    not_run = sum(verdict.cause is v.Cause.NO_EXPORT for verdict in result.verdicts)
    decided = len(result.verdicts) - undecided - not_run
    left = ", ".join(part for part in (f"{count(undecided)} undecided" if undecided else "",
                                       f"{count(not_run)} not run" if not_run else "") if part)
    proven = ("each with its cause proven in this run" if not left else
              f"{count(decided)} with {'its' if decided == 1 else 'their'} cause proven in this run, {left}"
              if decided else "none of them decided")
    return Finding(f"{judged}, {proven}: {parts}.", parts, "new", evidence="answers table")


def defects(result: Result) -> Finding | None:
    found = [x for x in result.verdicts if x.cause is v.Cause.DEFECT]
    if not found:
        return None
    return Finding(f"{plural(len(found), 'defect')}, not ties or noise: "
                   + "; ".join(f"{x.model} (starts at {place_words.start(x.where) or 'an unlocalized place'}"
                               + (f", made by {made_by(x.stage, x.pass_name)}" if x.stage else "") + ")"
                               for x in found) + ".",
                   f"{len(found)} localized", "new", evidence="answers table, localizations table")


def skip_reasons(result: Result) -> Finding | None:
    skipped = [x for x in result.verdicts if x.skip_reason]
    if not skipped:
        return None
    wrong = [x for x in skipped if x.reason_holds is False]
    holds = [x for x in skipped if x.reason_holds]
    return Finding(f"The export test's stated reason holds for {count(len(holds))} of {count(len(skipped))} skipped "
                   "classes" + (f"; not for {'; '.join(_refuted(x) for x in wrong)}" if wrong else "") + ".",
                   f"{len(holds)} of {len(skipped)}", "new", evidence="verdicts table, reason beside cause")


def _refuted(verdict: v.ClassVerdict) -> str:
    refutation = verdict_words.refutation_of(verdict)
    return verdict.model + (f" ({refutation})" if refutation else "")


def verification(result: Result) -> Finding | None:
    changed = [x for x in result.verdicts if x.cause in (v.Cause.EXACT_TIE, v.Cause.NEAR_TIE, v.Cause.RANDOM_DRAW)]
    if not changed:
        return None
    held = [x for x in changed if x.verification.holds]
    total = v.Verification(planted=sum(x.verification.planted for x in changed),
                           caught={p.column: sum(x.verification.caught.get(p.column, 0) for x in changed)
                                   for p in PLANTS})
    smallest = "; ".join(f"{x.model}: {verdict_words.smallest_words(x.verification, 'none on every pair')}"
                         for x in changed if x.verification.planted)
    drawn = any(x.cause is v.Cause.RANDOM_DRAW for x in changed)
    moves, kind = ("no flip or random draw moves", "tie or random-draw class") if drawn else ("no flip moves",
                                                                                                "tie class")
    return Finding(f"Comparing only the outputs {moves} passes the export test's rule on every checked seed in "
                   f"{len(held)} of {plural(len(changed), kind, kind.replace('class', 'classes'))}. "
                   f"{catch_words(total)}"
                   + (f" By class, the smallest few-element defect caught on every pair: {smallest}." if smallest
                      else ""), f"{len(held)} of {len(changed)} verified", "new",
                   evidence="verdicts table, columns verified, planted, caught_*")


def seed_class_rate(result: Result) -> Finding | None:
    """Seeds with a flipped quantizer argmax of the investigation's class, beside its count."""
    mine = [x for x in result.verdicts if x.model == SEED_MODEL and x.cause is not v.Cause.NO_EXPORT]
    if not mine:
        return None
    verdict = mine[0]
    ops = result.ops[(result.ops.model == SEED_MODEL) & (result.ops.category == SEED_OP[0])
                     & result.ops.scope.str.endswith(SEED_OP[1])]
    seed_k, seed_n = int(published.value("flips")), int(published.value("seeds_screened"))
    seed_text = (f"{published.NEAR_TIE_PR}, section 5, {SEED_MODEL}: {seed_k} seeds with a flipped quantizer row in "
                 f"{seed_n:,}")
    rows = result.margins[(result.margins.model == SEED_MODEL) & result.margins.node.isin(set(ops.node))]
    if not len(ops) or rows.flipped.isna().all():
        return Finding(f"{SEED_MODEL}: its quantizer argmax was not matched to eager, so its flips were not counted.",
                       "no count", "not comparable", source=seed_text, why="not the measure the investigation counted",
                       evidence="ops and margins tables")
    n = verdict.screened or verdict.checked
    k = int(rows[rows.flipped.fillna(0) > 0].seed.nunique())
    result_verdict, why = rate_verdict(k, n, seed_k, seed_n)
    if verdict.candidates > verdict.checked_candidates:
        result_verdict = "not comparable"
        why = (f"only {count(verdict.checked_candidates)} of {count(verdict.candidates)} seeds within reach of a tie "
               "were checked")
    return Finding(f"{SEED_MODEL}: {rate_text(k, n, 'seeds with a flipped quantizer argmax')}.", f"{k} in {n}",
                   result_verdict, source=seed_text, why=why, evidence="margins table, the quantizer's ArgMax")


def findings(result: Result) -> list[Finding]:
    found = [overview(result), defects(result), skip_reasons(result), verification(result), seed_class_rate(result)]
    return [f for f in found if f is not None]
