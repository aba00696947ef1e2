"""Per class, the cause of eager-against-ORT differences with its proof, how often it fails the export test,
and the test change that keeps value checks: each computed from the run's own rows.

A cause is named only with its proof, in this order:
- *defect*: a value one side produces and the other does not (NaN or inf on one side, another shape), a
  discrete op whose input is non-finite on one side, an output further from the float64 reference than
  `check.NOISE_FACTOR` times eager's own error, or a flip forcing ORT's choices does not explain;
- *random draw*: a random op on an output path;
- *exact tie* / *near-tie*: ORT chose differently at a counted op whose input is finite on both sides and whose
  top values are equal (exact tie) or within the class's measured noise, and forcing ORT's choices on eager
  explains every output it reaches;
- *float noise* / *nothing reaches*: no counted op, and every output within the noise bound of the reference
  (float noise when the export test's rule still fails on some seed, nothing reaches when it never does);
- *never flips*: counted ops reach outputs, but the seeds screened bound their flip rate below the rate asked
  for (`RatePolicy`); otherwise *undecided*, with the number of seeds that would decide.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum

import numpy as np
import pandas as pd

from exactness import reference
from exactness.compare.export_rule import ALLOWED_FRACTION
from exactness.compare.rates import RatePolicy, wilson_interval
from exactness.models import tiny_subjects
from exactness.studies.discrete_ops.check import NOISE_FACTOR, PLANTS
from exactness.workbook.wording import one_in, plural

PER = 40_000  # failures are stated per this many seeds: the seed investigation's scale


class Cause(Enum):
    DEFECT = "defect"
    RANDOM_DRAW = "random draw"
    EXACT_TIE = "exact tie"
    NEAR_TIE = "near-tie"
    FLOAT_NOISE = "float noise"
    NOTHING_REACHES = "nothing reaches"
    NEVER_FLIPS = "never flips"
    UNDECIDED = "undecided"
    NO_EXPORT = "not run"  # the class did not build or did not export


# The cause a skip reason's labelled claim names (exactness.reference), by measured cause.
CLAIMED = {Cause.EXACT_TIE: reference.EXACT_TIE, Cause.NEAR_TIE: reference.NEAR_TIE,
           Cause.RANDOM_DRAW: reference.RANDOM_DRAW, Cause.FLOAT_NOISE: reference.FLOAT_NOISE}


@dataclass(frozen=True)
class Estimate:
    """A count per PER seeds with its 95% interval, from a stratified sample (method in `estimate`)."""

    per: float
    low: float
    high: float
    observed: int  # events among the checked seeds
    checked: int
    seeds: int  # the seeds the rate is over: every screened seed (or, unscreened, every checked one)
    exact: bool  # every seed where an event can happen was checked: the count is the seeds', not a sample's
    # seeds within reach were left unchecked: the upper end counts every one of them as an event (a worst case,
    # not a confidence bound)
    worst_case: bool = False

    def __str__(self) -> str:
        span = "from" if self.worst_case else "95%"
        return f"{self.per:.3g} per {PER:,} ({span} {self.low:.3g} to {self.high:.3g})"


def estimate(k_in: int, checked_in: int, size_in: int, total: int,
             outside: tuple[int, int] | None = None, size_out: int = 0,
             sampled: tuple[int, int, int] = (0, 0, 0)) -> Estimate:
    """Events per PER seeds from a screen's strata. The seeds within reach of a tie (`size_in`) are checked
    smallest margins first, not at random: the count there lies between the `k_in` found and `k_in` plus every
    unchecked one (the point extrapolates the checked fraction). `sampled`: (events, checks, size) of the exact
    ties, checked in seed order, a sample as good as random: the count there is the sample's rate times the
    stratum's size, with Wilson's interval (never below the events seen, nor above them plus the unchecked).
    Beyond reach an event needs a sample of its own (`outside`: events and checks among the calibration seeds
    there, for failures no flip explains), else none happens there (the screen's premise: no flip beyond the
    noise's reach). When every seed where an event can happen was checked, the count is exact and the interval
    is Wilson's for a rate seen k times in `total`."""
    k_s, n_s, size_s = sampled
    if n_s >= size_s:  # the sample is the whole stratum: its count is exact, like a stratum checked whole
        k_in, checked_in, size_in, k_s, n_s, size_s = k_in + k_s, checked_in + n_s, size_in + size_s, 0, 0, 0
    unchecked = size_in - checked_in
    if not total:
        return Estimate(float("nan"), float("nan"), float("nan"), 0, 0, 0, False)
    if unchecked <= 0 and outside is None and not size_s:
        low, high = wilson_interval(k_in, total)
        return Estimate(PER * k_in / total, PER * low, PER * high, k_in, checked_in, total, True)
    point = k_in + (unchecked * k_in / checked_in if checked_in else 0.0)
    low, high = float(k_in), float(k_in + max(unchecked, 0))
    if size_s:
        s_low, s_high = wilson_interval(k_s, n_s) if n_s else (0.0, 1.0)
        point += size_s * (k_s / n_s if n_s else 0.0)
        low += max(float(k_s), size_s * s_low)
        high += min(float(k_s + size_s - n_s), size_s * s_high)
    if outside is not None and outside[1]:
        k, n = outside
        w_low, w_high = wilson_interval(k, n)
        point, low, high = point + size_out * k / n, low + size_out * w_low, high + size_out * w_high
    return Estimate(PER * point / total, PER * low / total, PER * min(high / total, 1.0),
                    k_in + k_s + (outside or (0, 0))[0], checked_in + n_s + (outside or (0, 0))[1], total, False,
                    unchecked > 0)


def rule_passes(rows: pd.DataFrame) -> bool:
    """The export test's rule over these output rows, from their counts: one `assert_close` over the outputs in
    sorted order stops at the first output with a mismatch; the test forgives that error when fewer than 5% of
    its elements mismatch (a 0-d tensor's message gives no count: no allowance), and then passes."""
    for row in rows.sort_values("output").itertuples():
        if row.same_shape and row.rule_mismatched == 0:
            continue
        return bool(row.same_shape and not row.zero_dim and row.rule_mismatched / row.numel < ALLOWED_FRACTION)
    return True


def planted_defect_caught(rows: pd.DataFrame, output: str, column: str = "") -> bool:
    """Whether the rule over `rows` fails with a defect planted in `output`: the rule's count of not-close elements
    there with the defect in it (`column`, one of `check.PLANTS`), or, without one, every element wrong."""
    planted = rows.copy()
    mine = planted.output == output
    planted.loc[mine, "rule_mismatched"] = planted.loc[mine, column] if column else planted.loc[mine, "numel"]
    return not rule_passes(planted)


@dataclass
class Verification:
    """The recommended test change, run on this run's own checked seeds: whether the rule passes over the compared
    outputs, and which planted defects (`check.PLANTS`, one output at a time) it still catches."""

    seeds: int = 0
    passes: int = 0  # seeds on which the rule passes over the compared outputs
    planted: int = 0  # (seed, compared floating output) pairs, each planted with every defect in turn
    caught: dict[str, int] = field(default_factory=dict)  # per plant (its column), the pairs where the rule fails

    @property
    def holds(self) -> bool:
        """The change passes on every checked seed (what it catches is measured beside it, `smallest`)."""
        return self.seeds > 0 and self.passes == self.seeds

    @property
    def smallest(self) -> str:
        """The smallest few-element defect caught on every pair ("" when none is)."""
        for plant in PLANTS:
            if plant.factor and self.planted and self.caught.get(plant.column, 0) == self.planted:
                return plant.words
        return ""


@dataclass
class ClassVerdict:
    model: str
    shape_mode: str
    cause: Cause
    proof: str  # the numbers that show the cause, in a sentence
    action: str
    compare: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    where: str = ""  # a defect's first module (and node)
    screened: int = 0
    checked: int = 0
    candidates: int = 0  # seeds within reach of a tie
    ties: int = 0  # of them, exact ties (every counted op's input finite): checked as a sample in seed order
    counted: int = 0  # discrete ops that can flip on their own and reach an output
    checked_candidates: int = 0  # of them, checked
    flips: Estimate | None = None
    failures: Estimate | None = None
    reach_ulps: float = float("nan")
    noise_ulps: float = float("nan")
    verification: Verification = field(default_factory=Verification)
    skip_reason: str = ""
    claim: str = ""
    reason_holds: bool | None = None
    seeds_needed: int = 0
    defect_seed: int | None = None  # the seed whose rows prove the defect (and where it is localized)
    defect_output: str = ""  # the output that shows it
    stage: str = ""  # a defect's pipeline stage (`stages.Stage` value), "" when not located
    pass_name: str = ""  # the exporter's rule or ORT's pass whose removal alone removes the defect
    refutation: str = ""  # why the skip's stated reason does not hold, from this run's rows ("" when it holds)


def stated_reason(model: str) -> tuple[str, reference.Claim | None]:
    """The skip's reason and its labelled claim: the class's registry entry where it overrides them, else the
    export test's own (exactness.reference)."""
    entry = tiny_subjects.SUBJECTS.get(model) or tiny_subjects.Subject(model)
    reason = entry.skip_reason if entry.skip_reason is not None else reference.skip_reason(model)
    claim = reference.Claim(*entry.skip_claim) if entry.skip_claim else reference.skip_claim(model)
    return reason, claim


def no_random_op(claim: reference.Claim | None, ops: pd.DataFrame | None) -> bool:
    """A random-draw claim against a graph the scan found no random op in: refuted by the ops table alone,
    whatever the flips decide."""
    return (claim is not None and claim.cause == reference.RANDOM_DRAW and ops is not None
            and not (len(ops) and (ops.category == "random").any()))


def reason_holds(claim: reference.Claim | None, cause: Cause, flipped_ops: set[str],
                 ops: pd.DataFrame | None = None) -> bool | None:
    """Whether the measured cause bears out the reason's claim; None when the class is not skipped or the
    cause is undecided (a random draw claimed where `ops`, the class's scanned graph, has none: False)."""
    if claim is None or cause is Cause.NO_EXPORT:
        return None
    if no_random_op(claim, ops):
        return False
    if cause is Cause.UNDECIDED:
        return None
    if CLAIMED.get(cause) != claim.cause:
        return False
    return not claim.op or claim.op in flipped_ops


def _names(values) -> list[str]:
    return sorted({str(v) for v in values})


def _reached(ops: pd.DataFrame, nodes) -> set[str]:
    mine = ops[ops.node.isin(set(nodes))] if len(ops) else ops
    return {name for names in mine.reaches_outputs for name in names} if len(mine) else set()


@dataclass
class ClassTables:
    """One class's rows, as the verdict reads them."""

    graph: pd.Series
    ops: pd.DataFrame
    screen: pd.DataFrame
    margins: pd.DataFrame
    outputs: pd.DataFrame
    seeds: pd.DataFrame


def _values(outputs: pd.DataFrame, seeds: pd.DataFrame, failing: set, checked: int) -> tuple[str, str]:
    """What the outputs no flip reached show against float64: ("unproven" | "failing" | "clean", in words)."""
    proven = outputs[outputs.floating.astype(bool) & ~outputs.reached_by_flip.astype(bool)] if len(outputs) \
        else outputs
    if len(proven) and proven.within_noise.isna().any():
        note = seeds.reference.iloc[0] if len(seeds) else ""
        return "unproven", f"no float64 reference to prove the noise ({note})"
    worst = float((proven.ort_f64_err / proven.noise_bound).max()) if len(proven) else 0.0
    words = (f"on every output of {plural(checked, 'seed')}, ORT's error from float64 is at most {worst:.2g} of the "
             f"noise bound ({NOISE_FACTOR:g} times eager float32's own)")
    return ("failing" if failing else "clean"), words


def noise_ulps(margins: pd.DataFrame, counted_nodes: set[str]) -> float:
    """The largest eager-ORT difference of what the counted ops read, in ulps of each decision's scale, over calls
    whose match was verified on values (an upstream flip or a wrong match is not noise). NaN: none verified."""
    mine = margins[margins.node.isin(counted_nodes) & margins.match_verified.astype(bool)] if len(margins) else margins
    values = mine.read_noise_ulps.dropna() if len(mine) else pd.Series(dtype=float)
    return float(values.max()) if len(values) else float("nan")


@dataclass(frozen=True)
class Defect:
    seed: int  # the seed whose rows prove it (and where it is localized)
    output: str  # the output that shows it ("" when an op's input shows it)
    proof: str


def _op(row, ops: pd.DataFrame) -> str:
    """A discrete op as a reader finds it: its type in the module it sits in ('ArgMax in quantizer'), the exported
    graph's node name said as such where the scan knows no module."""
    scope = ops.scope[ops.node == row.node] if len(ops) and "scope" in ops else pd.Series(dtype=str)
    if len(scope) and scope.iloc[0]:
        return f"{row.op_type} in {scope.iloc[0]}"
    return f"{row.op_type} (ONNX node {row.node} of the exported graph)"


def _defect(t: ClassTables, counted_nodes: set[str], reach: float) -> Defect | None:
    """The first defect in the class's rows, with its proof in words; None when there is none."""
    out, m = t.outputs, t.margins
    if len(out):
        shape = out[~out.same_shape.astype(bool)]
        if len(shape):
            r = shape.iloc[0]
            return Defect(int(r.seed), r.output, f"seed {r.seed}: {r.output} has another shape in ORT than in eager")
        dtype = out[~out.same_dtype.astype(bool)] if "same_dtype" in out else out.iloc[:0]
        if len(dtype):
            r = dtype.iloc[0]
            return Defect(int(r.seed), r.output, f"seed {r.seed}: {r.output} has another dtype in ORT than in eager")
        nonfinite = out[(out.nonfinite_mismatch > 0) & ~out.reached_by_flip.astype(bool)]
        if len(nonfinite):
            r = nonfinite.iloc[0]
            return Defect(int(r.seed), r.output, f"seed {r.seed}: {r.output} is non-finite on one side only in "
                                                 f"{int(r.nonfinite_mismatch)} of {int(r.numel)} values")
        beyond = out[out.within_noise.eq(False)]
        if len(beyond):
            r = beyond.loc[(beyond.ort_f64_err / beyond.noise_bound).idxmax()]
            times = r.ort_f64_err / max(r.eager_f64_err, r.scale_ulp)
            return Defect(int(r.seed), r.output, f"seed {r.seed}: {r.output} errs {r.ort_f64_err:.2g} from float64 in "
                                                 f"ORT against eager's {r.eager_f64_err:.2g} ({times:.2g} times "
                                                 f"eager's; bound {r.noise_bound:.2g})")
        unexplained = out[out.explained_by_flip.eq(False)]
        if len(unexplained):
            r = unexplained.iloc[0]
            return Defect(int(r.seed), r.output, f"seed {r.seed}: {r.output} still differs by "
                                                 f"{r.forced_max_abs_diff:.2g} after forcing ORT's choices on eager")
    if len(m):
        live = m[m.node.isin(counted_nodes)]
        broken = live[(live.reads_nonfinite_ort != live.reads_nonfinite_eager)]
        if len(broken):
            r = broken.iloc[0]
            return Defect(int(r.seed), "", f"seed {r.seed}: the input of {_op(r, t.ops)} is non-finite in "
                                           f"{int(r.reads_nonfinite_ort)} of {int(r.decisions)} decisions in ORT, "
                                           f"{int(r.reads_nonfinite_eager)} in eager")
        unfinite = live[(live.flipped > 0) & ((live.flipped_nonfinite > 0) | live.flipped_margin_ulps.isna())]
        if len(unfinite):
            r = unfinite.iloc[0]
            return Defect(int(r.seed), "", f"seed {r.seed}: {_op(r, t.ops)} chose differently among values that "
                                           "are not all finite: no tie, a computation that breaks")
        # a call verified on values whose choice flipped further from a tie than its own reads' noise can move it
        # (a call downstream of another flip reads other values: not verified, so not judged here)
        own = np.maximum(2 * live.read_noise_ulps.fillna(0), reach)
        far = live[(live.flipped > 0) & live.match_verified.astype(bool) & (live.flipped_margin_ulps > own)]
        if len(far):
            r = far.iloc[0]
            return Defect(int(r.seed), "", f"seed {r.seed}: {_op(r, t.ops)} flipped where eager's margin is "
                                           f"{r.flipped_margin_ulps:.3g} ulps, beyond the {reach:.3g} noise can reach")
    return None


def changed_by_flips(outputs: pd.DataFrame) -> list[str]:
    """The outputs a flip reached and moved beyond the test's tolerance on some checked seed: what a test must
    leave out (or compare tie-aware). An output a flip reaches by data flow but never moves (RT-DETR's logits)
    stays compared, and the verification shows the rule passing with it."""
    moved = outputs[outputs.reached_by_flip.astype(bool) & (outputs.rule_mismatched > 0)] if len(outputs) else outputs
    return sorted(set(moved.output)) if len(moved) else []


def refutation(claim: reference.Claim | None, cause: Cause, ops: pd.DataFrame, flipped_types: set[str],
               pass_name: str = "") -> str:
    """Why the skip's claim does not hold, from the run's own rows ("" when it holds or nothing was claimed)."""
    if claim is None or reason_holds(claim, cause, flipped_types, ops) is not False:
        return ""
    made = f", made by {pass_name}" if pass_name else ""
    if no_random_op(claim, ops):
        return (f"the skip claims a random draw, but its graph has no random op (ops table: {len(ops)} discrete "
                f"ops, none random); measured: {cause.value}{made}")
    if claim.cause in (reference.EXACT_TIE, reference.NEAR_TIE) and cause is Cause.DEFECT:
        return (f"the skip claims {claim} that ORT breaks another way, but what ORT computes there is a defect, not a "
                f"tie broken differently{made}")
    return f"the skip claims {claim}; measured: {cause.value}{made}"


def verdict(t: ClassTables, policy: RatePolicy, reach: float, where: str = "", remedy: str = "",
            stage: str = "", pass_name: str = "") -> ClassVerdict:
    """`where`, `remedy`, `stage`, `pass_name`: a defect's localization (`localize.Localization`)."""
    model, mode = t.graph.model, t.graph.shape_mode
    reason, claim = stated_reason(model)
    base = dict(skip_reason=reason, claim=str(claim or ""))
    remove_skip = " (remove the skip)" if reason else ""  # only a class the export test skips has one to remove
    if t.graph.error:
        action = "fix the builder first" if t.graph.error.startswith("could not build") else "fix the export first"
        return ClassVerdict(model, mode, Cause.NO_EXPORT, t.graph.error, action, **base)
    ops = t.ops
    counted_ops = ops[ops.on_output_path & ops.can_flip] if len(ops) else ops
    counted_nodes = set(counted_ops.node)
    outputs = _names(t.outputs.output) if len(t.outputs) else []
    reached = _reached(ops, counted_nodes) & set(outputs)
    seeds = t.seeds
    screened = int(t.screen.seed.nunique()) if len(t.screen) else 0
    checked = len(seeds)
    noise = noise_ulps(t.margins, counted_nodes)
    live = t.margins[t.margins.node.isin(counted_nodes)] if len(t.margins) else t.margins
    flipped_rows = live[live.flipped > 0] if len(live) else live
    flipped_seeds = set(flipped_rows.seed) if len(flipped_rows) else set()
    failing = set(seeds[~seeds.test_rule_passed.astype(bool)].seed) if len(seeds) else set()
    total = max(screened, checked)
    in_reach = set(t.screen.seed[t.screen.in_reach]) if len(t.screen) and "in_reach" in t.screen else set()
    ties = tie_seeds(t.screen) & in_reach
    checked_seeds = set(seeds.seed) if len(seeds) else set()
    checked_in = checked_seeds & in_reach if screened else checked_seeds
    size_in = len(in_reach) if screened else checked
    beyond = checked_seeds - in_reach if screened else set()
    ordered = checked_in - ties

    def strata(events: set) -> dict:
        return dict(k_in=len(events & ordered), checked_in=len(ordered), size_in=size_in - len(ties), total=total,
                    sampled=(len(events & checked_in & ties), len(checked_in & ties), len(ties)))

    flips = estimate(**strata(flipped_seeds)) if len(counted_ops) else Estimate(0.0, 0.0, 0.0, 0, 0, total, True)
    unexplained = {s for s in failing & beyond if s not in flipped_seeds}
    failures = estimate(**strata(failing), outside=(len(unexplained), len(beyond)) if unexplained else None,
                        size_out=total - size_in)
    unchecked = max(size_in - len(checked_in), 0)
    flipped_types = set(flipped_rows.op_type) if len(flipped_rows) else set()
    common = dict(screened=screened, checked=checked, candidates=len(in_reach), checked_candidates=len(checked_in),
                  ties=len(ties), counted=len(counted_ops), flips=flips, failures=failures,
                  reach_ulps=reach, noise_ulps=noise, **base)
    defect = _defect(t, counted_nodes, reach)
    if defect is not None:
        passing = len(seeds) - len(failing)
        cause = Cause.DEFECT
        proof = defect.proof + (f"; the export test's rule passes on {passing} of {plural(len(seeds), 'checked seed')}"
                                " all the same" if passing else "")
        common.update(defect_seed=defect.seed, defect_output=defect.output)
        # what the value check does here decides what keeping it is worth: one that fails on every seed blocks the
        # class until the defect is fixed, one that passes anyway catches nothing and must not be relied on
        if not passing:
            check_words = "the export test's value check fails on every checked seed: it is right to, so fix the cause"
        elif not failing:
            check_words = ("the export test's value check passes on every checked seed all the same (the error is "
                           "within its tolerance): it catches nothing here, so fix the cause")
        else:
            check_words = (f"the export test's value check fails on {len(failing)} of "
                           f"{plural(len(seeds), 'checked seed')}: keep it, and fix the cause")
        action = (f"a bug, not a flaky comparison; {check_words}: "
                  + (remedy or f"it starts at {where or 'a place not localized'}"))
        compare, exclude = outputs, []
    elif len(counted_ops) and (counted_ops.category == "random").any():
        cause = Cause.RANDOM_DRAW
        draws = counted_ops[counted_ops.category == "random"]
        proof = f"{', '.join(_names(draws.op_type))} in {', '.join(_names(draws.scope))} on an output path"
        exclude = sorted(_reached(ops, set(draws.node)) & set(outputs))
        compare = [o for o in outputs if o not in exclude]
        action = "compare the outputs no random draw reaches; exclude the rest"
    elif len(seeds) and seeds.stray_flip.astype(bool).any():
        cause = Cause.UNDECIDED
        proof = "an op left out as unable to flip on its own flipped on a seed where no counted op did"
        compare, exclude = [o for o in outputs if o not in reached], sorted(reached)
        action = "undecided: the scan's exclusion of an op is contradicted; look at the margins table"
    elif flipped_seeds:
        exact = bool((flipped_rows.flipped_margin_ulps == 0).all())
        cause = Cause.EXACT_TIE if exact else Cause.NEAR_TIE
        largest = float(flipped_rows.flipped_margin_ulps.max())
        # a seed whose every flip sat on an exact tie is one, even in a near-tie class: said, not folded in
        tied = flipped_rows.groupby("seed").flipped_margin_ulps.max()
        tied_seeds = sorted(int(seed) for seed in tied.index[tied == 0])
        ties_words = (f"; {len(tied_seeds)} of the {len(flipped_seeds)} flipped seeds on exact ties (0 ulps: seed"
                      f"{'s' if len(tied_seeds) > 1 else ''} {', '.join(map(str, tied_seeds[:5]))}"
                      f"{', ...' if len(tied_seeds) > 5 else ''})" if tied_seeds and not exact else "")
        proof = (f"{len(flipped_seeds)} of {plural(checked, 'checked seed')} flipped at "
                 f"{', '.join(sorted(flipped_types))}; "
                 "every flipped input finite on both sides, eager's margin there "
                 + ("0 (exact ties)" if exact else f"at most {largest:.3g} ulps, within the noise's reach of "
                    f"{reach:.3g}{ties_words}") + "; forcing ORT's choices explains every output they reach")
        exclude = changed_by_flips(t.outputs)
        compare = [o for o in outputs if o not in exclude]
        if exclude:
            action = (f"compare {', '.join(compare) or 'nothing'}; exclude {', '.join(exclude)}"
                      + (" (or compare them tie-aware)" if cause is Cause.NEAR_TIE else ""))
        else:  # the flips reach outputs but move none beyond the tolerance (OneFormer's mask comparisons)
            left = f"; {unchecked:,} of the {size_in:,} within reach of a tie left unchecked" if unchecked else ""
            tolerance = (f"a tolerance the noise needs (the export test's fails on {len(failing)} of {checked} seeds)"
                         if failing else "the test's tolerance")
            action = (f"compare every output at {tolerance}: no flip moved one beyond the test's tolerance on "
                      f"{plural(checked, 'checked seed')}{left}")
    else:  # no flip: what the values show, then whether the seeds bound the flip rate
        state, words = _values(t.outputs, seeds, failing, checked)
        compare, exclude = outputs, []
        if state == "unproven":
            cause, proof = Cause.UNDECIDED, words
            action = "undecided: the values could not be checked against float64"
        elif state == "failing" or not len(counted_ops):
            cause = Cause.FLOAT_NOISE if state == "failing" else Cause.NOTHING_REACHES
            proof = ("no discrete op that can flip reaches an output; " if not len(counted_ops) else
                     f"no flip in {total:,} seeds; ") + words
            action = ("compare every output" + (f" at a tolerance the noise needs: the export test's fails on "
                                                f"{len(failing)} of {checked} seeds" if failing else
                                                " at the test's tolerance" + remove_skip))
            if not failing and not len(counted_ops):  # what the removal rests on: no flip can happen at all
                action += (": no discrete op that can flip reaches an output, so no seed can flip, and "
                           + words.replace("on every output of", "on every output of the"))
        else:
            # unchecked candidates add to the count's range, never take from the rate's own bound
            bound = max(flips.high / PER, policy.upper_bound(total)) if unchecked else policy.upper_bound(total)
            needed = policy.seeds_needed()
            left = f" ({unchecked} of {size_in} within reach of a tie left unchecked)" if unchecked else ""
            if bound < policy.rate:
                cause = Cause.NEVER_FLIPS
                checked_words = (f"{unchecked} of the {size_in} within the noise's reach left unchecked" if unchecked
                                 else f"every one of the {size_in} within the noise's reach checked")
                proof = (f"no flip in {total:,} seeds screened, {checked_words}: the flip rate is at most "
                         f"{one_in(bound)}, under the rate asked for, {one_in(policy.rate)}; " + words)
                action = "compare every output at the test's tolerance" + remove_skip
            else:
                cause = Cause.UNDECIDED
                proof = (f"no flip in {total:,} seeds{left}: the flip rate is at most {one_in(bound)} (a bound), "
                         f"not yet under the rate asked for, {one_in(policy.rate)}")
                compare, exclude = [o for o in outputs if o not in reached], sorted(reached)
                if unchecked:
                    action = f"undecided: check every candidate (-p max_checks {size_in + len(beyond)})"
                else:
                    action = (f"undecided: screen {needed:,} seeds (-p n_seeds {needed}); with no flip among them "
                              f"the flip rate is under {one_in(policy.rate)}, and the class never flips")
                    common["seeds_needed"] = needed
    result = ClassVerdict(model, mode, cause, proof, action, compare, exclude,
                          where if cause is Cause.DEFECT else "", **common)
    result.reason_holds = reason_holds(claim, cause, flipped_types, ops)
    if cause is Cause.DEFECT:
        result.stage, result.pass_name = stage, pass_name
    result.refutation = refutation(claim, cause, ops, flipped_types, result.pass_name)
    result.verification = verify(t.outputs, compare)
    return result


def verify(outputs: pd.DataFrame, compare: list[str]) -> Verification:
    """The rule over the compared outputs on every checked seed, and planted defects in each of them."""
    check = Verification()
    if not len(outputs) or not compare:
        return check
    check.caught = {plant.column: 0 for plant in PLANTS}
    for _, rows in outputs[outputs.output.isin(compare)].groupby("seed"):
        check.seeds += 1
        check.passes += rule_passes(rows)
        for row in rows.itertuples():
            if getattr(row, PLANTS[0].column, -1) < 0:  # nothing planted (an integer output, another shape)
                continue
            check.planted += 1
            for plant in PLANTS:
                check.caught[plant.column] += planted_defect_caught(rows, row.output, plant.column)
    return check


def reach_ulps(noise: float, floor: float, factor: float, unmeasured: float) -> float:
    """How close to a tie (in ulps) a margin must come for rounding noise to flip it: `factor` times the class's
    measured read noise, at least `floor`; `unmeasured` when no counted call was verified on values."""
    return unmeasured if math.isnan(noise) else max(floor, factor * noise)


def table(verdicts: list[ClassVerdict]) -> pd.DataFrame:
    """The verdicts table for people and for parquet: one row per class."""
    def num(e: Estimate | None, attr: str) -> float:
        return getattr(e, attr) if e is not None else float("nan")

    return pd.DataFrame([{
        "model": v.model, "shape_mode": v.shape_mode, "cause": v.cause.value, "proof": v.proof, "action": v.action,
        "compare": ", ".join(v.compare), "exclude": ", ".join(v.exclude), "where": v.where, "screened": v.screened,
        "checked": v.checked, "candidates": v.candidates, "flips_per_40000": num(v.flips, "per"),
        "flips_low": num(v.flips, "low"), "flips_high": num(v.flips, "high"),
        "failures_per_40000": num(v.failures, "per"), "failures_low": num(v.failures, "low"),
        "failures_high": num(v.failures, "high"), "reach_ulps": v.reach_ulps, "noise_ulps": v.noise_ulps,
        "verified": v.verification.holds, "verified_passes": v.verification.passes,
        "verified_seeds": v.verification.seeds, "planted": v.verification.planted,
        **{f"caught_{plant.column.removeprefix('planted_')}": v.verification.caught.get(plant.column, 0)
           for plant in PLANTS}, "smallest_caught": v.verification.smallest, "skip_reason": v.skip_reason,
        "claim": v.claim,
        "reason_holds": v.reason_holds, "refutation": v.refutation, "stage": v.stage, "pass_name": v.pass_name,
        "seeds_needed": v.seeds_needed} for v in verdicts])


def tie_seeds(screen: pd.DataFrame) -> set[int]:
    """Screened seeds whose smallest margin is an exact tie and whose counted ops read only finite values."""
    if not len(screen):
        return set()
    per_seed = screen.groupby("seed").agg(margin=("min_margin_ulps", "min"), nonfinite=("reads_nonfinite", "max"))
    return {int(s) for s in per_seed.index[(per_seed.margin == 0) & (per_seed.nonfinite == 0)]}


def tie_rows(margins: pd.DataFrame, ops: pd.DataFrame) -> np.ndarray:
    """Which margin rows are exact ties at counted ops (an Equal that holds is its answer, not a tie)."""
    counted_nodes = set(ops[ops.on_output_path & ops.can_flip].node) if len(ops) else set()
    return (margins.node.isin(counted_nodes) & (margins.op_type != "Equal") & (margins.exact_ties > 0)).to_numpy()
