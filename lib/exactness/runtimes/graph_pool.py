"""Exports are expensive (10-30 s), so a `GraphPool` exports once per (model, shape mode) and reuses the
graph for other seeds by weight swapping, learnt and verified against a second fresh export. Sessions
cost 30-60 ms each, so the swapped weights are then fed to one session per process (fed_graph), learnt
and verified the same way."""

from __future__ import annotations

import torch

from exactness.runtimes import fed_graph, onnx_graph, weight_swap

SHAPE_MODES = ("dynamic", "static")


class GraphPool:
    """Exports for one (model, shape mode): fresh at first, then one template reused by swapping weights."""

    def __init__(self, model: str, shape_mode: str, swap: bool = True):
        if shape_mode not in SHAPE_MODES:
            raise ValueError(f"unknown shape mode {shape_mode!r}; use one of {SHAPE_MODES}")
        self.model, self.shape_mode, self.swap = model, shape_mode, swap
        self.template: tuple[onnx_graph.ExportedGraph, torch.nn.Module] | None = None
        self.template_seed: int | None = None
        self.template_inputs: dict | None = None
        self.plan: weight_swap.SwapPlan | None = None
        self.fed: fed_graph.FedGraph | None = None
        self.exports, self.export_seconds, self.swap_status, self.fed_status = 0, 0.0, "not needed yet", "no swap"

    def __getstate__(self) -> dict:
        """What a worker process needs: the template graph and the learnt swap, not the template model
        (a parametrized torch module does not pickle, and workers never export)."""
        state = dict(self.__dict__)
        if state["template"] is not None:
            state["template"] = (state["template"][0], None)
        return state

    def fresh(self, built: torch.nn.Module, inputs: dict) -> onnx_graph.ExportedGraph:
        graph = onnx_graph.export(built, inputs, dynamic=self.shape_mode == "dynamic")
        self.exports += 1
        self.export_seconds += graph.export_seconds
        return graph

    def runner(self, seed: int, built: torch.nn.Module, inputs: dict, defect: dict | None = None,
               **session_options) -> tuple[onnx_graph.OrtRunner, str]:
        """An ORT runner for this seed's weights; `session_options` go to `OrtRunner` (optimisation, threads)."""
        if self.plan is not None:
            initializers = self.plan.initializers(built)
            if self.fed is not None and defect is None:
                return self.fed.runner(initializers, **session_options), "swapped, one session"
            return onnx_graph.OrtRunner(self.template[0], initializers, defect=defect, **session_options), "swapped"
        if defect is not None and self.template is not None and seed == self.template_seed:
            return onnx_graph.OrtRunner(self.template[0], defect=defect, **session_options), "fresh"
        graph = self.fresh(built, inputs)
        if self.template is None:
            self.template, self.template_seed, self.template_inputs = (graph, built), seed, inputs
        elif self.swap and self.swap_status == "not needed yet":
            try:
                self.plan = weight_swap.learn(self.template[0], self.template[1], graph, built, seed)
                self.swap_status = f"verified against a fresh export of seed {seed}"
            except weight_swap.SwapError as error:
                self.swap_status = f"disabled: {error}"
            if self.plan is not None:
                self._learn_fed(built, inputs, seed)
        return onnx_graph.OrtRunner(graph, **session_options), "fresh"

    def _learn_fed(self, built: torch.nn.Module, inputs: dict, seed: int) -> None:
        seeds = [(self.plan.initializers(built), inputs),
                 (self.plan.initializers(self.template[1]), self.template_inputs)]
        try:
            self.fed = fed_graph.learn(self.template[0], seeds)
            tail = "no tail" if self.fed.tail is None else f"a tail of {len(self.fed.tail.graph.node)} nodes"
            self.fed_status = f"verified on seeds {seed} and {self.template_seed} ({tail})"
        except fed_graph.FedError as error:
            self.fed_status = f"disabled: {error}"
