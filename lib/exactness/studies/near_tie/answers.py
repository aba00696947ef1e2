"""The near-tie report's answer table: per class, the cause of its export-test failures, what the test should
do, and how often it fails and how often a code flips (`wording.rate`: 1 in N with its 95% interval). Read from
the run's checks, screen and defects tables (the first shape mode, as the rates table), never from the sentences."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from exactness import published
from exactness.causes import Cause
from exactness.compare.rates import PER, Estimate, RatePolicy, estimate
from exactness.studies.near_tie import findings as near_tie_findings
from exactness.studies.near_tie.planted import DefectTally, size_words
from exactness.studies.near_tie.rate import Tally
from exactness.studies.near_tie.scale import is_candidate
from exactness.workbook import wording
from exactness.workbook.answers import Answer, Columns
from exactness.workbook.findings import count, significant
from exactness.workbook.presentation import plural

COLUMNS = Columns(rate="export test fails", flips="a code row flips")


@dataclass(frozen=True)
class ClassCounts:
    """One class's counts in the first shape mode: what its answer line says, each from the tables."""

    model: str
    shape_mode: str
    screened: int
    candidates: int
    tally: Tally
    near_tie: int  # failures a flipped near-tie explains (ORT's codes forced on eager: every output agrees)
    no_flip: int  # failures without any flipped code
    flip_apart: int  # failures that flipped but still differ with ORT's codes forced

    @property
    def unexplained(self) -> int:
        return self.no_flip + self.flip_apart

    def estimated(self, events: int) -> Estimate:
        """A count over the screened seeds as every study estimates it (`compare.rates.estimate`): the candidates
        are the seeds within reach of a flip, checked smallest gaps first; beyond them none has the event (the
        screen's premise)."""
        return estimate(events, self.tally.checks, self.candidates, self.screened)


def class_counts(screen: pd.DataFrame, checks: pd.DataFrame, threshold: float,
                 threshold_ulps: float = 0.0) -> list[ClassCounts]:
    mode = checks.shape_mode.iloc[0] if len(checks) else ""
    first = checks[checks.shape_mode == mode] if len(checks) else checks
    causes = near_tie_findings.failure_causes(first).set_index("model") if len(first) else pd.DataFrame()
    found = []
    for model, group in screen.groupby("model", sort=True):
        mine = first[first.model == model] if len(first) else first
        cause = causes.loc[model] if model in causes.index else None
        found.append(ClassCounts(
            model, mode, len(group), int(is_candidate(group, threshold, threshold_ulps).sum()), Tally.of(mine),
            int(cause.flipped_near_tie) if cause is not None else 0, int(cause.no_flip) if cause is not None else 0,
            int(cause.flip_not_aligned) if cause is not None else 0))
    return found


def rate_words(failed: int, seeds: int, partial: str = "") -> str:
    """The one rate shape (`wording.rate`) with what makes it partial: a count of the checked candidates only."""
    return wording.rate(failed, seeds) + partial


def _partial(c: ClassCounts) -> str:
    return f"; only {count(c.tally.checks)} of {plural(c.candidates, 'candidate')} checked" \
        if c.tally.checks < c.candidates else ""


def _words(e: Estimate, c: ClassCounts) -> str:
    """An estimate in the one rate shape: Wilson's interval where every candidate was checked, else a range whose
    upper end counts every unchecked candidate."""
    if e.exact:
        return rate_words(e.observed, c.screened)
    return wording.rate(e.observed, c.screened, low=e.low / PER, high=e.high / PER, point=e.per / PER,
                        worst_case=e.worst_case) + _partial(c)


def _remove_skip(model: str) -> str:
    """' (remove the skip)' for a class the export test skips; nothing to remove for one it compares already."""
    return " (remove the skip)" if published.skip_reason(model) else ""


def _tie_aware(checks: pd.DataFrame, defects: pd.DataFrame) -> tuple[bool, str]:
    """Whether the tie-aware comparison passed every check of the run and caught every required planted defect
    (`planted.DefectTally`), and the words that say so."""
    if not len(checks) or "tie_aware_passed" not in checks or not len(defects):
        return False, ""
    passed, tally = int(checks.tie_aware_passed.astype(bool).sum()), DefectTally.of(defects)
    holds = passed == len(checks) and tally.keeps
    return holds, (f"tie-aware comparison passes {count(passed)} of {plural(len(checks), 'check')} and catches "
                   f"{count(tally.tie_aware)} of {plural(tally.required, 'required planted defect')}, and on every "
                   f"seed {size_words(tally.smallest_tie_aware)} (the export test's rule: {count(tally.test_rule)}, "
                   f"and {size_words(tally.smallest_test_rule)})")


def _flip_changes(outputs: pd.DataFrame, checks: pd.DataFrame, model: str) -> tuple[list[str], list[str]]:
    """(every output of `model`, those a flipped code moved beyond the test's tolerance on one of its checks): the
    engine's rule (`discrete_ops.verdicts.changed_by_flips`), per class, not whether the output still passes
    alone: a flip that moves one frame's quantized vector passes under the test's 5% allowance only because the
    sequence is long enough."""
    outputs = outputs[outputs.model == model] if len(outputs) else outputs
    checks = checks[checks.model == model] if len(checks) else checks
    if not len(outputs) or not len(checks):
        return [], []
    flipped = checks[checks.n_flipped_rows > 0][["model", "seed", "shape_mode"]]
    hit = outputs.merge(flipped, on=["model", "seed", "shape_mode"])
    moved = hit.n_mismatched > 0 if "n_mismatched" in hit else ~hit.passes_alone.astype(bool)
    return sorted(set(outputs.output)), sorted(set(hit[moved].output))


