"""Exports are expensive (10-30 s), so a `GraphPool` exports once per (model, shape mode) and reuses the
graph for other seeds by weight swapping, learnt and verified against a second fresh export. Sessions
cost 30-60 ms each, so the swapped weights are then fed to one session per process (fed_graph), learnt
and verified the same way."""

from __future__ import annotations

import numpy as np
import torch

from exactness.runtimes import fed_graph, onnx_graph, weight_swap

SHAPE_MODES = ("dynamic", "static")


class ExposureError(RuntimeError):
    pass


def export_fresh(built: torch.nn.Module, inputs: dict, shape_mode: str) -> onnx_graph.ExportedGraph:
    return onnx_graph.export(built, inputs, dynamic=shape_mode == "dynamic")


class GraphPool:
    """Exports for one (model, shape mode): fresh at first, then one template reused by swapping weights.

    `exposed`: the intermediates a plain run returns besides the outputs (None: every module's output). A
    run with `all_values` exposes everything; a plain one exposes only `exposed`, checked on the first
    export to leave every output bit-identical to the bare graph the export test runs."""

    def __init__(self, model: str, shape_mode: str, swap: bool = True, exposed: frozenset[str] | None = None,
                 exported: dict[int, onnx_graph.ExportedGraph] | None = None, rewrite=None):
        """`exported`: fresh exports already made elsewhere (`export_fresh`, on another process), by seed:
        the pool uses them instead of exporting those seeds again. `rewrite`: graph -> a graph computing the
        same values faster, or None (`codevector_lookup.gathered_graph`); used for the one fed session
        only, after `fed_graph.learn` has compared it with the graph as exported."""
        if shape_mode not in SHAPE_MODES:
            raise ValueError(f"unknown shape mode {shape_mode!r}; use one of {SHAPE_MODES}")
        self.model, self.shape_mode, self.swap, self.exposed = model, shape_mode, swap, exposed
        self.rewrite = rewrite
        self.exported = dict(exported or {})
        self.template: tuple[onnx_graph.ExportedGraph, torch.nn.Module] | None = None
        self.template_seed: int | None = None
        self.template_inputs: dict | None = None
        self.plan: weight_swap.SwapPlan | None = None
        self.fed: fed_graph.FedGraph | None = None
        self.exports, self.export_seconds, self.swap_status, self.fed_status = 0, 0.0, "not needed yet", "no swap"
        self._last_fresh: tuple[int, onnx_graph.ExportedGraph] | None = None  # asked again for its other view
        self._plain_template: onnx_graph.ExportedGraph | None = None

    def __getstate__(self) -> dict:
        """What a worker process needs: the template graph and the learnt swap, not the template model
        (a parametrized torch module does not pickle, and workers never export)."""
        state = dict(self.__dict__)
        if state["template"] is not None:
            state["template"] = (state["template"][0], None)
        state["_last_fresh"] = None
        return state

    def fresh(self, seed: int, built: torch.nn.Module, inputs: dict) -> onnx_graph.ExportedGraph:
        graph = self.exported.pop(seed, None) or export_fresh(built, inputs, self.shape_mode)
        self.exports += 1
        self.export_seconds += graph.export_seconds
        return graph

    def _view(self, graph: onnx_graph.ExportedGraph, all_values: bool) -> onnx_graph.ExportedGraph:
        if all_values or self.exposed is None:
            return graph
        if self.template is not None and graph is self.template[0]:
            if self._plain_template is None:
                self._plain_template = graph.exposing(self.exposed)
            return self._plain_template
        return graph.exposing(self.exposed)

    def runner(self, seed: int, built: torch.nn.Module, inputs: dict, defect: dict | None = None,
               all_values: bool = True, **session_options) -> tuple[onnx_graph.OrtRunner, str]:
        """An ORT runner for this seed's weights; `session_options` go to `OrtRunner` (optimisation, threads).
        Asking for both views of one fresh seed exports it once."""
        if self.plan is not None:
            initializers = self.plan.initializers(built)
            if (self.fed is not None and defect is None and (not all_values or self.exposed is None)
                    and fed_graph.verified_for(session_options)):
                return self.fed.runner(initializers, **session_options), "swapped, one session"
            return onnx_graph.OrtRunner(self._view(self.template[0], all_values), initializers, defect=defect,
                                        **session_options), "swapped"
        if defect is not None and self.template is not None and seed == self.template_seed:
            return onnx_graph.OrtRunner(self._view(self.template[0], all_values), defect=defect,
                                        **session_options), "fresh"
        if self._last_fresh is not None and self._last_fresh[0] == seed:
            return onnx_graph.OrtRunner(self._view(self._last_fresh[1], all_values), **session_options), "fresh"
        graph = self.fresh(seed, built, inputs)
        self._last_fresh = (seed, graph)
        if self.template is None:
            self._check_exposure(graph, inputs)
            self.template, self.template_seed, self.template_inputs = (graph, built), seed, inputs
        elif self.swap and self.swap_status == "not needed yet":
            try:
                self.plan = weight_swap.learn(self.template[0], self.template[1], graph, built, seed)
                self.swap_status = f"verified against a fresh export of seed {seed}"
            except weight_swap.SwapError as error:
                self.swap_status = f"disabled: {error}"
            if self.plan is not None:
                self._learn_fed(built, inputs, seed)
        return onnx_graph.OrtRunner(self._view(graph, all_values), **session_options), "fresh"

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

    def _learn_fed(self, built: torch.nn.Module, inputs: dict, seed: int) -> None:
        seeds = [(self.plan.initializers(built), inputs),
                 (self.plan.initializers(self.template[1]), self.template_inputs)]
        try:
            self.fed = fed_graph.learn(self._view(self.template[0], False), seeds, self.rewrite)
            tail = "no tail" if self.fed.tail is None else f"a tail of {len(self.fed.tail.graph.node)} nodes"
            rewritten = f", rewritten by {self.rewrite.__name__}" if self.fed.rewritten else ""
            self.fed_status = f"verified on seeds {seed} and {self.template_seed} ({tail}{rewritten})"
        except fed_graph.FedError as error:
            self.fed_status = f"disabled: {error}"
