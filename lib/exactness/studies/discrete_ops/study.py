"""The discrete-ops study end to end, for any registered transformers class: which discrete ops of its exported
graph reach which outputs, how often ORT chooses differently from eager, and the proven cause of every mismatch.

Per class and shape mode, four phases on `workers` processes (or a Dask cluster); phases 2 and 3 of every class
run as one sweep, then phase 4 of every class as another, so no core waits for one class's last chunk:
1. **exports**: the first two seeds exported (through the export cache: a second run exports nothing); the
   second proves the learnt weight swap; the graph's discrete ops scanned.
2. **calibration**: the first `calibration_seeds` seeds checked whole (eager recorded, ORT, the float64
   reference, the counterfactual): they measure the class's read noise, and show any defect, which shows on
   every seed, not only near ties.
3. **screen**: every seed run in eager alone under the recorder (the model rebuilt in place per seed): each
   counted op's smallest margin. Eager does not depend on the shape mode, so one forward a seed serves every
   shape mode of a class whose calls the first mode's taps include. A seed whose margin comes within `reach` of
   a tie (the measured noise times `engine.verdicts.REACH_FACTOR`, at least its `REACH_FLOOR_ULPS`), or whose op
   reads a non-finite value, is a candidate: only a candidate can flip.
4. **candidates**: checked whole, smallest margins first, at most `max_checks` per class (with `fast_paths`
   false: every seed is a candidate, the plain path the screen is tested against).
The verdicts (`verdicts.verdict`) then read the rows; a class with a defect is localized (`localize`).

A class comes from the registry, from a transformers checkout's own tester (`Settings.transformers_tests`), or from
your builder (`exactness.models.sources`); `models` may name `skipped`, every class the checkout's export test keeps
out of its value comparison. A class that cannot be built (its tester does not import, your builder raises or
returns something else, its tester skips it here) or exported is one line in the graphs table, its verdict "not
run" with that line as its proof, and the other classes run on.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import itertools
import math
from dataclasses import dataclass, field

import pandas as pd

from exactness.compare.export_rule import Rule
from exactness.engine import candidates as engine_candidates
from exactness.engine import verdicts as verdicts_of
from exactness.engine.evidence import DefectSign
from exactness.engine.places import Kind, Localization
from exactness.engine.rows import (
    ClassTask,
    GraphRow,
    MarginRow,
    OpRow,
    OutputRow,
    ScreenRow,
    SeedRow,
    frame,
)
from exactness.errors import brief
from exactness.models import checkout_rule, class_registry, model_names, seed_rebuild, sources
from exactness.runtimes import discrete_recorder, discrete_taps, worker_state
from exactness.runtimes.eager_capture import EXPORT_TEST_FORWARD_SEED
from exactness.runtimes.export_cache import ExportCache
from exactness.runtimes.speedup_paths import ScreenRecorder
from exactness.studies.discrete_ops import check, localize
from exactness.workbook import study_rules, sweep

STUDY = "discrete_ops"
SCREEN_CHUNK = 50  # seeds per screen task: progress moves, and each worker builds its template once
TIE_CHECKS = 40  # checks of a class's exact ties (a sample in seed order): a Wilson interval of +-0.1 on its rate


def validate(models, n_seeds: int, seed_start: int, shape_modes, workers: int, transformers_tests: str = "") -> None:
    """The study's declared rules, then what the names say about the checkout beside them (an unknown class,
    `skipped` without a checkout): one StudyParameterError listing every problem."""
    values = {"models": models if isinstance(models, str) else list(models), "n_seeds": n_seeds,
              "seed_start": seed_start, "shape_modes": list(shape_modes), "workers": workers,
              "transformers_tests": transformers_tests}
    study_rules.check(STUDY, values)  # the registration's `across` checks the names against the checkout too


def classes(models, transformers_tests: str = "") -> list[str]:
    """The classes a run builds, in order: `skipped` (alone or in the list) replaced by every class in the
    checkout's value-comparison skip scopes."""
    return model_names.expand(model_names.as_list(models), transformers_tests)


