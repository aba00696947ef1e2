"""What each section of the discrete-ops report shows: the table to draw and its one computed sentence.

The notebook's cells state a question, call one function here and show what it returns; every number in a
sentence comes from the run's tables. Each function takes the study's tables and returns a `Section`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from exactness.studies.discrete_ops import verdicts as v


@dataclass
class Section:
    frame: pd.DataFrame  # what the section's table shows (may be empty)
    sentence: str  # the one computed sentence under it
    extra: dict = field(default_factory=dict)  # what a figure of the section needs


def graphs(table: pd.DataFrame) -> Section:
    """Which classes exported, at what cost, and which failed (with the exporter's error)."""
    shown = table.assign(error=table["error"].fillna("") if "error" in table else "")
    failed = shown[shown.error != ""]
    exports = int(shown.exports.fillna(0).sum()) if "exports" in shown else 0
    seconds = float(shown.export_seconds.fillna(0).sum()) if "export_seconds" in shown else 0.0
    sentence = (f"{len(shown) - len(failed)} of {len(shown)} graphs exported"
                + (f"; failed: {', '.join(failed.model)}" if len(failed) else "")
                + f"; {exports} fresh exports took {seconds:.0f} s.")
    return Section(shown, sentence)


def ops(table: pd.DataFrame) -> Section:
    """Every discrete op found, the outputs it reaches, and how many count (can flip and reach an output)."""
    if not len(table):
        return Section(table, "No graph has a discrete op.")
    shown = table.assign(reaches=table.reaches_outputs.map(lambda names: ", ".join(names) or "none"))
    live = table[table.on_output_path & table.can_flip]
    left_out = table[table.not_counted.fillna("") != ""].groupby("not_counted").node.count()
    sentence = (f"{len(live)} of {len(table)} discrete ops can flip and reach an output, in "
                f"{live.model.nunique()} of {table.model.nunique()} classes"
                + ("; left out: " + "; ".join(f"{n} where the op {why}" for why, n in left_out.items())
                   if len(left_out) else "") + ".")
    return Section(shown, sentence)


def margins(margins_table: pd.DataFrame, ops_table: pd.DataFrame, verdicts: pd.DataFrame) -> Section:
    """Per op on an output path: smallest margin, exact ties, flips and read noise; `extra` carries what the
    margin figure draws (the (class, node) pairs on output paths and each class's read noise)."""
    live = v.live_ops(ops_table) if len(ops_table) else set()
    if not len(margins_table) or not live:
        return Section(pd.DataFrame(), "No discrete op that can flip reaches an output: nothing to measure here.",
                       {"live": live, "noise": {}})
    per_op = v.per_op(margins_table, live)
    noise = verdicts.groupby("model").read_noise_ulps.max().to_dict() if "read_noise_ulps" in verdicts else {}
    nonzero = per_op.smallest_margin_ulps[per_op.smallest_margin_ulps > 0]
    # an Equal whose two sides are equal holds: that is its answer, not a tie to break (as in the verdicts)
    equal = ops_table[ops_table.op_type == "Equal"]
    holds = v.of_ops(per_op, set(zip(equal.model, equal.node, strict=True)))
    ties = int(((per_op.exact_ties > 0) & ~holds).sum())
    sentence = (f"Exact ties in {ties} of {len(per_op)} ops; "
                + (f"the smallest non-zero margin is {nonzero.min():.3g} ulps." if len(nonzero) else
                   "every op's smallest margin is an exact tie."))
    return Section(per_op, sentence, {"live": live, "noise": noise})


def counterfactual(table: pd.DataFrame) -> Section:
    """Outputs of flipped seeds, plain and with ORT's choices forced, and how many seeds forcing explains."""
    if not len(table):
        return Section(table, "No seed flipped: no counterfactual was needed.")
    explained = table.groupby(["model", "shape_mode", "seed"]).explained_by_flip.all()
    return Section(table, f"Forcing ORT's choices explains every output on {int(explained.sum())} of "
                          f"{len(explained)} flipped seeds.")


def verdicts(table: pd.DataFrame) -> Section:
    """The verdict per class beside the skip's reason, and how many stated reasons the measurement supports."""
    if not len(table):
        return Section(table, "No class was checked.")
    stated = table[table.skip_reason_reference.fillna("") != ""]
    judged = stated[stated.reason_holds.notna()]
    holds = int(judged.reason_holds.astype(bool).sum())
    counts = "; ".join(f"{n} {verdict}" for verdict, n in table.verdict.value_counts().items())
    sentence = (f"{len(table)} class graphs: {counts}. The skip's stated reason holds for {holds} of the "
                f"{len(stated)} skipped classes" + (f", not for {len(judged) - holds}" if len(judged) > holds else "")
                + (f", undecided for {len(stated) - len(judged)}" if len(stated) > len(judged) else "") + ".")
    return Section(table, sentence)


def summary(verdicts_table: pd.DataFrame, n_seeds: int) -> dict:
    """The run's summary.json entries: classes, seeds asked per class, each class's verdict and flip rate."""
    return {"classes": int(len(verdicts_table)), "seeds": int(n_seeds),
            "verdicts": {r.model: r.verdict for r in verdicts_table.itertuples()},
            "flip_rate": {r.model: r.flip_rate for r in verdicts_table.itertuples() if r.seeds}}
