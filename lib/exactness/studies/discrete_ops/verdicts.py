"""Per class, a computed verdict on what a failing export check of it is, set beside the skip list's reason.

The noise bound of a class is measured, not chosen: twice the largest difference (in ulps of each output's
scale) between eager and ORT on the seeds where no discrete op flipped, and at least `NOISE_FLOOR_ULPS`.
A mismatch is explained by flips when eager re-run with ORT's choices agrees with ORT within that bound on
every output (integer outputs: exactly). The skip's reason is judged by its claim, labelled once in
`exactness.reference.SKIP_CLAIMS` (cause, and the op for a tie), against the cause the verdict measured.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from exactness import reference
from exactness.compare.rates import wilson_interval
from exactness.models import tiny_subjects

NOISE_FLOOR_ULPS = 16.0
EXPORT_FAILED = "export failed"
RANDOM = "random ops on the outputs: not deterministic"
NO_DISCRETE = "no discrete op that can flip reaches an output: compare values (skip unfounded)"
NOISE_ONLY = "float noise only: values compare at a wider tolerance"
NEVER_FLIPPED = "discrete ops reach outputs but never flipped: compare values"
EXACT_TIES = "exact ties flip: comparison ill-posed on the tiny model (skip founded)"
NEAR_TIES = "near-ties flip: a tie-aware comparison passes"
UNEXPLAINED = "mismatch remains after forcing ORT's choices: a bug or a non-discrete difference"
# The cause each verdict measures, in the terms of the skip reasons' labelled claims (exactness.reference):
# a reason holds when its claimed cause is the measured one (and, for a tie, its op is among those that flipped).
VERDICT_CAUSES = {EXACT_TIES: reference.EXACT_TIE, NEAR_TIES: reference.NEAR_TIE, RANDOM: reference.RANDOM_DRAW,
                  NOISE_ONLY: reference.FLOAT_NOISE, NO_DISCRETE: "nothing discrete on the outputs",
                  NEVER_FLIPPED: "no flip", UNEXPLAINED: "", EXPORT_FAILED: ""}


def reason_holds(claim: reference.Claim | None, verdict: str, flipped_ops: set[str]) -> bool | None:
    """Whether the measured verdict supports the reason's labelled claim. None (undecided) when the class is
    not skipped, did not export, or a mismatch remains that forcing ORT's choices does not explain."""
    if claim is None or verdict in (UNEXPLAINED, EXPORT_FAILED):
        return None
    if claim.cause != VERDICT_CAUSES[verdict]:
        return False
    return not claim.op or claim.op in flipped_ops


def measured_cause(verdict: str, flipped_ops: set[str]) -> str:
    """The verdict's cause in the claims' terms, with the op types that flipped (for a tie)."""
    cause = VERDICT_CAUSES[verdict]
    return cause + (f" at {', '.join(sorted(flipped_ops))}" if cause and flipped_ops else "")


def stated_reason(model: str) -> tuple[str, reference.Claim | None]:
    """The skip's reason and its labelled claim: the class's registry entry where it overrides them, else the
    export test's own (exactness.reference)."""
    entry = tiny_subjects.SUBJECTS.get(model) or tiny_subjects.Subject(model)
    reason = entry.skip_reason if entry.skip_reason is not None else reference.skip_reason(model)
    claim = reference.Claim(*entry.skip_claim) if entry.skip_claim else reference.skip_claim(model)
    return reason, claim


def noise_bound(outputs: pd.DataFrame, flipped_seeds: set, reached: set) -> float:
    """Twice the largest plain difference in ulps of scale where no choice can have moved it: on seeds without
    any flip, and on outputs no discrete op reaches (float outputs only)."""
    quiet = outputs[~outputs.seed.isin(flipped_seeds) | ~outputs.output.isin(reached)] if len(outputs) else outputs
    values = quiet.max_ulps_of_scale.dropna() if len(quiet) else pd.Series(dtype=float)
    return max(NOISE_FLOOR_ULPS, 2.0 * float(values.max())) if len(values) else NOISE_FLOOR_ULPS


def read_noise(margins: pd.DataFrame) -> float:
    """The largest eager-ORT difference of what a class's discrete ops read, in ulps of each decision's scale
    (the unit of the margins), over calls whose match was verified on values (an upstream flip or a wrong match
    is not noise): a margin below it is within reach of rounding noise. NaN when no call was verified."""
    if not len(margins) or "read_noise_ulps" not in margins or "match_verified" not in margins:
        return float("nan")
    verified = margins[margins.match_verified.fillna(False).astype(bool)].read_noise_ulps.dropna()
    return float(verified.max()) if len(verified) else float("nan")