@dataclass(frozen=True)
class Settings:
    """Everything a run's numbers depend on besides the seeds (the notebook's parameters)."""

    atol: float = 1e-3
    rtol: float = 1e-3
    calibration_seeds: int = 8
    max_checks: int = 150
    max_fresh_exports: int = 5
    fast_paths: bool = True
    cache: str = ""  # the export cache's folder
    policy: verdicts_of.RatePolicy = field(default_factory=verdicts_of.RatePolicy)
    transformers_tests: str = ""  # a transformers checkout's root: its testers build the classes it has
    # the export test's check every seed is judged by; None: the checkout's own where it can be read
    # (`models.checkout_rule.judging`), else the built-in replica
    rule: Rule | None = None

    @property
    def judging(self) -> Rule:
        return self.rule if self.rule is not None else checkout_rule.judging(str(self.transformers_tests))[0]


@dataclass
class Result:
    """Every table of a run and the verdicts computed from them."""

    graphs: pd.DataFrame
    ops: pd.DataFrame
    screen: pd.DataFrame
    margins: pd.DataFrame
    outputs: pd.DataFrame
    seeds: pd.DataFrame
    localizations: list[Localization]  # one per defect, where it starts (`place_words.table` for people)
    verdicts: list[verdicts_of.ClassVerdict]


def _ops_rows(cg: check.ClassGraph) -> list[OpRow]:
    return [OpRow(cg.task.model, cg.task.shape_mode, op.node, op.op_type, op.category, op.scope, op.aten,
                  op.consumers, op.reaches_outputs, op.on_output_path, op.weight_dependent, op.can_flip, op.not_counted)
            for op in cg.ops]


class _Rebuilt:
    """`seed -> Made` from the registry's in-place rebuild: the seed's weights written into one template."""

    def __init__(self, rebuilder, subject: sources.Subject):
        self.rebuilder, self.subject = rebuilder, subject

    def __call__(self, seed: int) -> sources.Made:
        return sources.Made(self.rebuilder(seed), self.subject.inputs(seed))


def _builder(model: str, fast: bool, checkout: str = ""):
    return worker_state.current().made_by(_make_builder, model, fast, checkout)


def _make_builder(model: str, fast: bool, checkout: str):
    """(make(seed) -> Made, how): the registry's seed rebuild where it is verified, else a plain build per seed
    (by the registry, the checkout's tester or your builder)."""
    subject = sources.resolve(model, checkout)
    plain = functools.partial(sources.make, model, transformers_tests=checkout)
    if not fast:
        return plain, "built per seed (fast paths off)"
    if not subject.rebuildable:
        return plain, f"built per seed by {subject.tester}"
    rebuilt, why = seed_rebuild.rebuilder(model)
    if rebuilt is not None:
        return _Rebuilt(rebuilt, subject), "rebuilt in place (verified against plain builds)"
    return plain, f"built per seed: {why}"


def _fresh(model: str, checkout: str):
    """`seed -> Made` building a model of its own for every seed (never the rebuild's shared template)."""
    return functools.partial(sources.make, model, transformers_tests=checkout)


def _failure(error: Exception) -> str:
    """A class's one line in the graphs table: what could not be built or exported, and why."""
    text = " ".join(str(error).split())
    if isinstance(error, sources.SubjectError):
        return f"could not build: {text[:400]}"
    if isinstance(error, check.OutputNamesError):
        return f"could not compare: {text[:400]}"
    return f"{type(error).__name__}: {text[:400]}"


