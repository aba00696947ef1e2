"""The near-tie study end to end: validate, screen, check candidates, replay, inject defects.

Every function returns pandas tables; the notebook only calls these and draws.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, fields

import numpy as np
import pandas as pd

from exactness import published
from exactness.engine import candidates as engine_candidates
from exactness.engine.rows import MarginRow, frame
from exactness.models import wav2vec2_family as family
from exactness.models.names import ClassTask
from exactness.models.seed_rebuild import Rebuilder
from exactness.runtimes import codevector_lookup, worker_state
from exactness.runtimes.graph_pool import Case, GraphPool, export_case
from exactness.runtimes.speedup_paths import BuildPath
from exactness.studies.near_tie import check, engine_tables
from exactness.studies.near_tie import rate as near_tie_rate
from exactness.studies.near_tie import row as near_tie_row
from exactness.studies.near_tie import scale as near_tie_scale
from exactness.studies.near_tie.planted import DefectTally
from exactness.studies.near_tie.row import CheckRow
from exactness.workbook import study_rules, sweep


def validate(models, n_seeds: int, threshold: float, shape_modes, workers: int, fast_paths: bool = True) -> None:
    """The study's declared rules (`exactness.workbook.study_rules`), for a notebook run by hand: the command line
    checks the same rules, with every parameter, before it creates a run folder."""
    study_rules.check("near_tie", {"models": list(models), "n_seeds": n_seeds, "threshold": threshold,
                                   "shape_modes": list(shape_modes), "workers": workers, "fast_paths": fast_paths})


@dataclass
class Checks:
    checks: pd.DataFrame
    outputs: pd.DataFrame
    tensors: pd.DataFrame
    deltas: dict[str, np.ndarray]
    deltas_ulps: dict[str, np.ndarray] = field(default_factory=dict)  # the same moves in ulps of each row's top logit
    margins: pd.DataFrame = field(default_factory=pd.DataFrame)  # per check, the argmax as the engine reads it
    pools: dict = field(default_factory=dict)
    replayed: pd.DataFrame = field(default_factory=pd.DataFrame)  # replays that came with the pools' exports

    def graphs(self) -> pd.DataFrame:
        return pd.DataFrame([{"model": m, "shape_mode": s, "exports": p.exports, "cached_exports": p.cached_exports,
                              "export_seconds": p.export_seconds,
                              "weight_swap": p.swap_status, "one_session": p.fed_status}
                             for (m, s), p in self.pools.items()])


@dataclass
class _Batch:
    """What checking some seeds of one (model, shape mode) gives; `_merge` joins batches in order."""

    rows: list[CheckRow]
    outputs: list[pd.DataFrame]
    tensors: list[pd.DataFrame]
    deltas: list[np.ndarray]
    deltas_ulps: list[np.ndarray]
    margins: list[MarginRow]


def _select(batch: _Batch, keep: list[int]) -> _Batch:
    each = (getattr(batch, f.name) for f in fields(_Batch))
    return _Batch(*([items[i] for i in keep] if items else [] for items in each))


def _merge(batches: list[_Batch]) -> _Batch:
    return _Batch(*([item for b in batches for item in getattr(b, f.name)] for f in fields(_Batch)))


@dataclass(frozen=True)
class SeedTask:
    """One seed of one class and shape mode, as a sweep item (an export, a replay). `resume_key` names it in
    the shards of a resumed run; a model id may hold '/' (a hub id), so nothing ever splits the key."""

    model: str
    shape_mode: str
    seed: int

    @property
    def resume_key(self) -> str:
        return f"{self.model}|{self.shape_mode}|{self.seed}"

    def __str__(self) -> str:  # a shard's name is made from str() of its first and last items
        return self.resume_key


class _CheckChunk:
    """Picklable `seeds -> _Batch` for worker processes; the pool travels with its learnt weight swap, so
    workers never export. ORT runs on one thread wherever the chunk runs: the table cannot depend on
    the number of workers."""

    def __init__(self, pool: GraphPool | None, *, atol: float, rtol: float, full_tensors: set, what_if: set,
                 keep_deltas: bool, fast_paths: bool = True):
        self.pool, self.atol, self.rtol = pool, atol, rtol
        self.full_tensors, self.what_if, self.keep_deltas = full_tensors, what_if, keep_deltas
        self.fast_paths = fast_paths

    def __call__(self, seeds) -> _Batch:
        # a swapped graph keeps no model: the seed's weights can go into one reused template (fast paths)
        rebuild = _rebuilder(self.pool.model) if self.fast_paths and self.pool.plan is not None else None
        batch = _Batch([], [], [], [], [], [])
        for seed in seeds:
            built = rebuild(int(seed)) if rebuild else family.build_model(self.pool.model, int(seed))
            self.check(batch, int(seed), built, BuildPath.REBUILD if rebuild else BuildPath.BUILD)
        return batch

    def check(self, batch: _Batch, seed: int, built, build_path: BuildPath) -> None:
        result = check.check_seed(self.pool, seed, atol=self.atol, rtol=self.rtol, built=built, build_path=build_path,
                                  all_tensors=seed in self.full_tensors, what_if=seed in self.what_if,
                                  session_options={"intra_op_threads": 1}, fast_paths=self.fast_paths)
        batch.rows.append(result.row)
        batch.outputs.append(result.outputs)
        batch.tensors.append(result.tensors)
        batch.margins.append(result.margin)
        if self.keep_deltas:
            batch.deltas.append(result.delta.numpy())
            batch.deltas_ulps.append(result.delta_ulps.numpy())


def _rebuilder(model: str) -> Rebuilder:
    return worker_state.current().made_by(Rebuilder, model)  # one per model class and process


def check_pool(model: str, mode: str, fast_paths: bool = True) -> GraphPool:
    """A pool as the checks use it: its plain runs expose what a check reads, and (fast paths) its one fed
    session runs the graph with the codevector product as a gather (both verified against the graph as
    exported). Without fast paths: no swap, no fed session, no rewrite: every seed its own export."""
    return GraphPool(model, mode, swap=fast_paths, exposed=family.check_exposed(model),
                     rewrite=codevector_lookup.gathered_graph if fast_paths else None)


def _case(task: SeedTask, exported: tuple | None = None) -> Case:
    """The seed's model and inputs, with `exported` (its graph, whether the export cache held it) where made."""
    graph, cached = exported or (None, False)
    return Case(task.seed, family.build_model(task.model, task.seed), family.tester_inputs(task.model, task.seed),
                graph, cached)