def live_ops(ops: pd.DataFrame) -> set[tuple[str, str]]:
    """(class, node) of every op that can flip and reaches an output. Node names repeat across classes
    (`node_gt` in two graphs), so a node is only ever named with its class."""
    live = ops[ops.on_output_path & ops.can_flip] if len(ops) else ops
    return set(zip(live.model, live.node, strict=True)) if len(live) else set()


def of_ops(frame: pd.DataFrame, keys: set[tuple[str, str]]) -> pd.Series:
    """Which rows of a per-node table belong to the (class, node) pairs in `keys`."""
    return pd.Series([key in keys for key in zip(frame.model, frame.node, strict=True)], index=frame.index, dtype=bool)


def per_op(margins: pd.DataFrame, keys: set[tuple[str, str]]) -> pd.DataFrame:
    """One row per (class, op) in `keys` over all seeds: eager's smallest margin, exact ties and flips
    (sums), and the read noise of its verified calls."""
    mine = margins[of_ops(margins, keys)].copy()
    verified = mine.match_verified.fillna(False).astype(bool) if "match_verified" in mine else False
    mine["verified_noise"] = mine.read_noise_ulps.where(verified)
    return mine.groupby(["model", "node"], as_index=False).agg(
        seeds=("seed", "nunique"), decisions=("decisions", "max"), smallest_margin=("min_margin", "min"),
        smallest_margin_ulps=("min_margin_ulps", "min"), exact_ties=("exact_ties", "sum"), flipped=("flipped", "sum"),
        read_noise_ulps=("verified_noise", "max"))


def explain(outputs: pd.DataFrame, bound: float) -> pd.DataFrame:
    """The counterfactual table: per (seed, output) of seeds with a flip, plain and forced differences and
    whether the forced run agrees with ORT within the bound."""
    if not len(outputs) or "forced_max_abs_diff" not in outputs:
        return pd.DataFrame(columns=["model", "shape_mode", "seed", "output", "max_abs_diff", "max_ulps_of_scale",
                                     "forced_max_abs_diff", "forced_max_ulps_of_scale", "explained_by_flip"])
    flipped = outputs[outputs.seed_flipped.astype(bool)].copy()
    integer = flipped.max_ulps_of_scale.isna() & flipped.forced_max_ulps_of_scale.isna()
    within = np.where(integer, flipped.forced_mismatched == 0, flipped.forced_max_ulps_of_scale <= bound)
    flipped["noise_bound_ulps"] = bound
    flipped["explained_by_flip"] = within.astype(bool)
    return flipped


def _of(frame: pd.DataFrame, key: tuple[str, str]) -> pd.DataFrame:
    return frame[(frame.model == key[0]) & (frame.shape_mode == key[1])] if len(frame) else frame