def prepare(task: ClassTask, seeds: list[int], settings: Settings) -> check.ClassGraph:
    """A class's graph as a run prepares it: its first seed exported and scanned, the weight swap learnt from
    the second, and how its seeds are rebuilt."""
    checkout = settings.transformers_tests
    cg = check.prepare(task, seeds[:2], ExportCache(settings.cache), _fresh(task.model, checkout))
    cg.row.rebuild = _builder(task.model, settings.fast_paths, checkout)[1]
    return cg


class _Prepare:
    """Picklable `[ClassTask] -> [ClassGraph | GraphRow]`: the class's exports, scan and swap (or its error)."""

    def __init__(self, seeds: list[int], settings: Settings):
        self.seeds, self.settings = seeds, settings

    def __call__(self, tasks) -> list:
        out = []
        for task in tasks:
            try:
                cg = prepare(task, self.seeds, self.settings)
            except Exception as error:  # a class that cannot be built or exported is a row, not a crash
                out.append(GraphRow(task.model, task.shape_mode, error=_failure(error)))
                continue
            out.append(cg)
        return out


@dataclass
class _Recording:
    """What a worker learns once per class for its screen: the counted calls of seed 0's whole recording, the
    node each one is (matched there), and the taps that record them alone (None where they cannot)."""

    calls: frozenset
    keys: dict[str, tuple[str, int]]
    taps: discrete_taps.TapPlan | None


class _Screen:
    """Picklable `[(task, seed)] -> screen table`: eager alone, margins at counted ops. With fast paths, only
    the torch functions that make the counted calls are tapped (`discrete_taps`), checked against the dispatch
    recorder on each task's first seed of every chunk; otherwise (and where the taps cannot be learnt or differ)
    the dispatch recorder sees the forward up to the last counted call. Consecutive items of one class and seed
    (its shape modes) share the build and every forward: the same model, inputs and calls record the same."""

    def __init__(self, ops: dict[ClassTask, list], settings: Settings):
        self.ops, self.settings = ops, settings
        self._learnt: dict[ClassTask, _Recording] = {}
        self._built: tuple[tuple[str, int], object] | None = None
        self._forwards: dict[tuple, list] = {}

    def __call__(self, items) -> pd.DataFrame:
        return frame(self.rows(items), ScreenRow)

    def rows(self, items) -> list[ScreenRow]:
        rows, verified = [], set()
        self._learnt = {}  # every chunk starts from the learnt taps: a fallback in one chunk stays in it
        self._built, self._forwards = None, {}
        for task, seed in items:
            rows += self._rows(task, int(seed), self._made(task.model, int(seed)), verify=task not in verified)
            verified.add(task)
        self._built, self._forwards = None, {}  # the template's tensors are not kept past the chunk
        return rows

    def _made(self, model: str, seed: int):
        if self._built is None or self._built[0] != (model, seed):
            made = _builder(model, self.settings.fast_paths, self.settings.transformers_tests)[0](seed)
            self._built, self._forwards = ((model, seed), made), {}
        return self._built[1]

    def _forward(self, key: tuple, record) -> list:
        """`record()`, once per key for the seed built (a call that raises is not kept: it raises again). A tap
        plan's id is a key: the chunk's recordings hold every plan it uses, so no two plans share one."""
        if key not in self._forwards:
            self._forwards[key] = record()
        return self._forwards[key]

    def _rows(self, task: ClassTask, seed: int, made, verify: bool) -> list[ScreenRow]:
        learnt = self._learn(task)
        ops = self.ops[task]
        if learnt.taps is not None:
            try:
                plan = learnt.taps
                records = self._forward(("taps", id(plan)),
                                        lambda: plan.record(made.model, made.inputs, EXPORT_TEST_FORWARD_SEED))
                tapped = check.screen_rows(task, seed, ops, records, learnt.keys, ScreenRecorder.TAPPED.value)
            except discrete_taps.TapError:  # this seed's forward made another call: recorded whole from now on
                learnt.taps = None
            else:
                if not verify:
                    return tapped
                recorded = self._recorded(task, seed, made, learnt)
                if [dataclasses.replace(r, recorder="") for r in tapped] == \
                        [dataclasses.replace(r, recorder="") for r in recorded]:
                    return tapped
                learnt.taps = None  # the taps' margins differ from the recorder's
        return self._recorded(task, seed, made, learnt)

    def _recorded(self, task, seed, made, learnt: _Recording) -> list[ScreenRow]:
        records = self._forward(("dispatch", learnt.calls), lambda: discrete_recorder.record(
            made.model, made.inputs, seed=EXPORT_TEST_FORWARD_SEED, stop_after=learnt.calls)[1])
        return check.screen_rows(task, seed, self.ops[task], records)

    def _learn(self, task: ClassTask) -> _Recording:
        """The eager calls of the class's counted ops on the first seed: once a forward has made them all, the
        screen has what it needs and the rest of the forward is skipped."""
        if task not in self._learnt:
            counted_nodes = tuple(op.node for op in self.ops[task] if check.counted(op) and op.category != "random")
            learnt = _learnt(task, counted_nodes, self.settings.fast_paths, self.settings.transformers_tests,
                             tuple(self.ops[task]))
            self._learnt[task] = dataclasses.replace(learnt)
        return self._learnt[task]


