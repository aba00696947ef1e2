"""Exports are expensive (10-30 s), so a `GraphPool` exports once per (model, shape mode) and reuses the
graph for other seeds by weight swapping, learnt and verified against a second fresh export."""

from __future__ import annotations

import torch

from exactness.runtimes import onnx_graph, weight_swap

SHAPE_MODES = ("dynamic", "static")


class GraphPool:
    """Exports for one (model, shape mode): fresh at first, then one template reused by swapping weights."""

    def __init__(self, model: str, shape_mode: str, swap: bool = True):
        if shape_mode not in SHAPE_MODES:
            raise ValueError(f"unknown shape mode {shape_mode!r}; use one of {SHAPE_MODES}")
        self.model, self.shape_mode, self.swap = model, shape_mode, swap
        self.template: tuple[onnx_graph.ExportedGraph, torch.nn.Module] | None = None
        self.template_seed: int | None = None
        self.plan: weight_swap.SwapPlan | None = None
        self.exports, self.export_seconds, self.swap_status = 0, 0.0, "not needed yet"

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
            return onnx_graph.OrtRunner(self.template[0], initializers, defect=defect, **session_options), "swapped"
        if defect is not None and self.template is not None and seed == self.template_seed:
            return onnx_graph.OrtRunner(self.template[0], defect=defect, **session_options), "fresh"
        graph = self.fresh(built, inputs)
        if self.template is None:
            self.template, self.template_seed = (graph, built), seed
        elif self.swap and self.swap_status == "not needed yet":
            try:
                self.plan = weight_swap.learn(self.template[0], self.template[1], graph, built, seed)
                self.swap_status = f"verified against a fresh export of seed {seed}"
            except weight_swap.SwapError as error:
                self.swap_status = f"disabled: {error}"
        return onnx_graph.OrtRunner(graph, **session_options), "fresh"
