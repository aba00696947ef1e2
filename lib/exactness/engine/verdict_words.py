"""Every sentence of a class's verdict, written from its typed evidence (`evidence`): the one place where the
discrete-ops engine's decisions become words. Nothing here decides; each function reads numbers and says them."""

from __future__ import annotations

import pandas as pd

from exactness.causes import Cause
from exactness.compare.rates import Estimate
from exactness.engine import place_words
from exactness.engine.evidence import (
    Defect,
    DefectSign,
    Evidence,
    Flips,
    Refuted,
    Undecided,
    Values,
    ValueState,
)
from exactness.engine.outputs import NOISE_FACTOR, PLANTS
from exactness.engine.verdicts import ClassVerdict, Verification
from exactness.workbook.wording import one_in, plural


def _op(d: Defect) -> str:
    """A discrete op as a reader finds it: its type in the module it sits in ('ArgMax in quantizer'), the exported
    graph's node name said as such where the scan knows no module."""
    return f"{d.op_type} in {d.scope}" if d.scope else f"{d.op_type} (ONNX node {d.node} of the exported graph)"


def defect(d: Defect) -> str:
    at = f"seed {d.seed}: "
    if d.sign is DefectSign.SHAPE:
        return at + f"{d.output} has another shape in ORT than in eager"
    if d.sign is DefectSign.DTYPE:
        return at + f"{d.output} has another dtype in ORT than in eager"
    if d.sign is DefectSign.NONFINITE_OUTPUT:
        return at + f"{d.output} is non-finite on one side only in {d.count} of {d.of} values"
    if d.sign is DefectSign.BEYOND_NOISE:
        return at + (f"{d.output} errs {d.ort_error:.2g} from float64 in ORT against eager's {d.eager_error:.2g} "
                     f"({d.times:.2g} times eager's; bound {d.bound:.2g})")
    if d.sign is DefectSign.NOT_EXPLAINED:
        return at + f"{d.output} still differs by {d.forced_difference:.2g} after forcing ORT's choices on eager"
    if d.sign is DefectSign.NONFINITE_INPUT:
        return at + (f"the input of {_op(d)} is non-finite in {d.count} of {d.of} decisions in ORT, "
                     f"{d.eager_count} in eager")
    if d.sign is DefectSign.FLIP_AMONG_NONFINITE:
        return at + (f"{_op(d)} chose differently among values that are not all finite: no tie, a "
                     "computation that breaks")
    if d.sign is DefectSign.FLIP_BEYOND_REACH:
        return at + (f"{_op(d)} flipped where eager's margin is {d.margin_ulps:.3g} ulps, beyond the "
                     f"{d.reach_ulps:.3g} noise can reach")
    if d.output:
        return at + (f"{d.output} is NaN in eager float32 itself in {d.count} of {d.of} values, each not close under "
                     "the test's rule (not even to NaN): the model's forward breaks before any export")
    return at + (f"{_op(d)} chose differently among values holding a NaN in eager float32 itself ({d.eager_count} of "
                 f"{d.of} decisions read non-finite values in eager, {d.count} in ORT): the model's forward breaks "
                 "before any export")


def values(v: Values) -> str:
    if v.state is ValueState.UNPROVEN:
        return f"no float64 reference to prove the noise ({v.reference_note})"
    return (f"on every output of {plural(v.checked, 'seed')}, ORT's error from float64 is at most {v.worst:.2g} of "
            f"the noise bound ({NOISE_FACTOR:g} times eager float32's own)")


def _flips(f: Flips) -> str:
    tied = f.tied_seeds
    ties = (f"; {len(tied)} of the {f.seeds} flipped seeds on exact ties (0 ulps: seed{'s' if len(tied) > 1 else ''} "
            f"{', '.join(map(str, tied[:5]))}{', ...' if len(tied) > 5 else ''})" if tied and not f.exact else "")
    return (f"{f.seeds} of {plural(f.checked, 'checked seed')} flipped at {', '.join(sorted(f.op_types))}; "
            "every flipped input finite on both sides, eager's margin there "
            + ("0 (exact ties)" if f.exact else f"at most {f.largest_ulps:.3g} ulps, within the noise's reach of "
               f"{f.reach_ulps:.3g}{ties}") + "; forcing ORT's choices explains every output they reach")


def never_called(e: Evidence) -> str:
    """What shows that no seed can flip: the module the forward never calls; an investigation's reason for skipping
    the class, where it gave one, answered by that."""
    words = f"its {e.never_called} is not called in eval forward: no code to flip"
    if e.quoted_skip:
        where, reason = e.quoted_skip
        words += (f"; {where} skipped it because \"{reason}\": its forward never runs that {e.never_called_op}, so the "
                  "reason does not hold")
    return words