def _learnt(task: ClassTask, counted_nodes: tuple, fast: bool, checkout: str, ops: tuple) -> _Recording:
    key = (task, counted_nodes, fast, checkout, tuple(repr(op) for op in ops))  # the graph's ops, every field
    if key not in worker_state.current().learnt:
        made = _fresh(task.model, checkout)(0)
        _, records = discrete_recorder.record(made.model, made.inputs, seed=EXPORT_TEST_FORWARD_SEED)
        matches = discrete_recorder.match(list(ops), records)
        keys = {node: (records[m.record].op, records[m.record].call)
                for node in counted_nodes for m in [matches[node]] if m.record is not None}
        calls = frozenset(keys.values())
        taps = None
        if fast and calls:
            # another shape mode of the class whose plan taps these calls (and maybe more): that plan, so that one
            # forward a seed serves both; each mode's rows are still checked against its own dispatch recording
            taps = next((r.taps for k, r in list(worker_state.current().learnt.items()) if k[0].model == task.model
                         and k[2:4] == (fast, checkout) and r.taps is not None and r.calls >= calls), None)
        if fast and calls and taps is None:
            try:
                taps = discrete_taps.learn(made.model, made.inputs, calls, EXPORT_TEST_FORWARD_SEED)
            except discrete_taps.TapError:  # a call no wrapper reaches: the dispatch recorder screens it
                pass
        worker_state.current().learnt[key] = _Recording(calls, keys, taps)
    return worker_state.current().learnt[key]


class _Check:
    """Picklable `seeds -> {margins, outputs, seeds}` for one class: whole checks on its graph."""

    def __init__(self, cg: check.ClassGraph, settings: Settings, phase: str):
        self.cg, self.settings, self.phase = cg, settings, phase

    def __call__(self, seeds) -> dict[str, pd.DataFrame]:
        margins, outputs, rows = [], [], []
        cache = ExportCache(self.settings.cache)
        checkout = self.settings.transformers_tests
        for seed in seeds:
            task = self.cg.task
            fresh_build = self.cg.plan is None or not self.settings.fast_paths
            make = _fresh(task.model, checkout) if fresh_build else _builder(task.model, True, checkout)[0]
            made = make(int(seed))
            result = check.check_seed(self.cg, int(seed), made.model, made.inputs, cache, self.settings.atol,
                                      self.settings.rtol, self.phase, judging=self.settings.judging)
            margins += result.margins
            outputs += result.outputs
            rows.append(result.seed)
        return {"margins": frame(margins, MarginRow), "outputs": frame(outputs, OutputRow),
                "seeds": frame(rows, SeedRow)}


