"""How far eager PyTorch and ONNX Runtime differ, tensor by tensor, and where the noise comes from.

One export per model (reused for every draw by weight swapping); every module output the graph exposes
is compared, in absolute terms, in ulps and relative to the tensor's RMS.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from scipy import stats

from exactness.compare.intermediates import intermediate_table
from exactness.compare.scale import worst_elements
from exactness.models import tensor_subjects
from exactness.runtimes import eager_capture, onnx_graph
from exactness.runtimes.graph_pool import GraphPool
from exactness.workbook import sweep

OPTIMIZATION_LEVELS = ("disabled", "basic", "extended", "all")
NOISE_COLUMNS = ["seed", "tensor", "label", "depth", "max_abs_diff", "max_ulp", "p99_ulp", "median_ulp", "rel_rms"]
# which elements carry the worst ulp counts, and whether a row is one of the model's outputs (an alias of a module
# output, left out of the growth per module): after the original columns
ELEMENT_COLUMNS = ["worst_of_rms", "top_ulps_below_rms", "model_output", "input_module"]


class NoisePool(GraphPool):
    """A graph pool that also knows where its model comes from: the transformers checkout whose tester builds it
    ("" for the study's own subjects, the registry and your builders); it travels to worker processes with the
    pool, and each worker builds its seeds from it."""

    def __init__(self, model: str, shape_mode: str, transformers_tests: str = "", **options):
        super().__init__(model, shape_mode, **options)
        self.transformers_tests = transformers_tests


def noise_pool(model: str, shape_mode: str, transformers_tests: str = "") -> NoisePool:
    """The study's exports. Exposing every module's output as a graph output can keep ORT from fusing nodes
    and move the model's own outputs by an ulp (measured: `projected_states` of Wav2Vec2 and UniSpeech), so
    the outputs are read from a run of the graph as exported, and the intermediates from a second run that
    exposes them all."""
    tensor_subjects.check(model, transformers_tests)
    return NoisePool(model, shape_mode, transformers_tests, exposed=frozenset())


@dataclass
class _Draw:
    built: torch.nn.Module
    inputs: dict
    eager: eager_capture.EagerRun
    everything: onnx_graph.OrtRunner  # every module's output exposed
    bare: onnx_graph.OrtRunner  # the graph as exported: the outputs the export test sees


def _draw(pool: GraphPool, seed: int, threads: int | None = None, eager_run=eager_capture.run,
          **ort_options) -> _Draw:
    """`eager_run(built, inputs)`: the eager side (on the CPU with `threads` torch threads by default)."""
    made = tensor_subjects.make(pool.model, seed, getattr(pool, "transformers_tests", ""))
    built, inputs = made.model, made.inputs
    previous = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        eager = eager_run(built, inputs)
    finally:
        torch.set_num_threads(previous)
    everything, _ = pool.runner(seed, built, inputs, **ort_options)
    bare = pool.runner(seed, built, inputs, all_values=False, **ort_options)[0] if pool.exposed is not None \
        else everything
    return _Draw(built, inputs, eager, everything, bare)


def _table(name: str, draw: _Draw, produced: dict | None = None, final: dict | None = None) -> pd.DataFrame:
    """Every module's output (`produced`: the exposing run's values, when already made), then the model's
    outputs from the graph as exported (`final`: that run's values, when already made)."""
    graph = draw.everything.graph
    produced = produced if produced is not None else draw.everything.run(draw.inputs)
    named = tensor_subjects.named_tensors(name, draw.built)
    table = intermediate_table(draw.eager.modules, produced, graph.intermediates, named, extra=worst_elements)
    outputs = {name: name for name in graph.outputs if name in draw.eager.outputs}  # the model's outputs come last
    last = {name: [draw.eager.outputs[name]] for name in outputs}
    # a model with no tensors of its own to name (your builder, a registered class) is named by its outputs
    final = final if final is not None else draw.bare.run(draw.inputs)
    finals = intermediate_table(last, final, outputs, None if named else outputs,
                                extra=worst_elements).assign(
        depth=lambda f: f.depth + len(graph.intermediates), model_output=True)
    input_of = draw.eager.input_of or {}
    table = table.assign(model_output=False, input_module=[input_of.get(t, "") for t in table.tensor]) \
        if len(table) else table
    return pd.concat([table, finals.assign(input_module="")], ignore_index=True)


class _NoiseChunk:
    """Picklable `seeds -> noise rows` for worker processes: the pool travels with its learnt swap plan,
    so workers never export. Eager and ORT both run on one thread, wherever the chunk runs, so the table does
    not depend on the number of workers (the settings table measures what thread counts change)."""

    def __init__(self, pool: GraphPool):
        self.pool = pool

    def __call__(self, seeds) -> pd.DataFrame:
        frames = []
        for seed in seeds:
            draw = _draw(self.pool, int(seed), intra_op_threads=1)
            frames.append(_table(self.pool.model, draw).assign(seed=int(seed)))
        return pd.concat(frames, ignore_index=True)[NOISE_COLUMNS + ["numel"] + ELEMENT_COLUMNS]


def noise_draws(pool: GraphPool, seeds, workers: int = 1, progress_every: float = 10.0) -> pd.DataFrame:
    """One row per draw and tensor: the table `tables/noise.parquet` holds. The first two draws export
    (and learn the weight swap) here; the rest run on `workers` processes."""
    seeds = [int(s) for s in seeds]
    warm = seeds[:2] if pool.plan is None else []
    first = sweep.map_chunks(_NoiseChunk(pool), warm, 1, 2, f"noise {pool.model} (exports)", progress_every)
    rest = sweep.map_chunks(_NoiseChunk(pool), seeds[len(warm):], workers if pool.plan is not None else 1, 25,
                            f"noise {pool.model}", progress_every)
    return pd.concat([first, rest], ignore_index=True)


def seed_medians(noise: pd.DataFrame) -> pd.DataFrame:
    from exactness import published

    keys = {"conv_features": "noise_conv_features", "extract_features": "noise_extract_features",
            "logits": "noise_logits"}
    named = noise[noise.label.isin(keys)]
    ours = named.groupby("label").max_abs_diff.median()
    return pd.DataFrame({"tensor": list(keys), "ours_median_max_abs_diff": [ours.get(k, float("nan")) for k in keys],
                         "seed_000_median": [published.value(v) for v in keys.values()],
                         "ours_median_ulp": [named[named.label == k].median_ulp.median() for k in keys]})


def depth_profile(noise: pd.DataFrame) -> pd.DataFrame:
    profile = noise.groupby(["depth", "tensor"], as_index=False).agg(
        max_abs_diff=("max_abs_diff", "median"), median_ulp=("median_ulp", "median"), p99_ulp=("p99_ulp", "median"),
        rel_rms=("rel_rms", "median")).sort_values("depth")
    # no growth from an exact (0) previous output: a factor from nothing is no figure, left empty (NaN), never ∞
    previous = profile.max_abs_diff.shift(1)
    profile["growth"] = profile.max_abs_diff / previous.where(previous > 0)
    return profile.reset_index(drop=True)


def float64_reference(pool: GraphPool, seeds) -> pd.DataFrame:
    """Per tensor, which side is closer to a float64 eager run of the same weights: eager float32 or ORT. Every
    module's output, then the model's own outputs (`<name> (model output)`: what the forward computes outside any
    module, a random draw in it, shows only there)."""
    rows = []
    for seed in seeds:
        draw = _draw(pool, int(seed))
        built, inputs, eager, runner = draw.built, draw.inputs, draw.eager, draw.everything
        produced = runner.run(inputs)
        wide = copy.deepcopy(built).double()
        reference = eager_capture.run(wide, {k: v.double() if v.is_floating_point() else v for k, v in inputs.items()})
        for path, value_name in runner.graph.intermediates.items():
            if path not in eager.modules or path not in reference.modules:
                continue
            ort_value = torch.from_numpy(np.array(produced[value_name]))
            pairs = [(e, r) for e, r in zip(eager.modules[path], reference.modules[path], strict=False)
                     if tuple(e.shape) == tuple(ort_value.shape) and e.is_floating_point()]
            if not pairs:
                continue
            e, r = pairs[0]
            rows.append({"seed": int(seed), "tensor": path, "eager_vs_float64": float((e.double() - r).abs().max()),
                         "ort_vs_float64": float((ort_value.double() - r).abs().max())})
        finals = draw.bare.run(inputs) if draw.bare is not runner else produced
        for name in draw.bare.graph.outputs:
            e, r = eager.outputs.get(name), reference.outputs.get(name)
            if e is None or r is None or name not in finals or not e.is_floating_point():
                continue
            ort_value = torch.from_numpy(np.array(finals[name])).double()
            if tuple(ort_value.shape) == tuple(e.shape):
                rows.append({"seed": int(seed), "tensor": f"{name} (model output)",
                             "eager_vs_float64": float((e.double() - r).abs().max()),
                             "ort_vs_float64": float((ort_value - r).abs().max())})
    table = pd.DataFrame(rows)
    summary = table.groupby("tensor", sort=False)[["eager_vs_float64", "ort_vs_float64"]].median().reset_index()
    summary["closer"] = np.where(summary.eager_vs_float64 < summary.ort_vs_float64, "eager",
                                 np.where(summary.eager_vs_float64 > summary.ort_vs_float64, "ort", "tie"))
    return summary


EXPOSED, AS_EXPORTED = "every module output exposed", "as exported"


def settings(pool: GraphPool, seeds) -> pd.DataFrame:
    """The named tensors' noise (read from the graph exposing every module's output, where ORT cannot fuse across
    modules) and the model's outputs' (from the graph as exported, the one the export test runs, every fusion
    free) under each ORT optimisation level, ORT intra-op threads 1 and 2, and eager threads 1 and 2 (median over
    `seeds`); and whether each graph's session run twice is bit-identical."""
    rows = []
    variants = ([("ort_optimization", level, {"optimization": level}, None) for level in OPTIMIZATION_LEVELS]
                + [("ort_threads", n, {"intra_op_threads": n}, None) for n in (1, 2)]
                + [("eager_threads", n, {}, n) for n in (1, 2)])
    for kind, value, options, threads in variants:
        for seed in seeds:
            draw = _draw(pool, int(seed), threads=threads, **options)
            first, second = draw.everything.run(draw.inputs), draw.everything.run(draw.inputs)
            once, again = draw.bare.run(draw.inputs), draw.bare.run(draw.inputs)
            table = _table(pool.model, draw, first, once)
            repeatable = {EXPOSED: all(np.array_equal(first[k], second[k], equal_nan=True) for k in first),
                          AS_EXPORTED: all(np.array_equal(once[k], again[k], equal_nan=True) for k in once)}
            final = table.model_output.astype(bool) if "model_output" in table else pd.Series(False, table.index)
            for row, is_output in zip(table.itertuples(), final, strict=True):
                if not (row.label or is_output):
                    continue
                graph = AS_EXPORTED if is_output else EXPOSED
                label = row.label or f"{row.tensor} (model output)"  # a model named by its outputs keeps its names
                rows.append({"setting": kind, "value": str(value), "seed": int(seed), "label": label,
                             "graph": graph, "max_abs_diff": row.max_abs_diff, "median_ulp": row.median_ulp,
                             "run_twice_identical": repeatable[graph]})
    return pd.DataFrame(rows)


def mann_whitney(a, b) -> tuple[float, float]:
    """Two-sided Mann-Whitney U test (normal approximation with tie correction, scipy's): (U, p) over the values
    that are not NaN; NaN when a side has none, p = 1 when every value is equal."""
    from scipy.stats import mannwhitneyu

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    a, b = a[~np.isnan(a)], b[~np.isnan(b)]
    if len(a) == 0 or len(b) == 0:
        return float("nan"), float("nan")
    if np.all(np.concatenate([a, b]) == a[0]):
        return len(a) * len(b) / 2, 1.0
    result = mannwhitneyu(a, b, alternative="two-sided", method="asymptotic", use_continuity=False)
    return float(result.statistic), float(result.pvalue)


def passing_vs_failing(run_folder: Path) -> pd.DataFrame:
    """From a near-tie run: the named tensors' noise, failing against passing seeds, with a U test."""
    checks = pd.read_parquet(run_folder / "tables" / "checks.parquet")
    tensors = pd.read_parquet(run_folder / "tables" / "tensors.parquet")
    verdict = checks.set_index(["model", "seed", "shape_mode"]).test_rule_passed
    named = tensors[tensors.label != ""].join(verdict, on=["model", "seed", "shape_mode"])
    rows = []
    for (model, label), group in named.groupby(["model", "label"]):
        failing, passing = group[~group.test_rule_passed].max_abs_diff, group[group.test_rule_passed].max_abs_diff
        u, p = mann_whitney(failing, passing)
        rows.append({"model": model, "label": label, "failing_seeds": len(failing), "passing_seeds": len(passing),
                     "failing_median": failing.median(), "passing_median": passing.median(), "u": u, "p_value": p})
    return pd.DataFrame(rows)


def newest_run(outputs: Path, study: str) -> Path | None:
    """The newest passed run of `study` under `outputs`; runs whose manifest cannot be read are skipped."""
    from exactness.workbook.manifest import Manifest, ManifestError

    passed = []
    for folder in (outputs / study).glob("*"):
        try:
            manifest = Manifest.read(folder)
        except (ManifestError, OSError):
            continue
        if manifest.status == "passed":
            passed.append((manifest.started_at(), folder))  # the instant: run ids are times, not always in UTC
    return max(passed)[1] if passed else None


def cuda_draws(pool: GraphPool, seeds) -> pd.DataFrame:
    """Eager on the first CUDA device against ORT on the CPU: the same table as `noise_draws`."""
    def on_gpu(built, inputs) -> eager_capture.EagerRun:
        run = eager_capture.run(copy.deepcopy(built).cuda(), {k: v.cuda() for k, v in inputs.items()})
        return eager_capture.EagerRun({k: v.cpu() for k, v in run.outputs.items()},
                                      {k: [t.cpu() for t in v] for k, v in run.modules.items()},
                                      input_of=run.input_of)

    frames = []
    for seed in seeds:
        frames.append(_table(pool.model, _draw(pool, int(seed), eager_run=on_gpu)).assign(seed=int(seed)))
    return pd.concat(frames, ignore_index=True)[NOISE_COLUMNS + ["numel"] + ELEMENT_COLUMNS]


def settings_medians(settings: pd.DataFrame) -> pd.DataFrame:
    """Per setting, value and named tensor: medians over draws, and whether a session run twice matched."""
    return settings.groupby(["setting", "value", "label"], as_index=False).agg(
        max_abs_diff=("max_abs_diff", "median"), median_ulp=("median_ulp", "median"),
        identical=("run_twice_identical", "all"))


def median_interval(values, confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free interval of the median from order statistics: X_(j) and X_(n+1-j) for the largest j
    with P(B < j) <= (1 - confidence) / 2, B ~ Binomial(n, 1/2). With too few values it is the range."""
    x = np.sort(np.asarray(values, dtype=float))
    n = len(x)
    if n == 0:
        return float("nan"), float("nan")
    below = int(np.count_nonzero(stats.binom.cdf(np.arange(n), n, 0.5) <= (1 - confidence) / 2))
    low_rank = max(below - 1, 0)  # 0-based rank of X_(j)
    return float(x[low_rank]), float(x[n - 1 - low_rank])


# ORT's error from float64 within this many times eager float32's own: rounding of the same size, as the
# discrete-ops study bounds it
FLOAT64_FACTOR = 16.0


def beyond_rounding(closer: pd.DataFrame) -> pd.DataFrame:
    """The tensors whose ORT error from float64 exceeds FLOAT64_FACTOR times eager float32's own."""
    if not len(closer):
        return closer
    return closer[closer.ort_vs_float64 > FLOAT64_FACTOR * closer.eager_vs_float64]


def summary_values(medians: pd.DataFrame, profile: pd.DataFrame) -> dict:
    """summary.json's figures: ours beside the investigation's where it measured the same tensor."""
    measured = medians.dropna(subset=["ours_median_max_abs_diff"])
    values = {f"{r.tensor}_median_max_abs_diff": {"ours": r.ours_median_max_abs_diff, "seed": r.seed_000_median}
              for r in measured.itertuples()}
    values["max_median_ulp"] = float(profile.median_ulp.max())
    return values
