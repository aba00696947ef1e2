"""The near-tie study end to end: validate, screen, check candidates, replay, inject defects.

Every function returns pandas tables; the notebook only calls these and draws.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from exactness import reference, sweep
from exactness.models import wav2vec2_family as family
from exactness.runtimes.graph_pool import SHAPE_MODES, GraphPool
from exactness.studies import near_tie_check as check


class StudyParameterError(ValueError):
    pass


def validate(models, n_seeds: int, threshold: float, shape_modes, workers: int) -> None:
    problems = [f"unknown model {m!r} (known: {', '.join(family.MODELS)})" for m in models if m not in family.MODELS]
    problems += [f"unknown shape mode {m!r} (use {', '.join(SHAPE_MODES)})" for m in shape_modes
                 if m not in SHAPE_MODES]
    if n_seeds < 1:
        problems.append(f"n_seeds must be at least 1, got {n_seeds}")
    if not threshold > 0:
        problems.append(f"threshold must be positive, got {threshold}")
    if workers < 0:
        problems.append(f"workers must be 0 (all cores) or more, got {workers}")
    if not models or not shape_modes:
        problems.append("models and shape_modes must not be empty")
    if problems:
        raise StudyParameterError("; ".join(problems))


@dataclass
class Checks:
    checks: pd.DataFrame
    outputs: pd.DataFrame
    tensors: pd.DataFrame
    deltas: dict[str, np.ndarray]
    pools: dict = field(default_factory=dict)

    def graphs(self) -> pd.DataFrame:
        return pd.DataFrame([{"model": m, "shape_mode": s, "exports": p.exports, "export_seconds": p.export_seconds,
                              "weight_swap": p.swap_status} for (m, s), p in self.pools.items()])


def run_checks(screen: pd.DataFrame, threshold: float, shape_modes, max_checks: int = 0, atol: float = 1e-3,
               rtol: float = 1e-3, progress_every: float = 10.0, full_tensor_checks: int = 20) -> Checks:
    """Check every seed below `threshold` (the smallest gaps first when `max_checks` caps them). The first
    `full_tensor_checks` seeds of each model and mode compare every intermediate; the rest the named three."""
    candidates = screen[screen.min_gap < threshold].sort_values(["model", "min_gap", "seed"])
    rows, outputs, tensors, deltas, pools = [], [], [], {}, {}
    for model, group in candidates.groupby("model", sort=True):
        seeds = group.seed.tolist()[: max_checks or None]
        for mode in shape_modes:
            pool = pools.setdefault((model, mode), GraphPool(model, mode))
            progress = sweep.Progress(len(seeds), f"check {model} {mode}", progress_every)
            for number, seed in enumerate(sorted(seeds)):
                result = check.check_seed(pool, int(seed), atol, rtol, all_tensors=number < full_tensor_checks)
                rows.append(result.row)
                outputs.append(result.outputs)
                tensors.append(result.tensors)
                if mode == shape_modes[0]:
                    deltas.setdefault(model, []).append(result.extra["delta"].numpy())
                progress.advance(1)
    frame = pd.DataFrame(rows)
    return Checks(frame, _concat(outputs), _concat(tensors), {m: np.concatenate(d) for m, d in deltas.items()}, pools)


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    frames = [f for f in frames if len(f)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def noise_bound(checks: pd.DataFrame) -> float:
    """Two ORT runs of the same logits differ by at most twice the largest logit difference: a flip of a
    row whose eager gap exceeds this cannot be rounding noise."""
    return 2.0 * float(checks.logit_noise.max()) if len(checks) else float("nan")


def tie_aware(checks: pd.DataFrame, bound: float) -> pd.Series:
    return checks.aligned_ok & (checks.max_flip_margin <= bound)


def noise_in_context(tensors: pd.DataFrame, checks: pd.DataFrame) -> pd.DataFrame:
    """Median over checked seeds of each named tensor's max abs diff, failing and passing seeds apart,
    beside the seed's figures (seed 000, section 3)."""
    if not len(tensors):
        return pd.DataFrame()
    verdict = checks.set_index(["model", "seed", "shape_mode"]).test_rule_passed
    named = tensors[tensors.label != ""].join(verdict, on=["model", "seed", "shape_mode"])
    named["seeds"] = np.where(named.test_rule_passed, "passing", "failing")
    table = named.pivot_table(index=["model", "label"], columns="seeds", values="max_abs_diff", aggfunc="median")
    seed_key = {"conv_features": "noise_conv_features", "extract_features": "noise_extract_features",
                "logits": "noise_logits"}
    table["seed_000_median"] = [reference.value(seed_key[label]) for _, label in table.index]
    return table.reset_index()