def proof(cause: Cause, e: Evidence, error: str = "") -> str:
    """The numbers that show the cause, in a sentence (`error`: why a class did not run)."""
    if cause is Cause.NO_EXPORT:
        return error
    if cause is Cause.DEFECT:
        return defect(e.defect) + (f"; the export test's rule passes on {e.passing} of "
                                   f"{plural(e.checked, 'checked seed')} all the same" if e.passing else "")
    if cause is Cause.RANDOM_DRAW:
        scopes = ", ".join(s for s in e.draw_scopes if s) or "the model's own forward (outside every module)"
        return f"{', '.join(e.draws)} in {scopes} on an output path"
    if cause in (Cause.EXACT_TIE, Cause.NEAR_TIE):
        return _flips(e.flips)
    if e.undecided is Undecided.STRAY_FLIP:
        return "an op left out as unable to flip on its own flipped on a seed where no counted op did"
    if e.undecided is Undecided.NO_REFERENCE:
        return values(e.values)
    if e.never_called:
        return never_called(e)
    if cause in (Cause.FLOAT_NOISE, Cause.NOTHING_REACHES):
        return (f"no flip in {e.total:,} seeds; " if e.counted else
                "no discrete op that can flip reaches an output; ") + values(e.values)
    if cause is Cause.NEVER_FLIPS:
        checked = (f"{e.unchecked} of the {e.size_in} within the noise's reach left unchecked" if e.unchecked
                   else f"every one of the {e.size_in} within the noise's reach checked")
        return (f"no flip in {e.total:,} seeds screened, {checked}: the flip rate is at most {one_in(e.bound)}, under "
                f"the rate asked for, {one_in(e.rate_asked)}; " + values(e.values))
    left = f" ({e.unchecked} of {e.size_in} within reach of a tie left unchecked)" if e.unchecked else ""
    return (f"no flip in {e.total:,} seeds{left}: the flip rate is at most {one_in(e.bound)} (a bound), not yet under "
            f"the rate asked for, {one_in(e.rate_asked)}")


def action(cause: Cause, e: Evidence, compare: list[str], exclude: list[str], error: str = "") -> str:
    """What a test should do, from the same evidence."""
    if cause is Cause.NO_EXPORT:
        return "fix the builder first" if error.startswith("could not build") else "fix the export first"
    if cause is Cause.DEFECT:
        # what the value check does here decides what keeping it is worth: one that fails on every seed blocks the
        # class until the defect is fixed, one that passes anyway catches nothing and must not be relied on
        if not e.passing:
            check = "the export test's value check fails on every checked seed: it is right to, so fix the cause"
        elif not e.failing:
            forgiven = ("what breaks stays under its 5% allowance" if e.defect.sign is DefectSign.NAN_IN_EAGER
                        else "the error is within its tolerance")
            check = (f"the export test's value check passes on every checked seed all the same ({forgiven}): it "
                     "catches nothing here, so fix the cause")
        else:
            check = (f"the export test's value check fails on {e.failing} of {plural(e.checked, 'checked seed')}: "
                     "keep it, and fix the cause")
        return (f"a bug, not a flaky comparison; {check}: "
                + (place_words.remedy(e.remedy)
                   or f"it starts at {place_words.where(e.where) or 'a place not localized'}"))
    if cause is Cause.RANDOM_DRAW:
        if not compare:
            return ("nothing is left to compare: a random draw reaches every output, and the runtimes draw different "
                    "numbers; test what does not draw (or pass the draw in as an input)")
        return "compare the outputs no random draw reaches; exclude the rest"
    if cause in (Cause.EXACT_TIE, Cause.NEAR_TIE):
        if exclude:
            narrowed = f"compare {', '.join(compare) or 'nothing'}; exclude {', '.join(exclude)}"
            if cause is Cause.NEAR_TIE and e.tie_aware:  # the measured way to keep every value check comes first
                return (f"compare {', '.join(exclude)} tie-aware (measured here to pass every check and catch every "
                        f"required planted defect), and the rest as the test does; or, without a tie-aware check, "
                        f"{narrowed}")
            return narrowed
        left = f"; {e.unchecked:,} of the {e.size_in:,} within reach of a tie left unchecked" if e.unchecked else ""
        tolerance = (f"a tolerance the noise needs (the export test's fails on {e.failing} of {e.checked} seeds)"
                     if e.failing else "the test's tolerance")
        return (f"compare every output at {tolerance}: no flip moved one beyond the test's tolerance on "
                f"{plural(e.checked, 'checked seed')}{left}")
    if e.undecided is Undecided.STRAY_FLIP:
        return "undecided: the scan's exclusion of an op is contradicted; look at the margins table"
    if e.undecided is Undecided.NO_REFERENCE:
        return "undecided: the values could not be checked against float64"
    if e.never_called:
        return "compare every output at the test's tolerance" + _remove_skip(e) + ": no seed can flip"
    if cause in (Cause.FLOAT_NOISE, Cause.NOTHING_REACHES):
        words = "compare every output" + (f" at a tolerance the noise needs: the export test's fails on "
                                          f"{e.failing} of {e.checked} seeds" if e.failing else
                                          " at the test's tolerance" + _remove_skip(e))
        if not e.failing and not e.counted:  # what the removal rests on: no flip can happen at all
            words += (": no discrete op that can flip reaches an output, so no seed can flip, and "
                      + values(e.values).replace("on every output of", "on every output of the"))
        return words
    if cause is Cause.NEVER_FLIPS:
        return "compare every output at the test's tolerance" + _remove_skip(e)
    if e.unchecked:
        return f"undecided: check every candidate (-p max_checks {e.size_in + e.beyond})"
    return (f"undecided: screen {e.seeds_needed:,} seeds (-p n_seeds {e.seeds_needed}); with no flip among them, the "
            f"flip rate's one-sided 95% bound falls below the rate asked (about {one_in(e.rate_asked)}), and the "
            "class is called never flipping")


