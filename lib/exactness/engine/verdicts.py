"""Per class, the cause of eager-against-ORT differences with its proof, how often it fails the export test,
and the test change that keeps value checks: each computed from the run's own rows.

A cause is named only with its proof, in this order:
- *defect*: a value one side produces and the other does not (NaN or inf on one side, another shape), a
  discrete op whose input is non-finite on one side, an output further from the float64 reference than
  `outputs.NOISE_FACTOR` times eager's own error, or a flip forcing ORT's choices does not explain;
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

import numpy as np
import pandas as pd

from exactness import published
from exactness.causes import CLAIMED, Cause, Stage
from exactness.compare import export_rule
from exactness.compare.rates import PER, Estimate, RatePolicy, estimate
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
from exactness.engine.outputs import PLANTS, Plant, rule_count
from exactness.engine.places import Localization
from exactness.models import class_registry


def rule_passes(rows: pd.DataFrame, rule: export_rule.Rule = export_rule.BUILT_IN) -> bool:
    """The export test's rule (`rule`: the built-in replica, or a checkout's) over these output rows' counts."""
    return rule.judge(rule_count(row) for row in rows.itertuples()).passed


def planted_defect_caught(rows: pd.DataFrame, output: str, column: str = "",
                          rule: export_rule.Rule = export_rule.BUILT_IN) -> bool:
    """Whether the rule over `rows` fails with a defect planted in `output`: the rule's count of not-close elements
    there with the defect in it (`column`, one of `outputs.PLANTS`), or, without one, every element wrong."""
    planted = rows.copy()
    mine = planted.output == output
    planted.loc[mine, "rule_mismatched"] = planted.loc[mine, column] if column else planted.loc[mine, "numel"]
    return not rule_passes(planted, rule)


@dataclass
class Verification:
    """The recommended test change, run on this run's own checked seeds: whether the rule passes over the compared
    outputs, and which planted defects (`outputs.PLANTS`, one output at a time) it still catches."""

    seeds: int = 0
    passes: int = 0  # seeds on which the rule passes over the compared outputs
    planted: int = 0  # (seed, compared floating output) pairs, each planted with every defect in turn
    caught: dict[str, int] = field(default_factory=dict)  # per plant (its column), the pairs where the rule fails

    @property
    def holds(self) -> bool:
        """The change passes on every checked seed (what it catches is measured beside it, `smallest`)."""
        return self.seeds > 0 and self.passes == self.seeds

    @property
    def smallest(self) -> Plant | None:
        """The smallest few-element defect caught on every pair (None when none is)."""
        for plant in PLANTS:
            if plant.factor and self.planted and self.caught.get(plant.column, 0) == self.planted:
                return plant
        return None


@dataclass
class ClassVerdict:
    model: str
    shape_mode: str
    cause: Cause
    compare: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    where: Localization | None = None  # where a defect starts
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
    stage: str = ""  # a defect's pipeline stage (`causes.Stage` value), "" when not located
    pass_name: str = ""  # the exporter's rule or ORT's pass whose removal alone removes the defect
    refuted: Refuted | None = None  # why the skip's stated reason does not hold (None when it holds)
    refuted_claim: str = ""  # that reason's claim, as the refutation quotes it
    graph_ops: int = 0  # the graph's discrete ops, which a refutation counts
    error: str = ""  # why the class did not run (Cause.NO_EXPORT): the builder's or the exporter's message
    evidence: Evidence = field(default_factory=Evidence)  # what the proof and action say, as numbers


def stated_reason(model: str) -> tuple[str, published.Claim | None]:
    """The skip's reason and its labelled claim: the class's registry entry where it overrides them, else the
    export test's own (exactness.published)."""
    entry = class_registry.SUBJECTS.get(model) or class_registry.Subject(model)
    reason = entry.skip_reason if entry.skip_reason is not None else published.skip_reason(model)
    claim = published.Claim(*entry.skip_claim) if entry.skip_claim else published.skip_claim(model)
    return reason, claim