class _Export:
    """Picklable `[SeedTask, ...] -> [(task, (graph, cached))]`: each seed's export, through the export cache at
    `cache` (every study's one export path: a second run exports nothing) or fresh without one; each a task of its
    own so that the six exports of three pools share the workers evenly (an export is 15-40 s; a pool needs two)."""

    def __init__(self, cache: str = ""):
        self.cache = cache

    def __call__(self, tasks) -> list:
        out = []
        for task in tasks:
            case = export_case(_case(task), task.shape_mode, self.cache)
            out.append((task, (case.graph, case.cached)))
        return out


class _Warm:
    """Picklable `[ClassTask, ...] -> [(pool, _Batch)]`: each pool prepared from the fresh exports of its first
    seeds (the template, then the one the weight swap is learnt and verified on), then those seeds checked."""

    def __init__(self, first: dict[ClassTask, tuple[list[int], _CheckChunk]], exported: dict[SeedTask, object]):
        self.first, self.exported = first, exported

    def __call__(self, tasks) -> list:
        out = []
        for task in tasks:
            seeds, chunk = self.first[task]
            cases = [_case(key, self.exported[key]) for key in (SeedTask(task.model, task.shape_mode, s)
                                                                 for s in seeds)]
            chunk.pool = check_pool(task.model, task.shape_mode, chunk.fast_paths).prepare(*cases)
            batch = _Batch([], [], [], [], [], [])
            for case in cases:
                chunk.check(batch, case.seed, case.built, BuildPath.BUILD)
            out.append((chunk.pool, batch))
        return out


