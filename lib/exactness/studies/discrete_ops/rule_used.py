"""Which version of the export test's check judged each class: the built-in replica without a checkout; with one,
the checkout's own `_check_outputs_close` (`models.checkout_rule`), applied to the same counts of every checked
seed beside the replica's, so a seed the two judge differently is named."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from exactness.compare.export_rule import BUILT_IN, OutputCount, Rule
from exactness.engine.outputs import rule_count
from exactness.models import checkout_rule, real_test, sources


@dataclass(frozen=True)
class Judged:
    """The rule a run's classes are judged by, or why the checkout's could not be read (one line)."""

    rule: Rule
    problem: str = ""


def rule_of(checkout: str | sources.Checkout = "") -> Judged:
    return Judged(*checkout_rule.judging(str(checkout) if checkout else ""))


def _counts(rows: pd.DataFrame) -> list[OutputCount]:
    return [rule_count(r) for r in rows.itertuples()]


def per_seed(outputs: pd.DataFrame, rule: Rule) -> pd.DataFrame:
    """model, shape_mode, seed, and whether the built-in replica and `rule` pass the seed's outputs."""
    rows = []
    for (model, mode, seed), group in outputs.groupby(["model", "shape_mode", "seed"], sort=True):
        counts = _counts(group)
        rows.append({"model": model, "shape_mode": mode, "seed": int(seed),
                     "built_in_passes": BUILT_IN.judge(counts).passed, "rule_passes": rule.judge(counts).passed})
    return pd.DataFrame(rows, columns=["model", "shape_mode", "seed", "built_in_passes", "rule_passes"])


@dataclass(frozen=True)
class Judging:
    """Which rule judged a run's checked seeds, and per class how it and the built-in replica judged them."""

    judged: Judged
    table: pd.DataFrame  # per class and shape mode: the rule, seeds checked, passes under each, seeds judged apart


def judging(outputs: pd.DataFrame, checkout: str | sources.Checkout = "") -> Judging:
    judged = rule_of(checkout)
    seeds = per_seed(outputs, judged.rule)
    rows = []
    for (model, mode), group in seeds.groupby(["model", "shape_mode"], sort=False):
        differ = group[group.built_in_passes != group.rule_passes].seed.tolist()
        rows.append({"class": model, "shape mode": mode, "rule": judged.rule.name, "seeds checked": len(group),
                     "pass (built-in replica)": int(group.built_in_passes.sum()),
                     "pass (this rule)": int(group.rule_passes.sum()),
                     "seeds judged differently": ", ".join(map(str, differ))})
    return Judging(judged, pd.DataFrame(rows))


def replay_agreement(result, checkout: str | sources.Checkout, per_class: int) -> pd.DataFrame:
    """Each class's first `per_class` checked seeds (static shape mode: the test replayed is the static one) in
    the checkout's real export test, skip lifted, and narrowed to the outputs its answer keeps where it keeps
    some, beside the workbook's own pass/fail of each."""
    seeds = result.seeds[result.seeds.shape_mode == "static"].sort_values(["model", "seed"])
    chosen = seeds.groupby("model", sort=False).head(per_class)
    keep = {v.model: tuple(v.compare) for v in result.verdicts if v.compare}
    return real_test.agreement(str(checkout), chosen, keep=keep) if len(chosen) else pd.DataFrame()