def _joined(parts: list[dict[str, pd.DataFrame]]) -> dict[str, pd.DataFrame]:
    return {name: pd.concat([p[name] for p in parts], ignore_index=True) for name in ("margins", "outputs", "seeds")}


class Phase(enum.Enum):
    CALIBRATION = "calibration"
    SCREEN = "screen"
    CANDIDATES = "candidates"


@dataclass
class _Unit:
    """One piece of a sweep: a class's seeds checked whole (`cg`) or screened (`ops`)."""

    task: ClassTask
    phase: Phase
    seeds: tuple[int, ...]
    cg: check.ClassGraph | None = None
    ops: dict[ClassTask, list] | None = None  # a screen's shape modes of `task`'s class: one forward a seed

    @property
    def tasks(self) -> list[ClassTask]:
        return list(self.ops) if self.ops else [self.task]

    def __str__(self) -> str:  # the shard's name (a file's: the class named once, under 255 bytes)
        tasks = f"{self.task.model}|{'+'.join(t.shape_mode for t in self.tasks)}"
        return f"{tasks} {self.phase.value} {self.seeds[0]}-{self.seeds[-1]}"


@dataclass
class _Done:
    """A unit's tables (checks), its screen rows, or the line of the class's failure."""

    task: ClassTask
    phase: Phase
    tables: dict[str, pd.DataFrame] | None = None
    screen: pd.DataFrame | None = None
    error: str = ""


class _Work:
    """Picklable `[_Unit] -> [_Done]`: the units of every class in one sweep, so that no core waits for the
    last chunk of one class's phase before the next class starts."""

    def __init__(self, settings: Settings):
        self.settings = settings

    def __call__(self, units) -> list[_Done]:
        out = []
        for unit in units:
            try:
                if unit.phase is Phase.SCREEN:
                    rows = _Screen(unit.ops, self.settings).rows([(t, s) for s in unit.seeds for t in unit.tasks])
                    out += [_Done(t, unit.phase, screen=frame([r for r in rows if (r.model, r.shape_mode) ==
                                                               (t.model, t.shape_mode)], ScreenRow))
                            for t in unit.tasks]
                else:
                    out.append(_Done(unit.task, unit.phase,
                                     tables=_Check(unit.cg, self.settings, unit.phase.value)(unit.seeds)))
            except (sources.SubjectError, check.OutputNamesError) as error:  # the class's one line
                out += [_Done(t, unit.phase, error=_failure(error)) for t in unit.tasks]
        return out


def _flat(parts: list[list[_Done]]) -> list[_Done]:
    return [done for part in parts for done in part]


def _seeds_in(part) -> int:
    return sum(len(unit.seeds) for unit in part)


def _for_checks(cg: check.ClassGraph) -> check.ClassGraph:
    """What a check reads of a class's graph: without the every-module graph only localization runs (a third of
    the weights each unit would ship to its worker)."""
    return dataclasses.replace(cg, full=None)


def _counted_nodes(cg: check.ClassGraph) -> set[str]:
    return {op.node for op in cg.ops if check.counted(op) and op.category != "random"}


def _first(cg: check.ClassGraph, seeds: list[int], settings: Settings) -> list[int]:
    """The calibration seeds: checked whole whatever the screen says (fewer where each is a fresh export)."""
    fresh_only = cg.plan is None
    return seeds[: max(1, min(settings.calibration_seeds,
                              settings.max_fresh_exports if fresh_only else len(seeds)))]


def _units(graphs: dict, seeds: list[int], settings: Settings) -> list[_Unit]:
    """Every class's calibration checks (two seeds a unit) and screen (`SCREEN_CHUNK` seeds a unit, each seed
    screened once for every shape mode of the class)."""
    units = []
    for _, mine in itertools.groupby(graphs.items(), key=lambda item: item[0].model):
        screened = {}
        for task, cg in mine:
            units += [_Unit(task, Phase.CALIBRATION, tuple(c), cg=_for_checks(cg))
                      for c in sweep.chunks(_first(cg, seeds, settings), 2)]
            if _counted_nodes(cg) and settings.fast_paths:
                screened[task] = cg.ops
        if screened:
            units += [_Unit(next(iter(screened)), Phase.SCREEN, tuple(c), ops=screened)
                      for c in sweep.chunks(seeds, SCREEN_CHUNK)]
    return units


