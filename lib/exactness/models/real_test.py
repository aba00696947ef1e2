"""A checkout's real export test on one class and seed, seeded as this workbook seeds it, to confirm a verdict
where transformers decides it: `replay` runs pytest on the class's tester file in a fresh process, with
`RUN_SLOW=1` (the export tests are slow tests) and `exactness.models.replay_plugin` loaded, and reads back the
test's outcome; `agreement` sets each replayed seed beside the workbook's own pass/fail of the export test.

Only the checkout and this package run: the request travels as data in the environment, the outcome comes back as
JSON lines in a temporary file outside any run folder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

import pandas as pd

from exactness.models import checkout_index, replay_plugin
from exactness.models.checkout_index import CheckoutError

DEFAULT_TEST = "test_onnx_export_static"


class Outcome(Enum):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"  # every test case of the file skipped it (a GPU, a package, another class)
    ERROR = "did not run"  # collection or import failed: `line` says why


@dataclass(frozen=True)
class Replay:
    model: str
    seed: int
    lifted: bool  # the class's comparison skip removed
    kept: tuple[str, ...]  # the comparison narrowed to these outputs (empty: every output)
    outcome: Outcome
    line: str  # the failure's or skip's own line

    def words(self) -> str:
        how = ["skip lifted" if self.lifted else "skip kept"]
        if self.kept:
            how.append(f"comparing only {', '.join(self.kept)}")
        said = f": {self.line}" if self.line and self.outcome is not Outcome.PASSED else ""
        return f"the real test {self.outcome.value} ({'; '.join(how)}){said}"


def tester_file(root: Path, model: str) -> Path:
    paths = checkout_index.testers_of(root, model)
    if not paths:
        raise CheckoutError(f"{model} is in no all_model_classes of {root / checkout_index.MODELS}/*/"
                            "test_modeling_*.py: the replay runs the class's own tester file (put its tester there)")
    return paths[0]


def replay(checkout: str, model: str, seed: int, *, lift: bool = True, keep: Iterable[str] = (),
           left_out: Iterable[str] = (), plant: tuple[str, float, int] | None = None, test: str = DEFAULT_TEST,
           timeout: float = 900.0) -> Replay:
    """The checkout's `test` for `model` on `seed` (see `exactness.models.replay_plugin`): `left_out` adds
    outputs to the test's own left-out set, `plant` (output, factor, elements; 0: all) plants a defect."""
    root = checkout_index.root_of(str(checkout))
    path = tester_file(root, model)
    kept = tuple(keep)
    with tempfile.TemporaryDirectory(prefix="exactness-replay-") as folder:
        out = Path(folder) / "outcome.jsonl"
        request = {"model": model, "seed": int(seed), "lift": lift, "keep": list(kept), "out": str(out),
                   "left_out": list(left_out),
                   "plant": {"output": plant[0], "factor": plant[1], "elements": plant[2]} if plant else None}
        env = {**os.environ, "RUN_SLOW": "1", replay_plugin.REQUEST: json.dumps(request)}
        command = [sys.executable, "-m", "pytest", str(path), "-k", test, "-p", replay_plugin.__name__, "-q",
                   "-p", "no:cacheprovider", "--rootdir", str(root),
                   "-o", "addopts=", "--no-header"]
        try:
            ran = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return Replay(model, seed, lift, kept, Outcome.ERROR, f"pytest ran past {timeout:.0f} s")
        lines = [json.loads(x) for x in out.read_text().splitlines()] if out.exists() else []
    if not lines:
        said = [x for x in (ran.stdout + ran.stderr).splitlines() if x.strip()]
        why = next((x.strip() for x in said if x.lstrip().startswith("E ")), said[-1] if said else "no output")
        return Replay(model, seed, lift, kept, Outcome.ERROR,
                      f"no {test} ran in {path.relative_to(root)} (exit {ran.returncode}): {why[:300]}")
    outcomes = [x["outcome"] for x in lines]
    if "failed" in outcomes:
        first = next(x for x in lines if x["outcome"] == "failed")
        return Replay(model, seed, lift, kept, Outcome.FAILED, first["line"])
    if "passed" in outcomes:
        return Replay(model, seed, lift, kept, Outcome.PASSED, "")
    return Replay(model, seed, lift, kept, Outcome.SKIPPED, lines[0]["line"])


def agreement(checkout: str, workbook: pd.DataFrame, *, keep: dict[str, tuple[str, ...]] | None = None,
              test: str = DEFAULT_TEST) -> pd.DataFrame:
    """Each (model, seed) of `workbook` (columns model, seed, test_rule_passed: the workbook's pass/fail of the
    export test there) replayed in the real test, skip lifted; `keep`: per class, the outputs an answer keeps,
    replayed narrowed to them as well."""
    rows = []
    for model, seed, passed in workbook[["model", "seed", "test_rule_passed"]].drop_duplicates().itertuples(
            index=False):
        real = replay(checkout, model, int(seed), test=test)
        row = {"class": model, "seed": int(seed), "workbook": "passed" if passed else "failed",
               "real test": real.outcome.value, "agree": real.outcome.value == ("passed" if passed else "failed"),
               "real test's line": real.line}
        if keep and keep.get(model):
            narrowed = replay(checkout, model, int(seed), keep=keep[model], test=test)
            row["real test, outputs kept"] = narrowed.outcome.value
        rows.append(row)
    return pd.DataFrame(rows)
