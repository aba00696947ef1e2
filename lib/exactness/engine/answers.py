"""A verdict's answer line (`workbook.answers.Answer`), worded once for every study that asks the engine: its cause,
action, the export test's failures and the flips as rates of one shape (`workbook.wording`), and the proof with
where the flips were counted and what the recommended comparison still catches."""

from __future__ import annotations

from exactness.engine import verdicts as v
from exactness.engine.outputs import PLANTS
from exactness.workbook import wording
from exactness.workbook.answers import Answer
from exactness.workbook.wording import count, plural


def rate_words(estimate: v.Estimate | None) -> str:
    """`wording.rate` of a class's estimate: over every seed it counts, the screened ones where a screen ran; a
    count of none is a bound as the rate verdicts bound it (`RatePolicy`), so one 0 of N has one bound; where
    seeds that could fail were left unchecked, the count is of the checked ones and the upper end a worst case."""
    if estimate is None or not estimate.seeds:
        return "not measured"
    if estimate.exact:  # a plain k of n: its interval (and a none's bound) is the one every rate of k of n has
        return wording.rate(estimate.observed, estimate.seeds)
    return wording.rate(estimate.observed, estimate.seeds, low=estimate.low / v.PER, high=estimate.high / v.PER,
                        point=estimate.per / v.PER, worst_case=estimate.worst_case,
                        checked=None if estimate.exact else estimate.checked)


def flip_rate(verdict: v.ClassVerdict) -> str:
    """The flips column: how often a discrete choice flips, "never" with why where no op can flip."""
    if verdict.cause is v.Cause.NO_EXPORT:
        return ""
    if not verdict.counted:
        return wording.NEVER_FLIPS
    return rate_words(verdict.flips)


def flip_words(verdict: v.ClassVerdict) -> str:
    """Where the flip rate comes from, in a sentence (the rate is its own column; "" where no op can flip)."""
    if verdict.cause is v.Cause.NO_EXPORT or not verdict.counted:
        return ""
    seen = f"{count(verdict.screened)} seeds screened" if verdict.screened else \
        f"{plural(verdict.checked, 'seed')} checked, none screened"
    ties = f", {count(verdict.ties)} of them exact ties" if verdict.ties else ""
    checked = "" if not verdict.screened else "; none within reach of a tie" if not verdict.candidates else (
        f"; {count(verdict.checked_candidates)} of the {count(verdict.candidates)} within reach of a tie checked")
    if verdict.flips is None or verdict.flips.observed == 0:
        return f"No flip in {seen}{ties}{checked}."
    return f"Flips counted over {seen}{ties}{checked}."


def catch_words(verification: v.Verification) -> str:
    """What the compared outputs' rule still catches, measured with each defect of `outputs.PLANTS` planted in one
    compared output at a time on every checked seed ("" when nothing was planted)."""
    n = verification.planted
    if not n:
        return ""
    counts = "; ".join(f"{plant.words} on {count(verification.caught.get(plant.column, 0))} of {count(n)}"
                       for plant in PLANTS)
    smallest = (f"the smallest few-element defect caught on every pair: {verification.smallest}"
                if verification.smallest else "no few-element defect is caught on every pair")
    return (f"Planted in one compared output at a time ({plural(n, 'seed-output pair')}), the export test's rule "
            f"catches {counts}; {smallest}.")


def _sentence(text: str) -> str:
    text = text.strip()
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".") if text else ""


def answer(verdict: v.ClassVerdict, subject: str) -> Answer:
    """The verdict's line in the answer table; `subject`: how the line names the class."""
    failures = verdict.failures
    proof = " ".join(part for part in (
        flip_words(verdict), _sentence(verdict.proof),
        catch_words(verdict.verification) if verdict.exclude else "",
        f"Starts at {verdict.where}." if verdict.where else "",
        _sentence(f"the skip's stated reason does not hold: {verdict.refutation}") if verdict.refutation else "")
        if part)
    rate = wording.NEVER_FLIPS if verdict.evidence.never_runs else rate_words(failures)
    return Answer(subject, verdict.cause.value, verdict.action, rate, proof, verdict.compare,
                  verdict.exclude, verdict.where, failures.per if failures else None,
                  failures.low if failures else None, failures.high if failures else None,
                  verdict.verification.holds if verdict.verification.seeds else None, flip_rate(verdict))