def _remove_skip(e: Evidence) -> str:
    """Only a class the export test skips has a skip to remove."""
    return " (remove the skip)" if e.skipped else ""


def refutation(refuted: Refuted | None, claim, cause: Cause, ops: int, pass_name: str = "") -> str:
    """Why the skip's claim does not hold ("" when it holds or nothing was claimed); `ops`: the graph's discrete
    ops."""
    if refuted is None:
        return ""
    made = f", made by {pass_name}" if pass_name else ""
    if refuted is Refuted.NO_RANDOM_OP:
        return (f"the skip claims a random draw, but its graph has no random op (ops table: {ops} discrete "
                f"ops, none random); measured: {cause.value}{made}")
    if refuted is Refuted.WITHIN_TOLERANCE:
        return ("the skip claims float noise over the test's tolerance; measured: float noise within it (every "
                "checked seed within float64's noise bound and passing the export test's rule), and no discrete op "
                "that can flip reaches an output")
    if refuted is Refuted.DEFECT_NOT_TIE:
        return (f"the skip claims {claim} that ORT breaks another way, but what ORT computes there is a defect, not a "
                f"tie broken differently{made}")
    return f"the skip claims {claim}; measured: {cause.value}{made}"


def smallest_words(verification: Verification, none: str = "") -> str:
    """The smallest few-element planted defect a comparison catches on every pair, or `none`."""
    return verification.smallest.words if verification.smallest else none


def table(verdicts: list[ClassVerdict]) -> pd.DataFrame:
    """The verdicts table for people and for parquet: one row per class."""
    def num(e: Estimate | None, attr: str) -> float:
        return getattr(e, attr) if e is not None else float("nan")

    return pd.DataFrame([{
        "model": v.model, "shape_mode": v.shape_mode, "cause": v.cause.value, "proof": proof_of(v),
        "action": action_of(v),
        "compare": ", ".join(v.compare), "exclude": ", ".join(v.exclude), "where": place_words.where(v.where),
        "screened": v.screened, "checked": v.checked, "candidates": v.candidates,
        "flips_per_40000": num(v.flips, "per"), "flips_low": num(v.flips, "low"), "flips_high": num(v.flips, "high"),
        "failures_per_40000": num(v.failures, "per"), "failures_low": num(v.failures, "low"),
        "failures_high": num(v.failures, "high"), "reach_ulps": v.reach_ulps, "noise_ulps": v.noise_ulps,
        "verified": v.verification.holds, "verified_passes": v.verification.passes,
        "verified_seeds": v.verification.seeds, "planted": v.verification.planted,
        **{f"caught_{plant.column.removeprefix('planted_')}": v.verification.caught.get(plant.column, 0)
           for plant in PLANTS}, "smallest_caught": smallest_words(v.verification),
        "skip_reason": v.skip_reason, "claim": v.claim,
        "reason_holds": v.reason_holds, "refutation": refutation_of(v), "stage": v.stage, "pass_name": v.pass_name,
        "seeds_needed": v.seeds_needed} for v in verdicts])


def proof_of(v: ClassVerdict) -> str:
    """The numbers that show a class's cause, in a sentence."""
    return proof(v.cause, v.evidence, v.error)


def action_of(v: ClassVerdict) -> str:
    """What to do about a class's cause, in a sentence."""
    return action(v.cause, v.evidence, v.compare, v.exclude, v.error)


def refutation_of(v: ClassVerdict) -> str:
    """Why the skip's stated reason does not hold, from the run's rows ("" when it holds)."""
    return refutation(v.refuted, v.refuted_claim, v.cause, v.graph_ops, v.pass_name)


def patch_reason(verdicts: list[ClassVerdict]) -> str:
    """A class's proof as the export-test patch's comment, one line: each shape mode's where they differ (set apart
    by " | ": a proof has semicolons of its own)."""
    proofs = {v.shape_mode: proof_of(v) for v in verdicts}
    if len(set(proofs.values())) == 1:
        return next(iter(proofs.values()))
    return " | ".join(f"{mode}: {proof}" for mode, proof in proofs.items())