def _chosen(task: ClassTask, cg: check.ClassGraph, seeds: list[int], settings: Settings, screen, reach: float,
            row: GraphRow) -> list[int]:
    """The seeds a class checks after its calibration: the screen's candidates (every seed without fast paths)."""
    first = set(_first(cg, seeds, settings))
    if not settings.fast_paths:
        row.screen = "not screened: fast paths off, every seed checked"
        return [s for s in seeds if s not in first]
    n_seeds = len(seeds)
    tapped = int((screen.recorder == ScreenRecorder.TAPPED.value).groupby(screen.seed).all().sum()) \
        if len(screen) else 0
    row.screen = f"{n_seeds:,} seeds screened" + (
        f" ({tapped:,} recording only the counted ops' calls, the rest every op)" if tapped < n_seeds else
        " (only the counted ops' calls recorded; each chunk's first seed checked against a full recording)")
    budget = (settings.max_fresh_exports if cg.plan is None else settings.max_checks) - len(first)
    return engine_candidates.candidates(screen, reach, first, budget, TIE_CHECKS)


def _sweep(graphs: dict, graph_rows: list, tasks: list, seeds: list[int], settings: Settings, workers: int,
           scheduler: str, shards, progress_every: float):
    """Every class's calibration and screen in one sweep, then every class's candidates in another: (checks,
    screens, reaches). A class whose builder fails on a seed leaves `graphs` as its one line in `graph_rows`."""
    done = sweep.map_chunks(_Work(settings), _units(graphs, seeds, settings), workers, 1,
                            f"discrete ops: calibration and screen ({len(graphs)} classes)", progress_every,
                            scheduler, shards, combine=_flat, size=_seeds_in)
    failed = _failures(done, graphs, graph_rows, tasks)
    checks: dict[ClassTask, list] = {task: [] for task in graphs}
    screens: dict[ClassTask, pd.DataFrame | None] = {}
    reaches: dict[ClassTask, float] = {}
    later: list[_Unit] = []
    by_task: dict[ClassTask, list[_Done]] = {}
    for d in done:
        by_task.setdefault(d.task, []).append(d)
    for task, cg in graphs.items():
        mine = by_task.get(task, [])
        checks[task] = [d.tables for d in mine if d.phase is Phase.CALIBRATION]
        counted_nodes = _counted_nodes(cg)
        noise = verdicts_of.noise_ulps(_joined(checks[task])["margins"], counted_nodes)
        reaches[task] = verdicts_of.reach_ulps(noise)
        if not counted_nodes:
            screens[task] = None
            continue
        screen = pd.concat([d.screen for d in mine if d.phase is Phase.SCREEN], ignore_index=True) \
            if settings.fast_paths else frame([], ScreenRow)
        screens[task] = screen
        chosen = _chosen(task, cg, seeds, settings, screen, reaches[task], graph_rows[tasks.index(task)])
        later += [_Unit(task, Phase.CANDIDATES, tuple(c), cg=_for_checks(cg)) for c in sweep.chunks(chosen, 2)]
    if later:
        done = sweep.map_chunks(_Work(settings), later, workers, 1,
                                f"discrete ops: candidates ({len({u.task for u in later})} classes)", progress_every,
                                scheduler, shards, combine=_flat, size=_seeds_in)
        failed |= _failures(done, graphs, graph_rows, tasks)
        for d in done:
            if d.task not in failed:
                checks[d.task].append(d.tables)
    for task in failed:
        checks.pop(task, None), screens.pop(task, None), reaches.pop(task, None)
    for task in graphs:
        screen = screens.get(task)
        if screen is None:
            continue
        if not settings.fast_paths:
            screen = screen_from_checks(checks[task], task, _counted_nodes(graphs[task]))
        reach = reaches[task]
        if len(screen):
            screen = screen.assign(in_reach=screen.seed.map(engine_candidates.in_reach(screen, reach)))
        screens[task] = screen
    return [t for task in graphs for t in checks[task]], [s for s in screens.values() if s is not None], reaches


