"""A verdict's answer line (`workbook.answers.Answer`), worded once for every study that asks the engine: its cause,
action, the export test's failures and the flips as rates of one shape (`workbook.wording`), and the proof with
where the flips were counted and what the recommended comparison still catches; and a precision pair's line
(`pairs.PairEvidence`), the same for both studies that run pairs."""

from __future__ import annotations

from exactness.causes import Cause
from exactness.engine import place_words
from exactness.engine import verdict_words as words
from exactness.engine import verdicts as v
from exactness.engine.outputs import PLANTS
from exactness.engine.pairs import PAIR_NOISE_FACTOR, PairEvidence
from exactness.runtimes.sides import Pair, Precision
from exactness.workbook import wording
from exactness.workbook.answers import PAIR_SEPARATOR, Answer
from exactness.workbook.wording import count, plural, significant


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
    ties = f" ({count(verdict.ties)} of those seeds exact ties)" if verdict.ties else ""
    checked = "" if not verdict.screened else "; none within reach of a tie" if not verdict.candidates else (
        f"; {count(verdict.checked_candidates)} of the {count(verdict.candidates)} within reach of a tie checked")
    extra = verdict.checked - verdict.checked_candidates if verdict.screened else 0
    if extra > 0:  # discrete_ops' calibration seeds, or another shape mode's candidates: the flips count them too
        checked += f", and {plural(extra, 'seed')} beyond reach checked too"
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
    smallest = (f"the smallest few-element defect caught on every pair: {words.smallest_words(verification)}"
                if verification.smallest else "no few-element defect is caught on every pair")
    return (f"Planted in one compared output at a time ({plural(n, 'seed-output pair')}), the export test's rule "
            f"catches {counts}; {smallest}.")


def _sentence(text: str) -> str:
    text = text.strip()
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".") if text else ""


NOT_CHECKED = "not measured: no seed checked (no discrete op can flip)"


def answer(verdict: v.ClassVerdict, subject: str) -> Answer:
    """The verdict's line in the answer table; `subject`: how the line names the class."""
    failures = verdict.failures
    where = place_words.where(verdict.where)
    # a defect's own proof leads (a folded proof shows its first sentence); elsewhere the flips are the proof's start
    proven, refuted = _sentence(words.proof_of(verdict)), words.refutation_of(verdict)
    leading = (proven, flip_words(verdict)) if verdict.cause is v.Cause.DEFECT else (flip_words(verdict), proven)
    proof = " ".join(part for part in (
        *leading,
        catch_words(verdict.verification) if verdict.exclude else "",
        f"Starts at {where}." if where else "",
        _sentence(f"the skip's stated reason does not hold: {refuted}") if refuted else "")
        if part)
    # no op can flip, but no seed's values were checked either: float noise alone could still fail the test
    rate = NOT_CHECKED if verdict.evidence.never_called else rate_words(failures)
    measured = failures is not None and failures.seeds > 0 and not verdict.evidence.never_called
    return Answer(subject, verdict.cause.value, words.action_of(verdict), rate, proof, verdict.compare,
                  verdict.exclude, where, failures.per if failures else None,
                  failures.low if failures else None, failures.high if failures else None,
                  verdict.verification.holds if verdict.verification.seeds else None, flip_rate(verdict),
                  failures.seeds if measured else 0)


_TURN_OFF = {
    Precision.TF32_CONV: "turn TF32 off on both sides (torch: torch.backends.cudnn.allow_tf32 = False, as "
                         "transformers' conftest does; ORT's CUDA provider: use_tf32=0)",
    Precision.TF32: "turn TF32 off on both sides (torch: torch.backends.cudnn.allow_tf32 = False and "
                    "torch.backends.cuda.matmul.allow_tf32 = False; ORT's CUDA provider: use_tf32=0)",
    Precision.FP16: "run the export test outside autocast (fp32 on both sides)",
    Precision.BF16: "run the export test outside autocast (fp32 on both sides)",
}


def pair_answer(e: PairEvidence, fp32_rate: str = "", tie_aware: bool = False) -> Answer:
    """A class under a precision pair, its line in the answer table. `fp32_rate`: the class's rate with both sides
    in fp32 (what turning the precision off leaves), if measured; `tie_aware`: a tie-aware comparison was measured
    to keep value checks on the class, so it may be offered; else the flipped choices' outputs are excluded."""
    pair = Pair.parse(e.pair)
    subject, what = f"{e.model}{PAIR_SEPARATOR}{pair.label}", e.cause
    if what is Cause.NO_EXPORT:
        return Answer(subject, what.value, "see the error: the class cannot run on this side", "", e.error)
    noise = (f"{pair.other.label} errs at most {significant(e.other_error_units)} of its roundoff x RMS from float64 "
             f"({e.measured_on}), {pair.reference.label} {significant(e.reference_error_units)} of its own")
    if what is Cause.UNDECIDED:
        action = ("run float64 forwards on some seeds (near_tie: pair_calibration_seeds): no side was measured "
                  "against float64")
        proof = "no float64 forward ran, so noise cannot be told from a defect"
    elif what is Cause.DEFECT:
        action = (f"find where {pair.other.label} leaves the float64 reference (more than {PAIR_NOISE_FACTOR}x the "
                  "noise)")
        proof = noise
    elif what is Cause.NEVER_FAILS:
        action = "nothing to change for this precision: the export test passes on every seed run"
        proof = f"a discrete choice flips on {plural(e.flipped, 'seed')} of {count(e.seeds)}, none failing; {noise}"
    else:
        precision = pair.other.precision if pair.other.precision is not Precision.FP32 else pair.reference.precision
        excuse = ("compare tie-aware (excuse flipped choices within the noise, compare the rest; measured against ORT "
                  "to keep value checks)" if tie_aware else
                  "exclude the outputs a flipped choice reaches, as against ORT (a tie-aware comparison was not "
                  "measured to keep value checks here)")
        turn_off = _TURN_OFF.get(precision, "run the export test in fp32 on both sides") + (
            f": this rate becomes {fp32_rate}" if fp32_rate else "")
        if what is Cause.PRECISION_NOISE and precision is Precision.FP32:  # two devices' fp32, the same choices
            action = ("no choice to excuse: the two sides' own fp32 rounding moves an output beyond the tolerance "
                      "(within float64's noise); widen the tolerance for the outputs that fail")
        elif what is Cause.PRECISION_NOISE:  # the choices agree: excusing flipped ones would change nothing
            action = turn_off
        elif precision is Precision.FP32:
            action = excuse
        elif what is Cause.TIE_AND_NOISE:  # excusing flips clears only the failures a flip made
            action = (f"{turn_off}; excusing flipped choices alone would leave {count(e.failed_without_flip)} of "
                      f"{plural(e.failed, 'failure')} (no flip)")
        else:
            action = f"{turn_off}; or {excuse}"
        flips = (f"{count(e.failed_without_flip)} of {plural(e.failed, 'failure')} with no flipped choice (the "
                 "precision's noise in the outputs)" if e.failed_without_flip else
                 f"every one of {plural(e.failed, 'failure')} flipped a choice")
        inputs = (f"; the choice's inputs differ by a median of {significant(e.input_noise_median)}, at most "
                  f"{significant(e.input_noise_max)}" if e.input_noise_max == e.input_noise_max else "")
        proof = f"{flips}; {noise} (noise){inputs}"
    per, low, high = e.per_scale(e.failed)
    return Answer(subject, what.value, action, wording.rate(e.failed, e.seeds), proof, failures_per_40000=per,
                  failures_low=low, failures_high=high, flips=wording.rate(e.flipped, e.seeds), seeds=e.seeds)