def verdicts(graphs: pd.DataFrame, ops: pd.DataFrame, margins: pd.DataFrame, outputs: pd.DataFrame) -> tuple:
    """(verdicts table, counterfactual table)."""
    rows, counterfactual = [], []
    for graph in graphs.itertuples(index=False):
        key = (graph.model, graph.shape_mode)
        reason, claim = stated_reason(graph.model)
        row = {"model": graph.model, "shape_mode": graph.shape_mode, "skip_reason_reference": reason,
               "reason_claim": str(claim or "")}
        if getattr(graph, "error", ""):
            rows.append({**row, "verdict": EXPORT_FAILED, "detail": graph.error, "seeds": 0, "measured_cause": "",
                         "reason_holds": None})
            continue
        o, m, out = (_of(frame, key) for frame in (ops, margins, outputs))
        live = o[o.on_output_path & o.can_flip] if len(o) else o
        seeds = int(graph.seeds)
        live_m = m[m.node.isin(set(live.node))] if len(m) else m
        flipped_rows = live_m[live_m.flipped.fillna(0) > 0] if len(live_m) else live_m
        flipped_seeds = set(flipped_rows.seed) if len(flipped_rows) else set()
        # an op left out as unable to flip on its own that flips anyway, on a seed where no counted op did,
        # contradicts its exclusion: it is reported, never silently read as noise
        other_m = m[~m.node.isin(set(live.node))] if len(m) else m
        stray = other_m[(other_m.flipped.fillna(0) > 0) & ~other_m.seed.isin(flipped_seeds)] if len(other_m) \
            else other_m
        # an Equal that holds is not a tie to break: only selections, orderings and roundings have ties
        tie_ops = live_m[live_m.op_type != "Equal"] if len(live_m) else live_m
        tied_seeds = set(tie_ops[tie_ops.exact_ties.fillna(0) > 0].seed) if len(tie_ops) else set()
        reached = {name for names in live.reaches_outputs for name in names} if len(live) else set()
        bound = noise_bound(out, flipped_seeds, reached)
        explained = explain(out, bound)
        counterfactual.append(explained)
        unexplained = explained[~explained.explained_by_flip] if len(explained) else explained
        low, high = wilson_interval(len(flipped_seeds), seeds)
        quiet = out[~out.seed.isin(flipped_seeds | (set(stray.seed) if len(stray) else set()))] if len(out) else out
        tolerance = float(quiet.max_ulps_of_scale.max()) if len(quiet) else float("nan")
        tolerance_abs = float(quiet.max_abs_diff.max()) if len(quiet) else float("nan")
        row.update(seeds=seeds, discrete_ops=len(o), discrete_ops_on_outputs=len(live),
                   stray_flip_seeds=int(stray.seed.nunique()) if len(stray) else 0,
                   tie_fraction=len(tied_seeds) / seeds if seeds else float("nan"),
                   flip_rate=len(flipped_seeds) / seeds if seeds else float("nan"), rate_low=low, rate_high=high,
                   noise_bound_ulps=bound, tolerance_ulps=tolerance, tolerance_abs=tolerance_abs,
                   read_noise_ulps=read_noise(live_m),
                   passes_test_tolerance=bool(len(quiet) == 0 or (quiet.mismatched == 0).all()))
        if len(stray):
            verdict = UNEXPLAINED
            detail = (f"{', '.join(sorted(set(stray.node)))}, left out as unable to flip on its own, flipped on "
                      f"{stray.seed.nunique()} seeds where no counted op did")
        elif len(live) and (live.category == "random").any():
            verdict, detail = RANDOM, ", ".join(sorted(set(live[live.category == "random"].op_type)))
        elif not len(live):
            verdict = NO_DISCRETE if row["passes_test_tolerance"] else NOISE_ONLY
            detail = f"largest difference {tolerance:.3g} ulps of scale ({tolerance_abs:.3g} absolute)"
        elif not flipped_seeds and not row["passes_test_tolerance"]:
            unmatched = live_m[live_m.flipped.isna()].node.nunique() if len(live_m) else 0
            verdict = UNEXPLAINED
            detail = (f"outputs differ beyond the test's tolerance on {int((quiet.mismatched > 0).sum())} seed-outputs "
                      f"with no flip at a matched op; {unmatched} of {len(live)} ops on output paths had no trusted "
                      "eager match, so their choices were not compared")
        elif not flipped_seeds:
            verdict, detail = NEVER_FLIPPED, f"no flip in {seeds} seeds; largest difference {tolerance:.3g} ulps"
        elif len(unexplained):
            verdict = UNEXPLAINED
            detail = "outputs " + ", ".join(sorted(set(unexplained.output))) + " still differ after forcing"
        else:
            at_ties = flipped_rows.exact_ties.fillna(0) > 0
            verdict = EXACT_TIES if at_ties.all() else NEAR_TIES
            scopes = sorted({f"{r.op_type} in {o.set_index('node').scope.get(r.node, '') or 'the root'}"
                             for r in flipped_rows.itertuples()})
            detail = (f"flips at {', '.join(scopes)}; "
                      + ("the tied values are equal on the tiny random model: inputs or a config that make them "
                         "distinct (no padded or masked positions, a non-constant head) remove the ties"
                         if verdict == EXACT_TIES else "flipped calls came within "
                         f"{float(flipped_rows.min_margin.max()):.3g} of a tie"))
        flipped_ops = set(flipped_rows.op_type) if verdict in (EXACT_TIES, NEAR_TIES) else set()
        # a remaining mismatch says neither that the reason holds nor that it does not: it is left open (None)
        row.update(verdict=verdict, detail=detail, measured_cause=measured_cause(verdict, flipped_ops),
                   reason_holds=reason_holds(claim, verdict, flipped_ops))
        rows.append(row)
    frames = [f for f in counterfactual if len(f)]
    return pd.DataFrame(rows), (pd.concat(frames, ignore_index=True) if frames else explain(pd.DataFrame(), 0))
