"""Exports are expensive (10-30 s), so a `GraphPool` exports once per (model, shape mode) and reuses the
graph for other seeds by weight swapping, learnt and verified against a second fresh export. Sessions
cost 30-60 ms each, so the swapped weights are then fed to one session per process (fed_graph), learnt
and verified the same way.

Two phases. `prepare` does everything that is learnt, in one visible step: the first seed's export (the
template), the check that exposing a check's values leaves the outputs as exported, and, given a second
seed's export, the weight swap and the fed session, each verified or refused with the reason. Then
`runner` only runs: a seed with its own export runs that, other seeds run swapped (or, where no swap was
learnt, export fresh). Every runner says which path it took (`RunPaths`)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import torch

from exactness.runtimes import fed_graph, onnx_graph, weight_swap
from exactness.runtimes.export_cache import ExportCache
from exactness.runtimes.speedup_paths import LookupPath, SessionPath, WeightsPath

SHAPE_MODES = ("dynamic", "static")


class ExposureError(RuntimeError):
    pass


class Phase(StrEnum):
    EMPTY = "empty"  # nothing exported
    TEMPLATE = "template"  # the template exported and its exposure checked; the swap not learnt yet
    PREPARED = "prepared"  # everything learnt (or refused): only runs from here on


class Learnt(StrEnum):
    """What became of a speed-up the pool learns (the weight swap, the fed session)."""

    PENDING = "pending"  # not learnt yet: the pool has not seen a second seed
    OFF = "off"  # not wanted (fast paths off, a pool without swap) or impossible (no swap to feed)
    VERIFIED = "verified"
    REFUSED = "refused"  # learning or its verification failed; `*_reason` says why


@dataclass(frozen=True)
class Case:
    """One seed as the pool needs it: its model and inputs (`graph`: its fresh export, when already made)."""

    seed: int
    built: torch.nn.Module
    inputs: dict
    graph: onnx_graph.ExportedGraph | None = None
    cached: bool = False  # `graph` was read from the export cache (no export ran for it)


@dataclass(frozen=True)
class RunPaths:
    """Which path a runner takes: whose weights (swapped or the seed's own export), which session, which lookup."""

    weights: WeightsPath
    session: SessionPath
    lookup: LookupPath


_OWN_EXPORT = RunPaths(WeightsPath.FRESH_EXPORT, SessionPath.PER_SEED, LookupPath.PLAIN)
_SWAPPED = RunPaths(WeightsPath.SWAP, SessionPath.PER_SEED, LookupPath.PLAIN)


def export_fresh(built: torch.nn.Module, inputs: dict, shape_mode: str) -> onnx_graph.ExportedGraph:
    return onnx_graph.export(built, inputs, dynamic=shape_mode == "dynamic")


def export_case(case: Case, shape_mode: str, cache: str = "") -> Case:
    """`case` with its export: from the export cache at `cache` where it holds this model, inputs and weights (the
    same export every study reads, `runtimes.export_cache`), else exported fresh (and stored there)."""
    if not cache:
        return Case(case.seed, case.built, case.inputs, export_fresh(case.built, case.inputs, shape_mode))
    found = ExportCache(cache).export(case.built, case.inputs, dynamic=shape_mode == "dynamic")
    return Case(case.seed, case.built, case.inputs, found.graph, found.cached)


class GraphPool:
    """Exports for one (model, shape mode): the template, and the seeds' own exports where they were made.

    `exposed`: the intermediates a plain run returns besides the outputs (None: every module's output). A
    run with `all_values` exposes everything; a plain one exposes only `exposed`, checked on the template to
    leave every output bit-identical to the bare graph the export test runs. `swap=False`: no weight swap
    and so no fed session (fast paths off): every seed runs its own export in its own session."""

    def __init__(self, model: str, shape_mode: str, *, swap: bool = True, exposed: frozenset[str] | None = None,
                 rewrite=None, fed: bool = True):
        """`fed=False`: no fed session (a caller that runs its own sessions on the swapped weights).
        `rewrite`: graph -> a graph computing the same values faster, or None
        (`codevector_lookup.gathered_graph`); used for the one fed session only, after `fed_graph.learn` has
        compared it with the graph as exported. Exports made elsewhere (another process) come in as
        `Case.graph` to `prepare`."""
        if shape_mode not in SHAPE_MODES:
            raise ValueError(f"unknown shape mode {shape_mode!r}; use one of {SHAPE_MODES}")
        self.model, self.shape_mode, self.swap, self.exposed = model, shape_mode, swap, exposed
        self.rewrite = rewrite
        self.phase = Phase.EMPTY
        self.template: tuple[onnx_graph.ExportedGraph, torch.nn.Module] | None = None
        self.template_seed: int | None = None
        self.template_inputs: dict | None = None
        self.plan: weight_swap.SwapPlan | None = None
        self.fed: fed_graph.FedGraph | None = None
        self.swap_state = Learnt.PENDING if swap else Learnt.OFF
        self.fed_state = Learnt.PENDING if swap and fed else Learnt.OFF
        self.swap_reason, self.fed_reason = "", ""
        self.exports, self.export_seconds, self.cached_exports = 0, 0.0, 0
        self.own: dict[int, onnx_graph.ExportedGraph] = {}  # seeds with their own export in this process
        self._views: dict[int, onnx_graph.ExportedGraph] = {}  # seed of a kept graph -> its plain view, made once
        self._last_fresh: tuple[int, onnx_graph.ExportedGraph] | None = None  # exported in `runner`

    def __getstate__(self) -> dict:
        """What a worker process needs: the template graph and the learnt swap, not the template model
        (a parametrized torch module does not pickle, and workers never export)."""
        state = dict(self.__dict__)
        if state["template"] is not None:
            state["template"] = (state["template"][0], None)
        if state["plan"] is not None:  # a worker runs the first seeds swapped: the same values (the swap is verified)
            state["own"] = {}
        state["_views"], state["_last_fresh"] = {}, None
        return state

    @property
    def swap_status(self) -> str:
        """The weight swap's state in words, for a table of pools."""
        if self.swap_state is Learnt.VERIFIED:
            return f"verified against a fresh export of seed {self.plan.verified_seed}"
        if self.swap_state is Learnt.REFUSED:
            return f"disabled: {self.swap_reason}"
        if not self.swap:
            return "off (fast paths off)"
        return "not learnt yet" if self.swap_state is Learnt.PENDING else "not learnt (one seed only)"

    @property
    def fed_status(self) -> str:
        """The fed session's state in words, for a table of pools."""
        if self.fed_state is Learnt.VERIFIED:
            return f"verified on {self.fed_reason}"
        if self.fed_state is Learnt.REFUSED:
            return f"disabled: {self.fed_reason}"
        return "no swap"

    # -- phase 1: prepare ------------------------------------------------------------------------------

    def prepare(self, first: Case, second: Case | None = None) -> GraphPool:
        """Export `first` (the template) and check its exposure; then, given `second` (another seed), export
        it too and learn the weight swap and the fed session from the two (unless `swap` is off: then
        `second` only keeps its own export). Refusals are recorded, not raised: a pool without a swap
        exports each further seed fresh."""
        if self.phase is not Phase.EMPTY:
            raise RuntimeError(f"{self.model} ({self.shape_mode}): the pool is already {self.phase.value}")
        self._take_template(first)
        if second is not None and second.seed != first.seed:
            self._take_second(second)
        self.phase = Phase.PREPARED
        if self.swap_state is Learnt.PENDING:  # a single seed: nothing to learn the swap from
            self.swap_state = self.fed_state = Learnt.OFF
        return self

    def fresh(self, seed: int, built: torch.nn.Module, inputs: dict) -> onnx_graph.ExportedGraph:
        """The seed's own export, made here."""
        graph = export_fresh(built, inputs, self.shape_mode)
        self.exports += 1
        self.export_seconds += graph.export_seconds
        return graph

    def _export(self, case: Case) -> onnx_graph.ExportedGraph:
        if case.graph is not None and case.cached:
            self.cached_exports += 1
        elif case.graph is not None:
            self.exports += 1
            self.export_seconds += case.graph.export_seconds
        self.own[case.seed] = case.graph or self.fresh(case.seed, case.built, case.inputs)
        return self.own[case.seed]

    def _take_template(self, case: Case) -> None:
        graph = self._export(case)
        self._check_exposure(graph, case.inputs)
        self.template, self.template_seed, self.template_inputs = (graph, case.built), case.seed, case.inputs
        self.phase = Phase.TEMPLATE

    def _take_second(self, case: Case) -> None:
        graph = self._export(case)
        if not self.swap:
            return
        try:
            self.plan = weight_swap.learn(self.template[0], self.template[1], graph, case.built, case.seed)
            self.swap_state = Learnt.VERIFIED
        except weight_swap.SwapError as error:
            self.swap_state, self.swap_reason, self.fed_state = Learnt.REFUSED, str(error), Learnt.OFF
            return
        if self.fed_state is Learnt.PENDING:
            self._learn_fed(case)

    def _check_exposure(self, graph: onnx_graph.ExportedGraph, inputs: dict) -> None:
        if self.exposed is None:
            return
        bare = onnx_graph.OrtRunner(graph.exposing(()), intra_op_threads=1).run(inputs)
        plain = onnx_graph.OrtRunner(graph.exposing(self.exposed), intra_op_threads=1).run(inputs)
        moved = [name for name in bare if not np.array_equal(bare[name], plain[name], equal_nan=True)]
        if moved:
            raise ExposureError(f"{self.model} ({self.shape_mode}): exposing {sorted(self.exposed)} moves the "
                                f"output(s) {moved} off the bare graph's values; a check would not see what the "
                                "export test sees")

    def _learn_fed(self, case: Case) -> None:
        seeds = [(self.plan.initializers(case.built), case.inputs),
                 (self.plan.initializers(self.template[1]), self.template_inputs)]
        try:
            self.fed = fed_graph.learn(self._view(self.template[0], False), seeds, self.rewrite)
        except fed_graph.FedError as error:
            self.fed_state, self.fed_reason = Learnt.REFUSED, str(error)
            return
        tail = "no tail" if self.fed.tail is None else f"a tail of {len(self.fed.tail.graph.node)} nodes"
        # said in words on a report: a rewrite names what it changes (`words`), never its function's name
        rewritten = f", {getattr(self.rewrite, 'words', 'rewritten')}" if self.fed.rewritten else ""
        self.fed_state = Learnt.VERIFIED
        self.fed_reason = f"seeds {case.seed} and {self.template_seed} ({tail}{rewritten})"

    def advance(self, case: Case) -> None:
        """For callers that let their first seeds prepare the pool as they come (ulp_noise): the first seed
        becomes the template, the next other seed the one the swap is learnt from. A no-op once prepared."""
        if self.phase is Phase.EMPTY:
            self._take_template(case)
            if not self.swap:
                self.phase = Phase.PREPARED
        elif self.phase is Phase.TEMPLATE and case.seed != self.template_seed:
            self._take_second(case)
            self.phase = Phase.PREPARED

    # -- phase 2: run ----------------------------------------------------------------------------------

    def _view(self, graph: onnx_graph.ExportedGraph, all_values: bool) -> onnx_graph.ExportedGraph:
        """The graph exposing what a run needs: everything, or only `exposed` (made once per kept graph)."""
        if all_values or self.exposed is None:
            return graph
        is_template = self.template is not None and graph is self.template[0]  # kept in every process
        kept = self.template_seed if is_template else next((s for s, own in self.own.items() if own is graph), None)
        if kept is None:
            return graph.exposing(self.exposed)
        if kept not in self._views:
            self._views[kept] = graph.exposing(self.exposed)
        return self._views[kept]

    def runner(self, seed: int, built: torch.nn.Module, inputs: dict, defect: dict | None = None,
               all_values: bool = True, **session_options) -> tuple[onnx_graph.OrtRunner, RunPaths]:
        """An ORT runner for this seed's weights and the paths it takes; `session_options` go to `OrtRunner`
        (optimisation, threads). A seed without its own export and without a learnt swap is exported here
        (fast paths off, or a refused swap); asking for both views of it exports it once."""
        if self.phase is not Phase.PREPARED:
            self.advance(Case(seed, built, inputs))  # a pool used without `prepare` learns as it goes
        if seed in self.own:
            return self._own_runner(self.own[seed], all_values, defect, session_options), _OWN_EXPORT
        if self.plan is not None:
            initializers = self.plan.initializers(built)
            if (self.fed is not None and defect is None and (not all_values or self.exposed is None)
                    and fed_graph.verified_for(session_options)):
                lookup = LookupPath.GATHERED if self.fed.rewritten else LookupPath.PLAIN
                return self.fed.runner(initializers, **session_options), RunPaths(WeightsPath.SWAP, SessionPath.FED,
                                                                                  lookup)
            return onnx_graph.OrtRunner(self._view(self.template[0], all_values), initializers, defect=defect,
                                        **session_options), _SWAPPED
        if self._last_fresh is None or self._last_fresh[0] != seed:  # kept for the seed's other view only
            self._last_fresh = (seed, self.fresh(seed, built, inputs))
        return self._own_runner(self._last_fresh[1], all_values, defect, session_options), _OWN_EXPORT

    def _own_runner(self, graph: onnx_graph.ExportedGraph, all_values: bool, defect: dict | None,
                    session_options: dict) -> onnx_graph.OrtRunner:
        return onnx_graph.OrtRunner(self._view(graph, all_values), defect=defect, **session_options)