def _failures(done: list[_Done], graphs: dict, graph_rows: list, tasks: list) -> set[ClassTask]:
    """The classes whose builder failed on a seed: each one line in the graphs table, and out of `graphs`."""
    failed = set()
    for d in done:
        if d.error and d.task not in failed:
            failed.add(d.task)
            graph_rows[tasks.index(d.task)] = GraphRow(d.task.model, d.task.shape_mode, error=d.error)
    for task in failed:
        graphs.pop(task, None)
    return failed


def run(models, seed_start: int, n_seeds: int, shape_modes, workers: int = 1, scheduler: str = "", shards=None,
        settings: Settings | None = None, progress_every: float = 10.0) -> Result:
    settings = settings or Settings()
    settings = dataclasses.replace(settings, rule=settings.judging)  # read once, then carried to every worker
    seeds = list(range(seed_start, seed_start + n_seeds))
    models = classes(models, settings.transformers_tests)
    tasks = [ClassTask(model, mode) for model in models for mode in shape_modes]
    prepared = sweep.map_chunks(_Prepare(seeds, settings), tasks, workers, 1, "discrete ops: exports",
                                progress_every, scheduler, None, combine=lambda parts: [x for p in parts for x in p],
                                unit="graphs")
    graphs = {task: item for task, item in zip(tasks, prepared, strict=True) if isinstance(item, check.ClassGraph)}
    graph_rows = [item.row if isinstance(item, check.ClassGraph) else item for item in prepared]
    checks, screens, reaches = _sweep(graphs, graph_rows, tasks, seeds, settings, workers, scheduler, shards,
                                      progress_every)
    ops = frame([row for cg in graphs.values() for row in _ops_rows(cg)], OpRow)
    tables = _joined(checks) if checks else {"margins": frame([], MarginRow), "outputs": frame([], OutputRow),
                                             "seeds": frame([], SeedRow)}
    screen = pd.concat(screens, ignore_index=True) if screens else frame([], ScreenRow)
    graphs_table = frame(graph_rows, GraphRow)
    found = decide(graphs_table, ops, screen, tables, reaches, settings, graphs)
    return Result(graphs_table, ops, screen, tables["margins"], tables["outputs"], tables["seeds"], found[1], found[0])


def screen_from_checks(checks: list[dict], task: ClassTask, counted_nodes: set[str]) -> pd.DataFrame:
    """The screen's rows as the checks saw them (eager's side of every counted op): the plain path."""
    margins = pd.concat([c["margins"] for c in checks], ignore_index=True)
    mine = margins[(margins.model == task.model) & (margins.shape_mode == task.shape_mode)
                   & margins.node.isin(counted_nodes) & (margins.matched_by != "no eager call")]
    return frame([ScreenRow(task.model, task.shape_mode, int(r.seed), r.node, int(r.decisions), r.min_margin,
                            r.min_margin_ulps, int(r.exact_ties), int(r.reads_nonfinite_eager))
                  for r in mine.itertuples()], ScreenRow)


def _of(table: pd.DataFrame, task: ClassTask) -> pd.DataFrame:
    if not len(table):
        return table
    return table[(table.model == task.model) & (table.shape_mode == task.shape_mode)].reset_index(drop=True)