def _tie_action(outputs: tuple[list[str], list[str]], keeps: bool, bound: float, near: bool) -> str:
    """The engine's action for a tie class (`discrete_ops.verdict_words.action`): compare what no flip moved, exclude
    the rest, or compare those tie-aware, said verified where this run verified it."""
    every, changed = outputs
    tie_aware = (f" (or compare them tie-aware: excuse code rows within the noise bound {significant(bound)}, "
                 "verified here)" if keeps else " (or compare them tie-aware)" if near else "")
    if changed:
        rest = [o for o in every if o not in changed]
        return f"compare {', '.join(rest) or 'nothing'}; exclude {', '.join(changed)}{tie_aware}"
    return ("compare tie-aware: excuse code rows within the noise bound "
            f"{significant(bound)}, then every output at full tolerance" if keeps else
            "exclude the outputs a flipped code changes (codevector_perplexity first)")


def _answer(c: ClassCounts, tie_aware: tuple[bool, str], changed: tuple[list[str], list[str]],
            bound: float) -> Answer:
    failures = c.estimated(c.tally.failed)
    seed_k, seed_n = int(published.value("failures")), int(published.value("seeds_screened"))
    t = c.tally
    keeps, tie_words = tie_aware
    exact = t.failed and t.exact_ties_failed == t.failed
    tie_action = _tie_action(changed, keeps, bound, near=not exact)
    if c.unexplained:
        cause = Cause.UNDECIDED.value
        action = "look at the failure-causes table: a failure no flipped near-tie explains may be a bug"
        proof = (f"{count(c.unexplained)} of {plural(t.failed, 'failure')} not explained by a flipped near-tie "
                 f"({count(c.no_flip)} without a flip, {count(c.flip_apart)} still apart with ORT's codes forced)")
    elif t.failed:
        cause = (Cause.EXACT_TIE if exact else Cause.NEAR_TIE).value
        action = tie_action
        proof = (f"every one of {plural(t.failed, 'failure')} flipped a code row whose eager gap is within the "
                 "noise, and forcing ORT's codes on eager makes every output agree" + (f"; {tie_words}" if tie_words
                                                                                        else ""))
    elif (policy := RatePolicy(seed_k / seed_n)).upper_bound(c.screened) < policy.rate:
        cause, action = Cause.NEVER_FLIPS.value, "compare every output at the test's tolerance" + _remove_skip(c.model)
        proof = (f"no failure in {plural(c.screened, 'seed')}: the rate is at most "
                 f"{wording.one_in(policy.upper_bound(c.screened))} (one-sided 95% bound), under the investigation's "
                 f"{wording.one_in(seed_k / seed_n)} ({count(seed_k)} of {plural(seed_n, 'seed')})")
    else:
        needed = policy.seeds_needed()
        cause = Cause.UNDECIDED.value
        action = (f"screen about {count(needed)} seeds (-p n_seeds {needed}): with no failure they bound the rate "
                  f"below the investigation's" + (f"; meanwhile {tie_action}" if keeps else ""))
        proof = (f"{plural(t.flipped, 'flip')} and no failure in {plural(t.checks, 'check')} of "
                 f"{plural(c.screened, 'screened seed')}: too few to tell the rate from the investigation's "
                 f"{count(seed_k)} in {count(seed_n)}" + (f"; {tie_words}" if tie_words else ""))
    return Answer(c.model, cause, action, _words(failures, c), proof, failures_per_40000=failures.per,
                  failures_low=failures.low, failures_high=failures.high, verified=keeps if t.checks else None,
                  flips=_words(c.estimated(t.flipped), c))


def _no_argmax_proof(model: str) -> str:
    """A class that never runs its argmax, and #50575's reason for skipping it where it gave one."""
    proof = "its quantizer is not called in eval forward: no code to flip"
    if model == "UniSpeechSatForPreTraining":
        proof += (f"; #50575 (section 5) skipped it because \"{published.UNISPEECHSAT_REASON}\": its forward never "
                  "runs that argmax, so the reason does not hold")
    return proof


def answers(screen: pd.DataFrame, checks: pd.DataFrame, outputs: pd.DataFrame, defects: pd.DataFrame,
            threshold: float, bound: float, immune: list[str] = (), threshold_ulps: float = 0.0) -> list[Answer]:
    """One line per class screened, then one per class that never calls its quantizer."""
    tie_aware = _tie_aware(checks, defects)
    found = [_answer(c, tie_aware, _flip_changes(outputs, checks, c.model), bound)
             for c in class_counts(screen, checks, threshold, threshold_ulps)]
    found += [Answer(model, Cause.NOTHING_REACHES.value,
                     "compare every output at the test's tolerance" + _remove_skip(model),
                     "never (no argmax runs)", _no_argmax_proof(model),
                     failures_per_40000=0.0, failures_low=0.0, failures_high=0.0, flips=wording.NEVER_FLIPS)
              for model in immune]
    return found
