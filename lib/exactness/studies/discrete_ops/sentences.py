"""What each section of the discrete-ops report shows: a table for people and its one computed sentence.

The notebook's cells state a question, call one function here and show what it returns; every number in a
sentence comes from the run's `Result`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from exactness.compare.export_rule import BUILT_IN
from exactness.engine import place_words, verdict_words
from exactness.engine import verdicts as v
from exactness.engine.answers import rate_words
from exactness.engine.outputs import NOISE_FACTOR
from exactness.engine.pairs import PairEvidence
from exactness.models import checkout_index, class_registry, sources
from exactness.runtimes.sides import Pair, emulation_note
from exactness.studies.discrete_ops.export_test_change import PLANT_FACTOR, PLANTS, PatchedReplay, Written
from exactness.studies.discrete_ops.rule_used import Judging
from exactness.studies.discrete_ops.study import Result
from exactness.workbook import wording
from exactness.workbook.findings import significant
from exactness.workbook.wording import count, plural


@dataclass
class Section:
    frame: pd.DataFrame  # what the section's table shows (may be empty)
    sentence: str  # the one computed sentence under it
    extra: dict = field(default_factory=dict)  # what a figure of the section needs


def registered(models, checkout: str | sources.Checkout = "", graphs: pd.DataFrame | None = None) -> Section:
    """Every registered class and whether this run checked it, then the run's classes from elsewhere (a
    checkout's testers, your own builder); "built by" is what builds each in this run (`sources.source_of`), or,
    for a class of this run that could not be built, why (from the run's `graphs` table)."""
    ran = list(dict.fromkeys(models))
    unbuilt = {} if graphs is None else {
        row.model: row.error for row in graphs.itertuples() if str(row.error).startswith("could not build")}

    # the skip each verdict is set against (`sources.stated`): with a checkout, its export test's EXPORT_SKIPS
    skipped = {name for name in [*class_registry.SUBJECTS, *ran]
               if (sources.stated(name, checkout).reason if str(checkout) else v.stated_reason(name)[0])}

    def built_by(name: str) -> str:
        return f"not built: {unbuilt[name]}" if name in unbuilt else sources.source_of(name, checkout)

    rows = [{"class": name, "in this run": name in ran, "built by": built_by(name),
             "skipped by the export test": name in skipped}
            for name in class_registry.SUBJECTS]
    others = [name for name in ran if name not in class_registry.SUBJECTS]
    rows += [{"class": name, "in this run": True, "built by": built_by(name),
              "skipped by the export test": name in skipped} for name in others]
    left = [name for name in class_registry.NAMES if name not in ran]
    registered_run = len(ran) - len(others)
    return Section(pd.DataFrame(rows),
                   f"{registered_run} of the {count(len(class_registry.NAMES))} registered classes ran"
                   + (f", and {plural(len(others), 'class', 'classes')} from elsewhere" if others else "")
                   + (f"; not in this run: {', '.join(left)}." if left else "."))


def graphs(table: pd.DataFrame) -> Section:
    failed = table[table.error != ""]
    fresh, cached = int(table.exports.sum()), int(table.cached_exports.sum())
    return Section(table, f"{count(len(table) - len(failed))} of {count(len(table))} graphs exported"
                          + (f"; failed: {', '.join(failed.model)}" if len(failed) else "")
                          + f"; {plural(fresh, 'fresh export')} ({significant(float(table.export_seconds.sum()))} s in "
                            f"all), {count(cached)} read from the export cache.")


def ops(table: pd.DataFrame) -> Section:
    if not len(table):
        return Section(table, "No graph has a discrete op.")
    shown = table.assign(reaches=table.reaches_outputs.map(lambda names: ", ".join(names) or "none"))
    live = table[table.on_output_path & table.can_flip]
    return Section(shown, f"{count(len(live))} of {plural(len(table), 'discrete op')} can flip on their own and reach "
                          f"an output, in {count(live.model.nunique())} of {count(table.model.nunique())} classes.")


def screen(result: Result) -> Section:
    """Per class: seeds screened, candidates within reach, checks, and whether the screen's margins equal the
    checks' eager margins on the seeds both cover (the screen is exact, or it is not used)."""
    rows = []
    for verdict in result.verdicts:
        if not verdict.screened:
            continue
        mine = result.screen[result.screen.model == verdict.model]
        checked = result.margins[(result.margins.model == verdict.model)
                                 & result.margins.node.isin(set(mine.node))]
        both = mine.merge(checked, on=["seed", "node"], suffixes=("", "_check"))
        same = bool(np.array_equal(both.min_margin.to_numpy(float), both.min_margin_check.to_numpy(float),
                                   equal_nan=True))
        ties = int((mine.groupby("seed").exact_ties.max() > 0).sum())
        rows.append({"class": verdict.model, "screened": verdict.screened, "reach (ulps)": verdict.reach_ulps,
                     "seeds with an exact tie": ties, "candidates": verdict.candidates, "checked": verdict.checked,
                     "screen equals checks": same, "seeds compared": int(both.seed.nunique())})
    frame = pd.DataFrame(rows)
    if not len(frame):
        return Section(frame, "No class has a counted op: nothing to screen.")
    exact = int(frame["screen equals checks"].sum())
    classes = plural(len(frame), "class", "classes")
    return Section(frame, f"{count(int(frame.screened.sum()))} seeds screened in eager; "
                          f"{count(int(frame.candidates.sum()))} came within reach of a tie; the screen's margins "
                          f"equal the checks' on every shared seed in {exact} of {classes}.")


def noise(result: Result) -> Section:
    """Per class, the float64 proof over the outputs no flip or draw reaches (those are judged by forcing the
    choices, in the flips section): the largest ORT error over the bound, beside eager's own error, so that the
    table's worst ratio and the sentence's count are of the same outputs."""
    out = result.outputs[result.outputs.floating.astype(bool) & result.outputs.noise_bound.notna()]
    if not len(out):
        return Section(pd.DataFrame(), "No float64 reference was computed.")
    judged = out.within_noise.notna()
    out = out.assign(over=(out.ort_f64_err / out.noise_bound).where(judged),
                     eager_ulps=(out.eager_f64_err / out.scale_ulp).where(judged),
                     ort_ulps=(out.ort_f64_err / out.scale_ulp).where(judged), judged=judged,
                     flipped=~judged)
    frame = out.groupby("model", as_index=False).agg(
        outputs=("output", "nunique"), seeds=("seed", "nunique"), eager_ulps=("eager_ulps", "max"),
        ort_ulps=("ort_ulps", "max"), worst_over_bound=("over", "max"),
        beyond=("within_noise", lambda s: int(s.eq(False).sum())), flipped=("flipped", "sum"))
    beyond = frame[frame.beyond > 0]
    return Section(frame, f"On the outputs no flip reaches, ORT is within {significant(NOISE_FACTOR)}x eager's own "
                          f"float64 error everywhere for {count(len(frame) - len(beyond))} of "
                          f"{plural(len(frame), 'class', 'classes')}"
                          + (f"; beyond it (each a defect below): {', '.join(beyond.model)}." if len(beyond) else "."))


def made_by(stage: str, pass_name: str) -> str:
    """The stage and pass that make a defect, in words ("" when no stage was located)."""
    if pass_name:
        return f"{'onnxscript rule' if 'exporter' in stage else 'ONNX Runtime pass'} {pass_name}"
    return stage


def defects(result: Result) -> Section:
    """Each defect's place, the stage and pass that make it with the errors from float64 with and without it,
    and the reproduction the run wrote and ran (`extra["reproductions"]`: (class, pass, code, sentence))."""
    table = place_words.table(result.localizations)
    if not len(table):
        return Section(table, "")
    parts, reproductions, rows = [], [], []
    for r in table.itertuples():
        place = r.module or (f"{r.op_type} (ONNX node {r.node} of the exported graph)" if r.node else "") \
            or "no single place"
        made = made_by(r.stage, r.pass_name)
        rows.append({"model": r.model, "seed": r.seed, "place": place,
                     "shows": r.detail + (f"; {r.missing}" if r.missing else ""), "made_by": made or "not located",
                     "error_with": r.error_with, "error_without": r.error_without, "remedy": r.remedy})
        errors = (f" (error from float64 {r.error_with:.3g} with it, {r.error_without:.3g} without)"
                  if made and r.error_with == r.error_with else "")
        parts.append(f"{r.model} at {place}" + (f", made by {made}{errors}" if made else ""))
        if r.reproduction:
            verdict = "reproduces" if r.reproduces else "does not reproduce"
            reproductions.append((r.model, r.pass_name, r.reproduction,
                                  f"Run here, this reproduction of {r.pass_name} {verdict}: {r.reproduction_output}."))
    return Section(pd.DataFrame(rows), f"{plural(len(table), 'defect')} localized: " + "; ".join(parts) + ".",
                   {"reproductions": reproductions})


def flips(result: Result) -> Section:
    table = result.outputs[result.outputs.reached_by_flip.astype(bool)]
    if not len(table):
        return Section(table, "No seed flipped: no counterfactual was needed.")
    per_seed = table.groupby(["model", "seed"]).explained_by_flip.apply(lambda s: bool(s.fillna(False).all()))
    # a flipped decision that weighed a non-finite value eager does not read (the engine's FLIP_AMONG_NONFINITE) is
    # explained by forcing too, but it is a defect's flip
    m, ops = result.margins, result.ops
    counted = set(v.counted(ops).node) if len(ops) else set()
    broken = (m[m.node.isin(counted) & (m.flipped > 0) & (m.flipped_nonfinite > m.flipped_nan_eager)]
              if len(m) and "flipped_nonfinite" in m else m.iloc[:0])
    defects = {(r.model, r.seed) for r in broken.itertuples()} & set(per_seed.index[per_seed])
    by_defect = (f"; on {count(len(defects))} of them ({', '.join(sorted({k[0] for k in defects}))}) a flipped "
                 "decision weighed a value ORT alone made non-finite: the flip is a defect's, not a tie broken "
                 "differently" if defects else "")
    return Section(table, f"Forcing ORT's choices on eager explains every output on {count(int(per_seed.sum()))} of "
                          f"{plural(len(per_seed), 'flipped seed')}{by_defect}.")


def measured_here(verdict: v.ClassVerdict, outputs: pd.DataFrame) -> str:
    """This run's figure to set a skip's reason against: the largest eager-ORT difference over the checked seeds, at
    the output the reason names where it names one, with the measured cause (and why the claim fails, if it does)."""
    mine = outputs[(outputs.model == verdict.model) & outputs.floating.astype(bool)] if len(outputs) else outputs
    named = mine[[bool(o) and o in verdict.skip_reason for o in mine.output]] if len(mine) else mine
    shown = named if len(named) else mine
    diffs = shown.max_abs_diff.dropna() if len(shown) else pd.Series(dtype=float)
    parts = [verdict.cause.value]
    if len(diffs):
        worst = shown.loc[diffs.idxmax()]
        parts.append(f"largest eager-ORT difference {significant(float(worst.max_abs_diff))} ({worst.output}) over "
                     f"{plural(shown.seed.nunique(), 'checked seed')}")
    if refutation := verdict_words.refutation_of(verdict):
        parts.append(refutation)
    return "; ".join(parts)


def verdicts(result: Result) -> Section:
    """The verdicts table with each class's failure rate in the one rate shape and, beside a skip's reason, the
    figure this run measured."""
    table = verdict_words.table(result.verdicts)
    by_model = {(x.model, x.shape_mode): x for x in result.verdicts}
    found = [by_model.get((r.model, r.shape_mode)) for r in table.itertuples()]
    table["fails"] = [rate_words(x.failures) if x else "" for x in found]
    table["measured"] = [measured_here(x, result.outputs) if x and x.skip_reason else "" for x in found]
    stated = table[table.skip_reason != ""]
    judged = stated[stated.reason_holds.notna()]
    holds = int(judged.reason_holds.astype(bool).sum())
    skipped = plural(len(stated), "skipped class", "skipped classes")
    return Section(table, f"The export test's stated reason holds for {holds} of {skipped}"
                          + (f", not for {len(judged) - holds}" if len(judged) > holds else "")
                          + (f", undecided for {len(stated) - len(judged)}" if len(stated) > len(judged) else "")
                          + ".")


def precision_sentence(found: list[PairEvidence], pairs: list[Pair]) -> str:
    """Which classes a precision makes fail, and the emulation's note."""
    parts = []
    for pair in pairs:
        mine = [c for c in found if c.pair == pair.spec and c.seeds]
        failing = [c.model for c in mine if c.failed]
        flipping = [c.model for c in mine if c.flipped and not c.failed]
        parts.append(f"{pair.other.label}: the export test fails for {plural(len(failing), 'class', 'classes')} of "
                     f"{len(mine)}" + (f" ({', '.join(failing)})" if failing else "")
                     + (f"; a choice flips without failing it for {', '.join(flipping)}" if flipping else ""))
    return "; ".join(parts) + ". " + emulation_note([s for p in pairs for s in (p.reference, p.other)])


def rule_section(judging: Judging) -> Section:
    """Which rule judged every checked seed, and the classes the built-in replica judges differently."""
    judged, frame = judging.judged, judging.table
    if judged.problem:
        sentence = f"The checkout's rule could not be read: {judged.problem}. Every class is judged by {BUILT_IN.name}."
    elif judged.rule is BUILT_IN:
        sentence = f"No checkout given: every class is judged by {BUILT_IN.name}."
    else:
        moved = int(frame["seeds judged differently"].astype(bool).sum()) if len(frame) else 0
        sentence = (f"Every checked seed, and so every rate and verification above, judged by {judged.rule.name}; "
                    "the built-in replica judges "
                    + (f"{plural(moved, 'class', 'classes')} differently on some seed (named in the table)."
                       if moved else "every checked seed the same.")
                    + (" The half-precision floor is not applied to these counts (taken at the test's own "
                       "tolerances)." if judged.rule.half_tolerance is not None else ""))
    return Section(frame, sentence)


def replay_section(table: pd.DataFrame) -> Section:
    """The real test's pass/fail of each replayed seed beside the workbook's (`rule_used.replay_agreement`)."""
    if not len(table):
        return Section(table, "No static-mode seed was checked: nothing to replay in the real test.")
    agree = int(table["agree"].sum())
    differ = [f"{model} seed {seed}" for model, seed in table.loc[~table.agree, ["class", "seed"]].itertuples(
        index=False)]
    return Section(table, f"The real test agrees with the workbook on {agree} of {len(table)} replayed seeds"
                   + (f"; it differs on {', '.join(differ)}." if differ else "."))


def patch_section(written: Written) -> Section:
    """A row per change the answers make to the checkout's export test, and where the patch was written."""
    frame = pd.DataFrame([{"class": c.model, "change": c.edit.value, "outputs": ", ".join(c.outputs),
                           "reason": c.reason} for c in written.made])
    notes = written.notes
    if written.path is None:
        return Section(frame, "Nothing in this run's answers changes the checkout's export test"
                       + (f" ({'; '.join(notes)})." if notes else "."))
    path = written.path
    return Section(frame, f"The change the answers recommend, {plural(len(written.made), 'class', 'classes')}, is "
                   f"{path.parent.name}/{path.name}, against the checkout's {checkout_index.EXPORT_TEST} (git apply "
                   "from its root)" + (f"; not made: {'; '.join(notes)}." if notes else "."))


def patched_replay_section(replayed: PatchedReplay) -> Section:
    """The patched real test on each replayed seed, and how often a planted defect fails it in every output."""
    frame = replayed.table
    if not replayed.changed:
        return Section(frame, "The patch changes no class of the checkout's export test: no patched test to replay.")
    if not len(frame):
        return Section(frame, "No changed class has a checked static-mode seed to replay.")
    passing = int((frame["patched test"] == "passed").sum())

    def everywhere(column: str) -> int:  # seeds on which the plant was caught in every compared output
        return int(frame[f"caught: {column}"].map(lambda x: x.split(" of ")[0] == x.split(" of ")[1]).sum())

    words = "; ".join(f"{column}, on {everywhere(column)} of {len(frame)}" for column, _ in PLANTS)
    return Section(frame, f"The patched real test passes {passing} of {len(frame)} replayed seeds. A defect planted "
                   f"in each compared output ({PLANT_FACTOR:g}x the tolerance) fails it in every output: {words} "
                   "seeds.")


def pair_rates(found: list[PairEvidence]) -> pd.DataFrame:
    """Per class and pair, the counts and the cause they prove, with the failure rate in the one rate shape."""
    return pd.DataFrame([{"model": c.model, "sides": Pair.parse(c.pair).label, "seeds": c.seeds, "flipped": c.flipped,
                          "failed": c.failed, "failed_without_flip": c.failed_without_flip, "cause": c.cause.value,
                          "rate": wording.rate(c.failed, c.seeds) if c.seeds else ""} for c in found])