def _flatten(parts: list[list]) -> list:
    return [x for part in parts for x in part]


def run_checks(screen: pd.DataFrame, threshold: float, shape_modes, *, max_checks: int = 0, atol: float = 1e-3,
               rtol: float = 1e-3, progress_every: float = 10.0, full_tensor_checks: int = 20,
               what_if_checks: int = 300, workers: int = 1, scheduler: str = "", shards=None,
               chunk_size: int = 8, replay_seed: int | None = None, threshold_ulps: float = 0.0,
               fast_paths: bool = True, cache: str = "") -> Checks:
    """Check every seed below `threshold` (the smallest gaps first when `max_checks` caps them). The first
    `full_tensor_checks` seeds of each model and mode compare every intermediate, the rest the named three;
    the `what_if_checks` smallest gaps also measure what flipping their smallest-gap row would do (one more
    eager forward; larger gaps almost never flip). The exports run first, each a task of its own; then each
    pool is prepared from them (learning its weight swap) and checks its first two seeds, one pool per
    process; then the checks run in chunks on `workers` processes (or the Dask cluster at `scheduler`), saved
    to `shards` as they finish. `replay_seed`: the second fresh export of each pool (the one its weight swap is
    verified on) is this seed's, so its replay (`Checks.replayed`) costs no export of its own; it is a check
    only if it is a candidate. `threshold_ulps` > 0: the candidates are the seeds whose smallest gap in ulps of
    its row's top logit is below it instead (`near_tie_scale.is_candidate`), smallest first. `fast_paths=False`:
    every seed built plainly, exported fresh and run in its own session, both lookups the model's own. `cache`:
    the export cache's folder the pools' first exports are read from and stored in (fast paths only)."""
    by = "smallest_gap_ulps" if threshold_ulps > 0 else "min_gap"
    candidates = screen[near_tie_scale.is_candidate(screen, threshold, threshold_ulps)].sort_values(["model", by,
                                                                                                   "seed"])
    plans: dict[ClassTask, tuple[list[int], list[int], _CheckChunk]] = {}
    for model, group in candidates.groupby("model", sort=True):
        by_gap = [int(s) for s in group.seed.tolist()[: max_checks or None]]
        seeds = sorted(by_gap)
        for mode in shape_modes:
            chunk = _CheckChunk(None, atol=atol, rtol=rtol, full_tensors=set(seeds[:full_tensor_checks]),
                                what_if=set(by_gap[:what_if_checks]), keep_deltas=mode == shape_modes[0],
                                fast_paths=fast_paths)
            first = seeds[:2] if replay_seed is None or replay_seed in seeds[:1] else [seeds[0], int(replay_seed)]
            plans[ClassTask(model, mode)] = (seeds, first, chunk)
    tasks = [SeedTask(task.model, task.shape_mode, seed) for task, (_, first, _) in plans.items() for seed in first]
    exported = dict(sweep.map_chunks(_Export(cache if fast_paths else ""), tasks, workers, 1, "exports",
                                     progress_every, scheduler, shards, combine=_flatten, unit="exports"))
    warm = sweep.map_chunks(_Warm({task: (first, chunk) for task, (_, first, chunk) in plans.items()}, exported),
                            list(plans), workers, 1, "first checks", progress_every, scheduler, shards,
                            combine=_flatten, unit="graphs")
    pools, batches, deltas, deltas_ulps, replayed = {}, [], {}, {}, []
    beyond: dict[str, list[int]] = {}
    for (task, (seeds, first, chunk)), (pool, warm_batch) in zip(plans.items(), warm, strict=True):
        model, mode = task.model, task.shape_mode
        pools[(model, mode)] = chunk.pool = pool
        replayed += [_replay_record(row) for row in warm_batch.rows if row.seed == replay_seed]
        candidates_here = set(seeds)  # a replay seed is a check only if it is a candidate
        warm_batch = _select(warm_batch, [i for i, seed in enumerate(first) if seed in candidates_here])
        local = pool.plan is None  # without a swap every seed exports: keep it in this process
        checked = functools.partial(sweep.map_chunks, chunk, workers=1 if local else workers, chunk_size=chunk_size,
                                    progress_every=progress_every, scheduler="" if local else scheduler, shards=shards,
                                    combine=_merge)
        batch = _merge([warm_batch, checked([s for s in seeds if s not in first], label=f"check {model} {mode}")])
        within = f"check {model} {mode} (within reach)"
        if model not in beyond:
            # the first shape mode decides which seeds lie beyond the threshold but within the engine's reach; each
            # check may measure more noise, so the reach is taken again until no unchecked seed lies within it
            beyond[model], budget = [], (max(max_checks - len(seeds), 0) if max_checks else None)
            for _ in range(MAX_REACH_ROUNDS):
                left = None if budget is None else budget - len(beyond[model])
                more = in_reach_beyond(screen[screen.model == model], set(seeds) | set(beyond[model]),
                                       batch.margins, cap=left)
                if not more:
                    break
                beyond[model] += more
                batch = _merge([batch, checked(sorted(more), label=within)])
        elif beyond[model]:
            batch = _merge([batch, checked(sorted(beyond[model]), label=within)])
        batches.append(batch)
        if chunk.keep_deltas:
            deltas[model] = np.concatenate(batch.deltas)
            deltas_ulps[model] = np.concatenate(batch.deltas_ulps)
    joined = _merge(batches)
    return Checks(check_table(joined.rows), _concat(joined.outputs), _concat(joined.tensors), deltas, deltas_ulps,
                  frame(joined.margins, MarginRow), pools, pd.DataFrame(replayed, columns=list(_REPLAY_COLUMNS)))