def no_random_op(claim: published.Claim | None, ops: pd.DataFrame | None) -> bool:
    """A random-draw claim against a graph the scan found no random op in: refuted by the ops table alone,
    whatever the flips decide."""
    return (claim is not None and claim.cause == published.RANDOM_DRAW and ops is not None
            and not (len(ops) and (ops.category == "random").any()))


def reason_holds(claim: published.Claim | None, cause: Cause, flipped_ops: set[str],
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
    # `ops` is a scan of the class's whole graph (so an op it lacks is absent); False where a study names only
    # the ops it checks, which can refute no claim about other ops
    scanned: bool = True
    tie_aware: bool | None = None  # a tie-aware comparison's measured verdict (`evidence.Evidence.tie_aware`)


def values_evidence(outputs: pd.DataFrame, seeds: pd.DataFrame, failing: bool, checked: int) -> Values:
    """What the outputs no flip reached show against float64 (unproven where no seed was checked: nothing was)."""
    if not checked:
        return Values(ValueState.UNPROVEN, 0, reference_note="no seed was checked against the other side")
    proven = outputs[outputs.floating.astype(bool) & ~outputs.reached_by_flip.astype(bool)] if len(outputs) \
        else outputs
    if len(proven) and proven.within_noise.isna().any():
        return Values(ValueState.UNPROVEN, checked, reference_note=seeds.reference.iloc[0] if len(seeds) else "")
    worst = float((proven.ort_f64_err / proven.noise_bound).max()) if len(proven) else 0.0
    return Values(ValueState.FAILING if failing else ValueState.CLEAN, checked, worst)


def noise_ulps(margins: pd.DataFrame, counted_nodes: set[str]) -> float:
    """The largest eager-ORT difference of what the counted ops read, in ulps of each decision's scale, over calls
    whose match was verified on values (an upstream flip or a wrong match is not noise). NaN: none verified."""
    mine = margins[margins.node.isin(counted_nodes) & margins.match_verified.astype(bool)] if len(margins) else margins
    values = mine.read_noise_ulps.dropna() if len(mine) else pd.Series(dtype=float)
    return float(values.max()) if len(values) else float("nan")


def _scope(node: str, ops: pd.DataFrame) -> str:
    """The module a discrete op sits in ("" where the scan knows none)."""
    scope = ops.scope[ops.node == node] if len(ops) and "scope" in ops else pd.Series(dtype=str)
    return str(scope.iloc[0]) if len(scope) and scope.iloc[0] else ""


def find_defect(t: ClassTables, counted_nodes: set[str], reach: float) -> Defect | None:
    """The first defect in the class's rows (`DefectSign` in order); None when there is none."""
    out, m = t.outputs, t.margins
    if len(out):
        shape = out[~out.same_shape.astype(bool)]
        if len(shape):
            r = shape.iloc[0]
            return Defect(int(r.seed), r.output, DefectSign.SHAPE)
        dtype = out[~out.same_dtype.astype(bool)] if "same_dtype" in out else out.iloc[:0]
        if len(dtype):
            r = dtype.iloc[0]
            return Defect(int(r.seed), r.output, DefectSign.DTYPE)
        nonfinite = out[(out.nonfinite_by_export > 0) & ~out.reached_by_flip.astype(bool)]
        if len(nonfinite):
            r = nonfinite.iloc[0]
            return Defect(int(r.seed), r.output, DefectSign.NONFINITE_OUTPUT, count=int(r.nonfinite_by_export),
                          of=int(r.numel))
        beyond = out[out.within_noise.eq(False)]
        if len(beyond):
            r = beyond.loc[(beyond.ort_f64_err / beyond.noise_bound).idxmax()]
            return Defect(int(r.seed), r.output, DefectSign.BEYOND_NOISE, ort_error=float(r.ort_f64_err),
                          eager_error=float(r.eager_f64_err), bound=float(r.noise_bound),
                          times=float(r.ort_f64_err / max(r.eager_f64_err, r.scale_ulp)))
        # an output eager itself makes NaN in is the model's (below): forcing choices cannot explain a NaN away
        unexplained = out[out.explained_by_flip.eq(False) & (out.nan_in_eager == 0)]
        if len(unexplained):
            r = unexplained.iloc[0]
            return Defect(int(r.seed), r.output, DefectSign.NOT_EXPLAINED,
                          forced_difference=float(r.forced_max_abs_diff))
    live = m[m.node.isin(counted_nodes)] if len(m) else m
    if len(live):
        broken = live[live.reads_nonfinite_ort_only > 0]
        if len(broken):
            r = broken.iloc[0]
            return Defect(int(r.seed), "", DefectSign.NONFINITE_INPUT, count=int(r.reads_nonfinite_ort),
                          of=int(r.decisions), eager_count=int(r.reads_nonfinite_eager), op_type=r.op_type,
                          node=r.node, scope=_scope(r.node, t.ops))
        # a flip that weighed a non-finite value where eager reads no NaN (or, where the decisions do not align, any)
        unfinite = live[(live.flipped > 0) & (live.flipped_nonfinite > live.flipped_nan_eager)]
        if len(unfinite):
            r = unfinite.iloc[0]
            return Defect(int(r.seed), "", DefectSign.FLIP_AMONG_NONFINITE, op_type=r.op_type, node=r.node,
                          scope=_scope(r.node, t.ops))
        # a call verified on values whose choice flipped further from a tie than its own reads' noise can move it
        # (a call downstream of another flip reads other values: not verified, so not judged here; the margin is
        # the smallest among flips that weigh only finite values)
        own = np.maximum(2 * live.read_noise_ulps.fillna(0), reach)
        far = live[(live.flipped > 0) & live.match_verified.astype(bool) & (live.flipped_margin_ulps > own)]
        if len(far):
            r = far.iloc[0]
            return Defect(int(r.seed), "", DefectSign.FLIP_BEYOND_REACH, op_type=r.op_type, node=r.node,
                          scope=_scope(r.node, t.ops), margin_ulps=float(r.flipped_margin_ulps), reach_ulps=reach)
    # last, a NaN eager itself makes: the model's, not the export's (the export's signs above leave eager's NaN
    # out). A NaN output fails the test's rule, and a choice among values holding eager's NaN is no tie.
    nan = out[out.nan_in_eager > 0] if len(out) else out
    if len(nan):
        r = nan.iloc[0]
        return Defect(int(r.seed), r.output, DefectSign.NAN_IN_EAGER, count=int(r.nan_in_eager), of=int(r.numel))
    both = live[(live.flipped > 0) & (live.flipped_nan_eager > 0)] if len(live) else live
    if len(both):
        r = both.iloc[0]
        return Defect(int(r.seed), "", DefectSign.NAN_IN_EAGER, count=int(r.reads_nonfinite_ort),
                      of=int(r.decisions), eager_count=int(r.reads_nonfinite_eager), op_type=r.op_type,
                      node=r.node, scope=_scope(r.node, t.ops))
    return None


def changed_by_flips(outputs: pd.DataFrame) -> list[str]:
    """The outputs a flip reached and moved beyond the test's tolerance on some checked seed: what a test must
    leave out (or compare tie-aware). An output a flip reaches by data flow but never moves (RT-DETR's logits)
    stays compared, and the verification shows the rule passing with it."""
    moved = outputs[outputs.reached_by_flip.astype(bool) & (outputs.rule_mismatched > 0)] if len(outputs) else outputs
    return sorted(set(moved.output)) if len(moved) else []


def counted(ops: pd.DataFrame) -> pd.DataFrame:
    """The ops a verdict counts: each can flip on its own and reaches an output."""
    return ops[ops.on_output_path.astype(bool) & ops.can_flip.astype(bool)] if len(ops) else ops


def refuted(claim: published.Claim | None, cause: Cause, ops: pd.DataFrame, flipped_types: set[str],
            passes: bool = False) -> Refuted | None:
    """Why the skip's claim does not hold, from the run's own rows (None when it holds or nothing was claimed).
    `passes`: every checked seed's values are within float64's noise bound and pass the export test's rule."""
    if claim is None or reason_holds(claim, cause, flipped_types, ops) is not False:
        return None
    if no_random_op(claim, ops):
        return Refuted.NO_RANDOM_OP
    if claim.cause in (published.EXACT_TIE, published.NEAR_TIE) and cause is Cause.DEFECT:
        return Refuted.DEFECT_NOT_TIE
    if claim.cause == published.FLOAT_NOISE and cause is Cause.NOTHING_REACHES and passes:
        return Refuted.WITHIN_TOLERANCE
    return Refuted.OTHER_CAUSE


def verdict(t: ClassTables, policy: RatePolicy, reach: float, where: Localization | None = None,
            rule: export_rule.Rule = export_rule.BUILT_IN) -> ClassVerdict:
    """The class's cause, decided from its rows into typed evidence (`evidence`), put into words by `verdict_words`
    when read. `where`: a defect's localization (`places.Localization`): where it starts, and the stage and pass
    that make it with what they ask for."""
    remedy = where.remedy if where is not None else None
    model, mode = t.graph.model, t.graph.shape_mode
    reason, claim = stated_reason(model)
    base = dict(skip_reason=reason, claim=str(claim or ""))
    if t.graph.error:
        return ClassVerdict(model, mode, Cause.NO_EXPORT, error=t.graph.error, **base)
    ops = t.ops
    counted_ops = counted(ops)
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
    ev = dict(skipped=bool(reason), counted=len(counted_ops), total=total, checked=checked, failing=len(failing),
              size_in=size_in, unchecked=unchecked, beyond=len(beyond), remedy=remedy, where=where)
    defect = find_defect(t, counted_nodes, reach)
    if defect is not None:
        cause = Cause.DEFECT
        ev.update(defect=defect, passing=len(seeds) - len(failing))
        common.update(defect_seed=defect.seed, defect_output=defect.output)
        compare, exclude = outputs, []
    elif len(counted_ops) and (counted_ops.category == "random").any():
        cause = Cause.RANDOM_DRAW
        draws = counted_ops[counted_ops.category == "random"]
        ev.update(draws=tuple(_names(draws.op_type)), draw_scopes=tuple(_names(draws.scope)))
        exclude = sorted(_reached(ops, set(draws.node)) & set(outputs))
        compare = [o for o in outputs if o not in exclude]
    elif len(seeds) and seeds.stray_flip.astype(bool).any():
        cause = Cause.UNDECIDED
        ev.update(undecided=Undecided.STRAY_FLIP)
        compare, exclude = [o for o in outputs if o not in reached], sorted(reached)
    elif flipped_seeds:
        exact = bool((flipped_rows.flipped_margin_ulps == 0).all())
        cause = Cause.EXACT_TIE if exact else Cause.NEAR_TIE
        # a seed whose every flip sat on an exact tie is one, even in a near-tie class: said, not folded in
        tied = flipped_rows.groupby("seed").flipped_margin_ulps.max()
        ev.update(flips=Flips(len(flipped_seeds), checked, tuple(sorted(flipped_types)), exact,
                              float(flipped_rows.flipped_margin_ulps.max()), reach,
                              tuple(sorted(int(seed) for seed in tied.index[tied == 0]))))
        exclude = changed_by_flips(t.outputs)
        compare = [o for o in outputs if o not in exclude]
    else:  # no flip: what the values show, then whether the seeds bound the flip rate
        values = values_evidence(t.outputs, seeds, bool(failing), checked)
        ev.update(values=values)
        compare, exclude = outputs, []
        if values.state is ValueState.UNPROVEN:
            cause = Cause.UNDECIDED
            ev.update(undecided=Undecided.NO_REFERENCE)
        elif values.state is ValueState.FAILING or not len(counted_ops):
            cause = Cause.FLOAT_NOISE if values.state is ValueState.FAILING else Cause.NOTHING_REACHES
        else:
            # unchecked candidates add to the count's range, never take from the rate's own bound
            bound = max(flips.high / PER, policy.upper_bound(total)) if unchecked else policy.upper_bound(total)
            ev.update(bound=bound, rate_asked=policy.rate, seeds_needed=policy.seeds_needed())
            if bound < policy.rate:
                cause = Cause.NEVER_FLIPS
            else:
                cause = Cause.UNDECIDED
                ev.update(undecided=Undecided.TOO_FEW_SEEDS)
                compare, exclude = [o for o in outputs if o not in reached], sorted(reached)
                if not unchecked:
                    common["seeds_needed"] = policy.seeds_needed()
    evidence = Evidence(**ev, tie_aware=t.tie_aware)
    result = ClassVerdict(model, mode, cause, compare, exclude, where if cause is Cause.DEFECT else None,
                          evidence=evidence, **common)
    graph_ops = ops if t.scanned else None
    result.reason_holds = reason_holds(claim, cause, flipped_types, graph_ops)
    if cause is Cause.DEFECT and remedy is not None and remedy.stage is not Stage.NOT_SHOWN:
        result.stage, result.pass_name = remedy.stage.value, remedy.pass_name
    values_pass = evidence.values is not None and evidence.values.state is ValueState.CLEAN
    result.refuted = refuted(claim, cause, graph_ops, flipped_types, values_pass)
    result.refuted_claim, result.graph_ops = str(claim or ""), len(ops)
    result.verification = verify(t.outputs, result.compare, rule)
    return result


def verify(outputs: pd.DataFrame, compare: list[str], rule: export_rule.Rule = export_rule.BUILT_IN) -> Verification:
    """The rule over the compared outputs on every checked seed, and planted defects in each of them."""
    check = Verification()
    if not len(outputs) or not compare:
        return check
    check.caught = {plant.column: 0 for plant in PLANTS}
    for _, rows in outputs[outputs.output.isin(compare)].groupby("seed"):
        check.seeds += 1
        check.passes += rule_passes(rows, rule)
        for row in rows.itertuples():
            if getattr(row, PLANTS[0].column, -1) < 0:  # nothing planted (an integer output, another shape)
                continue
            check.planted += 1
            for plant in PLANTS:
                check.caught[plant.column] += planted_defect_caught(rows, row.output, plant.column, rule)
    return check


REACH_FLOOR_ULPS = 16.0  # a margin this close to a tie is a candidate whatever the measured noise
REACH_FACTOR = 4.0  # times the largest eager-ORT difference of what the class's counted ops read
UNMEASURED_REACH_ULPS = 1024.0  # where no counted call was verified on values, the screen reaches this far


def reach_ulps(noise: float, floor: float = REACH_FLOOR_ULPS, factor: float = REACH_FACTOR,
               unmeasured: float = UNMEASURED_REACH_ULPS) -> float:
    """How close to a tie (in ulps) a margin must come for rounding noise to flip it: `factor` times the class's
    measured read noise, at least `floor`; `unmeasured` when no counted call was verified on values."""
    return unmeasured if math.isnan(noise) else max(floor, factor * noise)


def never_runs(model: str, shape_mode: str, module: str, op: str) -> ClassVerdict:
    """A class whose forward never calls the `module` that holds the family's discrete `op`: nothing can flip on any
    seed, so nothing reaches an output and no seed needs a check. An investigation's own reason for skipping the
    class (`published.INVESTIGATION_SKIPS`) is quoted beside it, since the measurement answers it."""
    reason, claim = stated_reason(model)
    evidence = Evidence(skipped=bool(reason), never_called=module, never_called_op=op,
                        quoted_skip=published.INVESTIGATION_SKIPS.get(model, ()))
    cause = Cause.NOTHING_REACHES
    outputs: list[str] = []
    result = ClassVerdict(model, shape_mode, cause, outputs, [],
                          flips=Estimate(0.0, 0.0, 0.0, 0, 0, 0, True), failures=None,  # no seed's values checked
                          evidence=evidence, skip_reason=reason, claim=str(claim or ""))
    result.reason_holds = reason_holds(claim, cause, set())
    result.refuted, result.refuted_claim = refuted(claim, cause, pd.DataFrame(), set()), str(claim or "")
    return result


def tie_seeds(screen: pd.DataFrame) -> set[int]:
    """Screened seeds whose smallest margin is an exact tie and whose counted ops read only finite values."""
    if not len(screen):
        return set()
    per_seed = screen.groupby("seed").agg(margin=("min_margin_ulps", "min"), nonfinite=("reads_nonfinite", "max"))
    return {int(s) for s in per_seed.index[(per_seed.margin == 0) & (per_seed.nonfinite == 0)]}