def decide(graphs_table, ops, screen, tables, reaches, settings: Settings,
           graphs: dict) -> tuple[list[verdicts_of.ClassVerdict], list[Localization]]:
    """The verdict of every class; a defect's class is localized on the seed that shows it first (a localization
    of kind NOT_LOCALIZED where the localizer failed)."""
    found, localizations = [], []
    for row in graphs_table.itertuples(index=False):
        task = ClassTask(row.model, row.shape_mode)
        mine = verdicts_of.ClassTables(pd.Series(row._asdict()), _of(ops, task), _of(screen, task),
                                       _of(tables["margins"], task), _of(tables["outputs"], task),
                                       _of(tables["seeds"], task))
        reach = reaches.get(task, math.nan)
        first = verdicts_of.verdict(mine, settings.policy, reach, rule=settings.judging)
        if first.cause is verdicts_of.Cause.DEFECT and task in graphs:
            seed = first.defect_seed
            made = _fresh(task.model, settings.transformers_tests)(seed)
            try:
                spot = localize.localize(graphs[task], seed, made.model, made.inputs, ExportCache(settings.cache),
                                         first.defect_output,
                                         first.evidence.defect.sign is DefectSign.NAN_IN_EAGER)
            except Exception as error:  # the defect stands, proven; only where it starts is not found
                spot = Localization(task.model, task.shape_mode, seed, "", Kind.NOT_LOCALIZED,
                                    failed=brief(error, 300))
            localizations.append(spot)
            first = verdicts_of.verdict(mine, settings.policy, reach, spot, rule=settings.judging)
        found.append(_as_stated(first, mine, settings.transformers_tests))
    return found, localizations


def _as_stated(found: verdicts_of.ClassVerdict, tables: verdicts_of.ClassTables,
               checkout: str) -> verdicts_of.ClassVerdict:
    """The verdict beside the skip as the checkout states it: with a checkout, every class is judged against that
    checkout's EXPORT_SKIPS reason (and the claim `exactness.published` labels for the class, where it has one);
    without one, a registry class keeps the reason the verdict quoted."""
    if not checkout and found.model in class_registry.SUBJECTS:
        return found
    stated = sources.stated(found.model, checkout)
    ops = tables.ops
    counted = set(ops[ops.on_output_path & ops.can_flip].node) if len(ops) else set()
    margins = tables.margins
    flipped = (set(margins[margins.node.isin(counted) & (margins.flipped > 0)].op_type) if len(margins)
               else set())
    found.skip_reason = stated.reason
    found.claim = " ".join(part for part in (str(stated.claim or ""), f"(scope {stated.scope})" if stated.scope else "")
                           if part)
    found.reason_holds = verdicts_of.reason_holds(stated.claim, found.cause, flipped, ops)
    found.refuted = verdicts_of.refuted(stated.claim, found.cause, ops, flipped)
    found.refuted_claim, found.graph_ops = str(stated.claim or ""), len(ops)
    return found


def summary_values(result: Result, n_seeds: int) -> dict:
    """summary.json's discrete-ops entries beside the answers: the classes, seeds asked, each class's cause and the
    seeds it screened and checked (a class that stopped early, or a pair-only one, ran fewer than asked)."""
    defects = {s.model: {"seed": int(s.seed), "stage": s.stage, "pass": s.pass_name,
                         "error_with": float(s.error_with), "error_without": float(s.error_without),
                         "reproduces": s.remedy.reproduces if s.remedy else None} for s in result.localizations}
    modes = {x.shape_mode for x in result.verdicts}

    def key(x) -> str:  # a class by name, or by name and shape mode where a run has both
        return x.model if len(modes) <= 1 else f"{x.model} ({x.shape_mode})"

    return {"classes": len(result.verdicts), "seeds_asked": int(n_seeds),
            "causes": {key(x): x.cause.value for x in result.verdicts},
            "seeds_run": {key(x): {"screened": int(x.screened), "checked": int(x.checked)} for x in result.verdicts},
            "defects": defects}