MAX_REACH_ROUNDS = 4  # the reach grows with the noise each round measures; a few rounds settle it (else: said)


def in_reach_beyond(screen: pd.DataFrame, checked: set[int], margins, cap: int | None = None) -> list[int]:
    """Seeds the threshold left out whose smallest gap is within the engine's reach of a tie (in ulps of the row's
    top logit, the screen's `smallest_gap_ulps`) or whose logits are not all finite, chosen by the engine's rule
    (`engine.candidates`): rounding noise of the measured size could flip them, so they are checked too rather than
    assumed not to flip. `cap`: at most this many, the smallest gaps first."""
    if not len(screen) or "smallest_gap_ulps" not in screen:
        return []
    reach = engine_tables.class_reach(frame(margins, MarginRow))
    rows = engine_tables.screen_rows(screen, str(screen.model.iloc[0]), "", threshold=0.0, reach=reach)
    return engine_candidates.candidates(rows, reach, exclude=checked, cap=cap)


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
    """Median over checked seeds of each named tensor's max abs diff: over every checked seed (`all`), and failing
    and passing seeds apart, beside the seed's figures (transformers #50575, section 3)."""
    if not len(tensors):
        return pd.DataFrame()
    verdict = checks.set_index(["model", "seed", "shape_mode"]).test_rule_passed
    named = tensors[tensors.label != ""].join(verdict, on=["model", "seed", "shape_mode"])
    named["seeds"] = np.where(named.test_rule_passed, "passing", "failing")
    table = named.pivot_table(index=["model", "label"], columns="seeds", values="max_abs_diff", aggfunc="median")
    table = table.reindex(columns=["failing", "passing"])  # both, where every checked seed failed (or passed)
    table.insert(0, "all", named.groupby(["model", "label"]).max_abs_diff.median())
    seed_key = {"conv_features": "noise_conv_features", "extract_features": "noise_extract_features",
                "logits": "noise_logits"}
    table["seed_000_median"] = [published.value(seed_key[label]) for _, label in table.index]
    return table.reset_index()


