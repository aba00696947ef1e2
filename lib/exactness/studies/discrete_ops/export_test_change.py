"""What a run's answers change in the checkout's export test, as a patch, and that change replayed in the real
test: on the checked seeds it passes, and with a defect planted in each compared output it fails.

A class changes only where the checkout skips its comparison and every shape mode's verdict makes the same edit:
"nothing reaches" removes the skip; an exact tie or near-tie whose comparison was verified on every checked seed
leaves the outputs it excludes out (`models.export_test_patch`). The edit is decided on the verdicts' causes and
outputs; the patch's comment, the proof, is worded once the edit is (`verdict_words.patch_reason`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from exactness.engine import verdict_words
from exactness.engine.verdicts import Cause
from exactness.models import checkout_index, export_test_patch, real_test, sources
from exactness.models.export_test_patch import Change, Edit

PLANT_FACTOR = 100.0  # the defects planted in the replay, in tolerances at each moved element
# (column, elements moved; 0: every element): a few elements, which the test's 5% allowance may forgive in a large
# output, and the whole output
PLANTS = (("3 elements off", 3), ("every element off", 0))


def _edit(verdict) -> tuple[Edit, tuple[str, ...]] | None:
    """The edit a verdict asks of the export test, and the outputs it leaves out (None: no edit)."""
    if verdict.cause is Cause.NOTHING_REACHES:
        return Edit.REMOVE_SKIP, ()
    if verdict.cause in (Cause.EXACT_TIE, Cause.NEAR_TIE) and verdict.exclude and verdict.verification.holds:
        return Edit.LEAVE_OUT, tuple(verdict.exclude)
    return None


def changes(verdicts, checkout: str | sources.Checkout) -> list[Change]:
    """One change per class the checkout skips, where all its shape modes' verdicts ask for the same edit."""
    skipped = {s.model for s in checkout_index.comparison_skips(checkout_index.root_of(str(checkout)))}
    by_class: dict[str, list] = {}
    for verdict in verdicts:
        if verdict.model in skipped:
            by_class.setdefault(verdict.model, []).append(verdict)
    found = []
    for model, mine in by_class.items():
        edits = {_edit(verdict) for verdict in mine}
        if len(edits) == 1 and None not in edits:
            (edit, outputs), = edits
            found.append(Change(model, edit, verdict_words.patch_reason(mine), outputs))
    return found


@dataclass(frozen=True)
class Written:
    """The changes a run's answers make to the checkout's export test, and the patch file (None: nothing changes)."""

    made: list[Change]
    notes: tuple[str, ...]  # changes the patch could not make, and why
    path: Path | None


def write_patch(verdicts, checkout: str | sources.Checkout, artifacts) -> Written:
    """The patch, written to the run's patches/test_export.patch where it changes anything."""
    made = changes(verdicts, checkout)
    patch = export_test_patch.patch(checkout_index.root_of(str(checkout)), made)
    path = artifacts.patch("test_export", patch.text(made)) if patch.diff else None
    return Written(made, tuple(patch.notes), path)


@dataclass(frozen=True)
class PatchedReplay:
    """Each replayed seed of a class the patch changes: the patched real test's outcome, and the plants it caught."""

    changed: bool  # the patch changes some class
    table: pd.DataFrame


def replay_patched(result, checkout: str | sources.Checkout, per_class: int) -> PatchedReplay:
    """Each class the patch changes, its first `per_class` checked seeds in the real test as the patch leaves it
    (skip removed, outputs left out in memory), then with each of `PLANTS` planted in each compared output. A change
    the patch could not make (`write_patch` names it) is not replayed: the test it would replay is not the patched
    one."""
    root = checkout_index.root_of(str(checkout))
    made = {c.model: c for c in export_test_patch.patch(root, changes(result.verdicts, checkout)).made}
    if not made:
        return PatchedReplay(False, pd.DataFrame())
    seeds = result.seeds[(result.seeds.shape_mode == "static") & result.seeds.model.isin(list(made))]
    compared = result.outputs.groupby("model").output.unique().to_dict() if len(result.outputs) else {}
    rows = []
    for model, group in seeds.sort_values(["model", "seed"]).groupby("model", sort=False):
        change = made[model]
        kept = [o for o in compared.get(model, []) if o not in change.outputs]
        for seed in group.seed.astype(int).head(per_class):
            plain = real_test.replay(str(checkout), model, seed, left_out=change.outputs)
            row = {"class": model, "seed": seed, "patched test": plain.outcome.value}
            for column, elements in PLANTS:
                caught = [o for o in kept if real_test.replay(
                    str(checkout), model, seed, left_out=change.outputs,
                    plant=(o, PLANT_FACTOR, elements)).outcome is real_test.Outcome.FAILED]
                row[f"caught: {column}"] = f"{len(caught)} of {len(kept)}"
            rows.append(row)
    return PatchedReplay(True, pd.DataFrame(rows))