def tolerance(checks: pd.DataFrame) -> pd.DataFrame:
    """The rtol each observed flip needed, and the rtol one flip of the smallest-gap row would need."""
    flipped = checks[checks.n_flipped_rows > 0]
    return pd.DataFrame([{
        "model": model,
        "observed_flips": int((flipped.model == model).sum()),
        "rtol_observed_max": float(flipped[flipped.model == model].needed_rtol.max()) if (flipped.model == model).any()
        else float("nan"),
        "rtol_one_flip_median": float(group.flip_needed_rtol.median()),
        "rtol_one_flip_worst": float(group.flip_needed_rtol.max()),
    } for model, group in checks.groupby("model")])


def replay(seeds, models, shape_modes, atol: float = 1e-3, rtol: float = 1e-3) -> pd.DataFrame:
    """Rebuild each seed, export it fresh (no swapping), and run it through the export test's rule and
    through the `onnx.exactness` skip semantics (names checked, values not compared)."""
    rows = []
    for model in models:
        for mode in shape_modes:
            for seed in seeds:
                pool = GraphPool(model, mode, swap=False)
                result = check.check_seed(pool, int(seed), atol, rtol).row
                rows.append({k: result[k] for k in ("model", "seed", "shape_mode", "n_flipped_rows", "perplexity_eager",
                                                    "perplexity_ort", "test_rule_passed", "first_failing_output",
                                                    "skip_rule_passed")})
    return pd.DataFrame(rows)


def defects(pools: dict, seeds_by_model: dict[str, list[int]], bound: float, atol: float = 1e-3,
            rtol: float = 1e-3) -> pd.DataFrame:
    """Each defect injected into the graph of each model: does the tie-aware comparison catch it, and
    does the export test's rule? Without a learnt swap, defects go into the one fresh graph, on its seed."""
    from exactness.runtimes.defects import DEFECTS

    rows = []
    for (model, mode), pool in pools.items():
        seeds = seeds_by_model.get(model, []) if pool.plan is not None else [pool.template_seed]
        for seed in seeds:
            built = family.build_model(model, int(seed)) if pool.plan is not None else pool.template[1]
            for kind in DEFECTS:
                defect = {"kind": kind, **(_confident_flip(model, int(seed), bound) if kind == "biased_code" else {})}
                row = check.check_seed(pool, int(seed), atol, rtol, defect=defect, built=built).row
                caught = not (row["aligned_ok"] and row["max_flip_margin"] <= bound)
                rows.append({"model": model, "shape_mode": mode, "seed": seed, "defect": row["defect"], "kind": kind,
                             "caught_by_tie_aware": caught, "caught_by_test_rule": not row["test_rule_passed"],
                             "n_flipped_rows": row["n_flipped_rows"], "aligned_failing": row["aligned_failing"],
                             "max_output_diff": max(v for k, v in row.items() if k.startswith("max_abs_diff_"))})
    return pd.DataFrame(rows)


def _confident_flip(model: str, seed: int, bound: float) -> dict:
    """The runner-up code of the row eager was least sure about among those it was sure about (gap above
    ten noise bounds), raised just enough to win: a flip that is not a tie. The bias holds every group's
    codes one after the other, so the row's group picks the slice."""
    from exactness.compare.near_tie import top_two
    from exactness.models.quantizer_logits import plain_logits

    gaps = top_two(plain_logits(model, seed))
    confident = (gaps.gap > 10 * bound).nonzero().flatten()
    row = int(confident[gaps.gap[confident].argmin()])
    config = family.tester_config(model)
    group = row % config.num_codevector_groups
    code = group * config.num_codevectors_per_group + int(gaps.top2_index[row])
    return {"code": code, "amount": float(gaps.gap[row]) * 1.5 + 1e-6}