def tolerance(checks: pd.DataFrame) -> pd.DataFrame:
    """The rtol each observed flip needed on the perplexity (what the seed's ~1e-2 refers to) and on every
    output, and the rtol one simulated flip of the smallest-gap row would need on the perplexity."""
    rows = []
    for model, group in checks.groupby("model"):
        flipped = group[group.n_flipped_rows > 0]
        rows.append({
            "model": model, "checks": len(group), "observed_flips": len(flipped),
            "rtol_observed_perplexity_max": float(flipped.perplexity_needed_rtol.max()),  # NaN without flips
            "rtol_observed_all_outputs_median": float(flipped.needed_rtol.median()),
            "rtol_one_flip_median": float(group.flip_needed_rtol.median()),
            "rtol_one_flip_worst": float(group.flip_needed_rtol.max()),
            "simulated_flips": int(group.flip_needed_rtol.notna().sum()),
        })
    return pd.DataFrame(rows)


_REPLAY_COLUMNS = ("model", "seed", "shape_mode", "n_flipped_rows", "perplexity_eager", "perplexity_ort",
                   "test_rule_passed", "first_failing_output", "skip_rule_passed")


def _replay_record(row: CheckRow) -> dict:
    return {k: v for k, v in row.record().items() if k in _REPLAY_COLUMNS}


def check_table(rows: list[CheckRow]) -> pd.DataFrame:
    """The `checks` table: one row per check, the columns `near_tie_row.CheckRow` declares."""
    return pd.DataFrame([row.record() for row in rows]) if rows else pd.DataFrame(columns=near_tie_row.columns())


class _Replay:
    """Picklable `[SeedTask, ...] -> table`: each one rebuilt and exported fresh (no swapping)."""

    def __init__(self, atol: float, rtol: float, fast_paths: bool = True):
        self.atol, self.rtol, self.fast_paths = atol, rtol, fast_paths

    def __call__(self, tasks) -> pd.DataFrame:
        rows = []
        for task in tasks:
            case = _case(task)
            pool = GraphPool(task.model, task.shape_mode, swap=False,
                             exposed=family.check_exposed(task.model)).prepare(case)
            result = check.check_seed(pool, task.seed, atol=self.atol, rtol=self.rtol, built=case.built,
                                      session_options={"intra_op_threads": 1}, fast_paths=self.fast_paths)
            rows.append(_replay_record(result.row))
        return pd.DataFrame(rows, columns=list(_REPLAY_COLUMNS))


def replay(seeds, models, shape_modes, *, atol: float = 1e-3, rtol: float = 1e-3, workers: int = 1,
           progress_every: float = 10.0, done: pd.DataFrame | None = None, fast_paths: bool = True) -> pd.DataFrame:
    """Rebuild each seed, export it fresh (no swapping), and run it through the export test's rule and
    through the `onnx.exactness` skip semantics (names checked, values not compared). Exports run side by
    side on `workers` processes. `done`: replays already made (`Checks.replayed`), not made again."""
    tasks = [SeedTask(model, mode, int(seed)) for model in models for mode in shape_modes for seed in seeds]
    have = {SeedTask(r.model, r.shape_mode, int(r.seed)): r._asdict() for r in done.itertuples(index=False)} \
        if done is not None and len(done) else {}
    made = sweep.map_chunks(_Replay(atol, rtol, fast_paths), [t for t in tasks if t not in have], workers, 1,
                            "replay", progress_every, unit="replays")
    have.update({SeedTask(r.model, r.shape_mode, int(r.seed)): r._asdict() for r in made.itertuples(index=False)})
    return pd.DataFrame([have[t] for t in tasks], columns=list(_REPLAY_COLUMNS))


DEFECT_COLUMNS = ("model", "shape_mode", "seed", "defect", "kind", "tolerances", "required", "caught_by_tie_aware",
                  "caught_by_test_rule", "n_flipped_rows", "aligned_failing", "max_output_diff")


