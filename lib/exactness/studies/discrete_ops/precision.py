"""Each class under another runner's precision: eager float32 against eager as the pair's other side computes
(TF32, bf16 or fp16, emulated on this CPU), seed by seed, every discrete choice and every output.

An exact tie stays a tie in any precision (both sides see the same inputs up to rounding; a tie flips only when the
rounding separates it); near-ties multiply, because the other side's noise is the precision's. A seed's outputs
are judged by the export test's rule (the same replica the ORT comparison uses); a failure is explained by a flipped
choice, or by the precision's noise in the outputs themselves, which each side's error from a float64 forward (in
its own roundoff units) tells from a defect.
"""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import torch

from exactness.compare.export_rule import export_test_rule
from exactness.engine.pairs import PairEvidence
from exactness.models import sources
from exactness.runtimes import discrete_recorder
from exactness.runtimes.eager_capture import EXPORT_TEST_FORWARD_SEED
from exactness.runtimes.sides import Pair
from exactness.studies.discrete_ops.check import flatten_outputs, own_choices
from exactness.workbook import sweep

COLUMNS = ["model", "pair", "seed", "choices", "flipped_choices", "first_flip", "test_rule_passed",
           "first_failing_output", "max_abs_diff", "reference_error_units", "other_error_units", "error"]


def _choices(records) -> dict[tuple[str, int], np.ndarray]:
    out = {}
    for r in records:
        value = r.output[1] if isinstance(r.output, (tuple, list)) else r.output
        if isinstance(value, torch.Tensor):
            out[(r.op, r.call)] = value.numpy()
    return out


def _error_units(values: dict, exact: dict, unit_roundoff: float) -> float:
    worst = 0.0
    for name, reference in exact.items():
        if name not in values or not reference.is_floating_point() or not reference.numel():
            continue
        scale = float(reference.pow(2).mean().sqrt()) or 1.0
        difference = float((values[name].double() - reference).abs().max())
        worst = max(worst, difference / (unit_roundoff * scale))
    return worst


def compare_seed(model: str, pair: Pair, seed: int, checkout: str = "", atol: float = 1e-3,
                 rtol: float = 1e-3) -> dict:
    made = sources.make(model, seed, transformers_tests=checkout)
    sides = []
    for side in (pair.reference, pair.other):
        with side.applied():
            raw, records = discrete_recorder.record(made.model, made.inputs, seed=EXPORT_TEST_FORWARD_SEED)
        sides.append((flatten_outputs(raw), _choices(records), records))
    (expected, chosen, records_a), (actual, other_chosen, records_b) = sides
    if not expected:
        raise ValueError(f"the model returns no tensor to compare ({type(raw).__name__})")
    flipped = [key for key, value in chosen.items()
               if key in other_chosen and (value.shape != other_chosen[key].shape
                                           or not np.array_equal(value, other_chosen[key]))]
    actual32 = {k: v.float() if v.is_floating_point() else v for k, v in actual.items()}
    rule = export_test_rule(actual32, expected, atol=atol, rtol=rtol)
    # each side against float64 run with that side's own choices forced: a flip is the choice's doing, not noise
    wide_model = copy.deepcopy(made.model).double()
    wide_inputs = {k: v.double() if v.is_floating_point() else v for k, v in made.inputs.items()}
    exact_a, exact_b = (flatten_outputs(discrete_recorder.record(wide_model, wide_inputs, force=own_choices(records),
                                                                 seed=EXPORT_TEST_FORWARD_SEED)[0])
                        for records in (records_a, records_b))
    floats = [k for k in expected if expected[k].is_floating_point() and k in actual32]
    return {"model": model, "pair": pair.spec, "seed": int(seed), "choices": len(chosen),
            "flipped_choices": len(flipped), "first_flip": f"{flipped[0][0]} #{flipped[0][1]}" if flipped else "",
            "test_rule_passed": bool(rule.passed), "first_failing_output": rule.first_mismatch or "",
            "max_abs_diff": max((float((actual32[k] - expected[k]).abs().max()) for k in floats
                                 if actual32[k].shape == expected[k].shape), default=0.0),
            "reference_error_units": _error_units(expected, exact_a, pair.reference.precision.unit_roundoff),
            "other_error_units": _error_units(actual32, exact_b, pair.other.precision.unit_roundoff), "error": ""}


class _Chunk:
    def __init__(self, model: str, pair_spec: str, checkout: str, atol: float, rtol: float):
        self.model, self.pair_spec, self.checkout, self.atol, self.rtol = model, pair_spec, checkout, atol, rtol

    def __call__(self, seeds) -> pd.DataFrame:
        pair = Pair.parse(self.pair_spec)
        rows = []
        for seed in seeds:
            try:
                rows.append(compare_seed(self.model, pair, int(seed), self.checkout, self.atol, self.rtol))
            except Exception as error:  # a class that cannot run in this precision: its line says why
                rows.append({"model": self.model, "pair": self.pair_spec, "seed": int(seed),
                             "error": f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"})
                break
        return pd.DataFrame(rows, columns=COLUMNS)


def compare_pairs(models, pairs: list[Pair], seed_start: int, n_seeds: int, *, checkout: str = "",
                  atol: float = 1e-3, rtol: float = 1e-3, workers: int = 1, scheduler: str = "", shards=None,
                  progress_every: float = 10.0) -> pd.DataFrame:
    seeds = list(range(seed_start, seed_start + n_seeds))
    parts = [sweep.map_chunks(_Chunk(model, pair.spec, checkout, atol, rtol), seeds, workers, 10,
                              f"{pair.other.label}: {model}", progress_every, scheduler, shards)
             for pair in pairs for model in models]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=COLUMNS)


def summarize(table: pd.DataFrame) -> list[PairEvidence]:
    found = []
    for (model, pair), group in table.groupby(["model", "pair"], sort=False):
        ran = group[group.error.fillna("") == ""]
        failed = ~ran.test_rule_passed.astype(bool)
        flipped = ran.flipped_choices > 0
        errors = group.error.fillna("")
        found.append(PairEvidence(model, pair, len(ran), int(flipped.sum()), int(failed.sum()),
                                    int((failed & ~flipped).sum()), float(ran.reference_error_units.max()),
                                    float(ran.other_error_units.max()), next((e for e in errors if e), "")))
    return found


