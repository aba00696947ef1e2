"""The discrete-ops study end to end: for any registered transformers class, which discrete ops of its
exported graph reach which outputs, how close they come to ties, how often ORT chooses differently from
eager, and whether forcing ORT's choices on eager explains every mismatch.

Each (class, shape mode) is one task on the workers: export the first two seeds (the second proves the
learnt weight swap), then check every seed on swapped weights. A class whose swap cannot be learnt checks
at most `max_fresh_exports` seeds, each exported fresh (the cost is in the graphs table). A class whose
export fails is a row with the exporter's error.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pandas as pd

from exactness.models import tiny_subjects
from exactness.workbook import study_rules, sweep

STUDY = "discrete_ops"


def validate(models, n_seeds: int, seed_start: int, shape_modes, workers: int) -> None:
    """Every model must have a tiny config (the error says how to add one); then the study's declared rules."""
    for name in models:
        tiny_subjects.subject(name)
    study_rules.check(STUDY, {"models": list(models), "n_seeds": n_seeds, "seed_start": seed_start,
                              "shape_modes": list(shape_modes), "workers": workers})


@dataclass
class Tables:
    graphs: pd.DataFrame  # one row per (class, shape mode): exports, cost, swap, error
    ops: pd.DataFrame  # one row per discrete op of each graph
    margins: pd.DataFrame  # one row per (class, mode, seed, op)
    outputs: pd.DataFrame  # one row per (class, mode, seed, output): eager against ORT, plain and forced
    seeds: pd.DataFrame  # one row per (class, mode, seed)


def _ops_rows(cg) -> list[dict]:
    return [{"model": cg.model, "shape_mode": cg.shape_mode, "node": op.node, "op_type": op.op_type,
             "category": op.category, "scope": op.scope, "aten": op.aten, "consumers": op.consumers,
             "reaches_outputs": op.reaches_outputs, "on_output_path": op.on_output_path,
             "weight_dependent": op.weight_dependent, "can_flip": op.can_flip, "not_counted": op.not_counted}
            for op in cg.ops]


class _ClassTask:
    """Picklable `["model/mode", ...] -> [tables]`: one class and shape mode per key, all its seeds."""

    def __init__(self, seeds: list[int], max_fresh_exports: int):
        self.seeds, self.max_fresh_exports = seeds, max_fresh_exports

    def __call__(self, keys) -> list[dict]:
        from exactness.studies.discrete_ops import check

        out = []
        for key in keys:
            model, mode = key.split("/")
            began = time.monotonic()
            graph_row = {"model": model, "shape_mode": mode, "error": ""}
            try:
                cg = check.prepare(model, mode, self.seeds[:2])
            except Exception as error:  # a class that does not export is a row, not a crash
                text = " ".join(str(error).split())
                graph_row.update(error=f"{type(error).__name__}: {text[:400]}", seconds=time.monotonic() - began)
                out.append({"graphs": [graph_row], "ops": [], "margins": [], "outputs": [], "seeds": []})
                continue
            seeds = self.seeds if cg.plan is not None else self.seeds[:max(1, self.max_fresh_exports)]
            margins, outputs, rows = [], [], []
            for seed in seeds:
                result = check.check_seed(cg, seed)
                margins += result["margins"]
                outputs += result["outputs"]
                rows.append(result["seed"])
            fresh = [r["seconds"] for r in rows if r["fresh_export"]]
            graph_row.update(cg.status, exposure_ok=cg.exposure_ok, discrete_ops=len(cg.ops), seeds=len(seeds),
                             seeds_asked=len(self.seeds), outputs=len(cg.outputs),
                             fresh_export_seconds=sum(fresh), seconds=time.monotonic() - began)
            out.append({"graphs": [graph_row], "ops": _ops_rows(cg), "margins": margins, "outputs": outputs,
                        "seeds": rows})
        return out


def _tables(parts: list[list[dict]]) -> Tables:
    flat = [item for part in parts for item in part]
    return Tables(*(pd.DataFrame([row for item in flat for row in item[name]])
                    for name in ("graphs", "ops", "margins", "outputs", "seeds")))


def run(models, seed_start: int, n_seeds: int, shape_modes, workers: int = 1, scheduler: str = "", shards=None,
        max_fresh_exports: int = 5, progress_every: float = 10.0) -> Tables:
    """Every (class, shape mode) as one task, on `workers` processes or the Dask cluster at `scheduler`;
    each finished task is kept in `shards` (resume computes only the missing ones)."""
    seeds = list(range(seed_start, seed_start + n_seeds))
    keys = [f"{model}/{mode}" for model in models for mode in shape_modes]
    parts = sweep.map_chunks(_ClassTask(seeds, max_fresh_exports), keys, workers, 1, "discrete ops",
                             progress_every, scheduler, shards, combine=lambda results: results)
    return _tables(parts)