def defects(pools: dict, seeds_by_model: dict[str, list[int]], bound: float, *, atol: float = 1e-3,
            rtol: float = 1e-3, fast_paths: bool = True) -> pd.DataFrame:
    """Each defect injected into the graph of each model: does the tie-aware comparison catch it, and
    does the export test's rule? A seed with its own export, or without a learnt swap, takes the defect into
    that export; the others into the template with their weights swapped in."""
    from exactness.runtimes.defects import DEFECTS, required, tolerances

    rows = []
    for (model, mode), pool in pools.items():
        for seed in seeds_by_model.get(model, []):
            built = family.build_model(model, int(seed))
            for kind in DEFECTS:
                defect = {"kind": kind, **(_confident_flip(model, int(seed), bound) if kind == "biased_code" else {})}
                row = check.check_seed(pool, int(seed), atol=atol, rtol=rtol, defect=defect, built=built,
                                       all_tensors=False, what_if=False, fast_paths=fast_paths).row  # need neither
                caught = not (row.aligned.aligned_ok and row.gaps.max_flip_margin <= bound)
                rows.append({"model": model, "shape_mode": mode, "seed": seed, "defect": row.defect, "kind": kind,
                             "tolerances": tolerances(kind), "required": required(kind),
                             "caught_by_tie_aware": caught, "caught_by_test_rule": not row.rule.test_rule_passed,
                             "n_flipped_rows": row.gaps.n_flipped_rows, "aligned_failing": row.aligned.aligned_failing,
                             "max_output_diff": max(row.max_abs_diff.values())})
    return pd.DataFrame(rows, columns=list(DEFECT_COLUMNS))


def defect_seeds(checks: pd.DataFrame, per_model: int) -> dict[str, list[int]]:
    """The first `per_model` checked seeds of each class: those the defects are injected on."""
    return {model: group.seed.tolist()[:per_model] for model, group in checks.groupby("model")}


def _confident_flip(model: str, seed: int, bound: float) -> dict:
    """The runner-up code of the row eager was least sure about among those it was sure about (gap above
    ten noise bounds), raised just enough to win: a flip that is not a tie. The bias holds every group's
    codes one after the other, so the row's group picks the slice."""
    from exactness.compare.tie_aware import top_two
    from exactness.models.quantizer_logits import plain_logits

    gaps = top_two(plain_logits(model, seed))
    confident = (gaps.gap > 10 * bound).nonzero().flatten()
    row = int(confident[gaps.gap[confident].argmin()])
    config = family.tester_config(model)
    group = row % config.num_codevector_groups
    code = group * config.num_codevectors_per_group + int(gaps.top2_index[row])
    return {"code": code, "amount": float(gaps.gap[row]) * 1.5 + 1e-6}


def seed_example(replayed: pd.DataFrame) -> pd.DataFrame:
    """The seed's captured failing seed (transformers #50575, section 7: a conformer test run), if it was replayed: its
    perplexities beside ours."""
    example = int(published.value("example_seed"))
    ours = replayed[(replayed.seed == example) & (replayed.model == published.NEAR_TIE_CLASS)]
    return pd.DataFrame([{
        "model": r.model, "seed": example, "shape_mode": r.shape_mode,
        "perplexity_eager": r.perplexity_eager, "seed_000_eager": published.value("example_perplexity_eager"),
        "perplexity_ort": r.perplexity_ort, "seed_000_ort": published.value("example_perplexity_ort"),
        "test_rule_passed": r.test_rule_passed,
    } for r in ours.itertuples()])


def summary_values(screen: pd.DataFrame, checks: pd.DataFrame, rates: pd.DataFrame, defects: pd.DataFrame,
                   threshold: float, immune: list[str], threshold_ulps: float = 0.0) -> dict:
    """The run's headline counts for summary.json: candidates by the run's own rule (`scale.is_candidate`)."""
    checked = bool(len(checks))
    tally = near_tie_rate.Tally.of(checks)
    candidates = near_tie_scale.is_candidate(screen, threshold, threshold_ulps)
    return dict(
        seeds_screened=int(len(screen)), candidates=int(candidates.sum()),
        checks=tally.checks, flips=tally.flipped, failures=tally.failed,
        failure_rate={r.model: {"ours": r.failure_rate, "seed": published.value("failure_rate")}
                      for r in rates.drop_duplicates("model").itertuples()} if len(rates) else {},  # first mode
        tie_aware_passes=int(checks.tie_aware_passed.sum()) if checked else 0,
        defects_caught=DefectTally.of(defects).tie_aware if checked else 0,
        defects_required=DefectTally.of(defects).required if checked else 0,
        never_argmax=immune)
