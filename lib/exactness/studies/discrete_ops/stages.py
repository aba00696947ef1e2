"""Which stage of the export-and-run pipeline makes a defect, and which of its passes: each stage switched in turn.

The pipeline, in order: the exporter's translation (torch.onnx), the exporter's optimizer (onnxscript: constant
folding and a set of rewrite rules, `onnx_graph.optimizer_rules`), ONNX Runtime's graph optimizations (a level,
and at each level named passes, `onnx_graph.ort_passes`), and ONNX Runtime's kernels on its execution provider
(the only one here, the CPU's). Where no optimizer makes it, onnx's reference evaluator runs the unoptimized
graph: a second implementation of the same graph, which tells the graph's own computation (the translation) from
ONNX Runtime's kernels.

A symptom is measured on one seed for each pipeline configuration: every output's error from the float64
reference against its noise bound (`engine.outputs.NOISE_FACTOR` times eager float32's own error), and the values ORT
makes non-finite where the reference is finite. The first stage whose removal removes the symptom is the
stage; within it the rules (or passes) are bisected, and a rule is named only where leaving it out alone is
measured to remove the symptom: the proof is that measurement, with the error from float64 with and without it.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import onnx
import torch

from exactness.causes import Stage
from exactness.engine.outputs import NOISE_FACTOR, max_abs, scale_ulp
from exactness.engine.places import REFERENCE, Config, MissingInput, StageProof, Symptom, Trial
from exactness.errors import brief
from exactness.runtimes import onnx_graph
from exactness.runtimes.export_cache import ExportCache
from exactness.studies.discrete_ops import check


def _names(model: onnx.ModelProto, inputs: dict) -> dict:
    return check.graph_named(model, inputs)


class Measure:
    """The symptom of one seed under a configuration; exports go through the cache (keyed by their options)."""

    def __init__(self, built: torch.nn.Module, inputs: dict, dynamic: bool, cache: ExportCache,
                 eager: dict[str, np.ndarray], reference: dict[str, np.ndarray]):
        self.built, self.inputs, self.dynamic, self.cache = built, inputs, dynamic, cache
        self.eager, self.reference = eager, reference
        self.bounds = {name: NOISE_FACTOR * max(max_abs(eager[name], wide), scale_ulp(wide))
                       for name, wide in reference.items() if name in eager}
        self._graphs: dict[onnx_graph.ExportOptions, onnx.ModelProto] = {}
        self.trials: list[Trial] = []

    def graph(self, options: onnx_graph.ExportOptions) -> onnx.ModelProto:
        if options not in self._graphs:
            self._graphs[options] = self.cache.export(self.built, self.inputs, self.dynamic, options).graph \
                .exposing(()).model
        return self._graphs[options]

    def __call__(self, config: Config) -> Symptom:
        model = self.graph(config.export)
        if config.runtime == REFERENCE:
            from onnx.reference import ReferenceEvaluator

            feed = {k: v.numpy() for k, v in _names(model, self.inputs).items()}
            names = [o.name for o in model.graph.output]
            got = dict(zip(names, ReferenceEvaluator(model).run(names, feed), strict=True))
        else:
            graph = onnx_graph.ExportedGraph(model, [o.name for o in model.graph.output])
            got = onnx_graph.OrtRunner(graph, None, optimization=config.level, intra_op_threads=1,
                                       disabled_optimizers=config.disabled).run(_names(model, self.inputs))
        worst = (0.0, 0.0, 0, "")
        nonfinite, errors = 0, []
        for graph_name, value in got.items():
            mine = check.eager_name(graph_name, self.reference)
            if mine is None or mine not in self.bounds:
                continue
            wide = self.reference[mine]
            value = np.asarray(value, np.float64)
            if value.shape != wide.shape:
                return self._keep(config, Symptom(float("inf"), float("inf"), int(wide.size), graph_name))
            bad = int((np.isfinite(wide) & ~np.isfinite(value)).sum())
            nonfinite += bad
            error = max_abs(value, wide)
            over = error / self.bounds[mine] if self.bounds[mine] else (float("inf") if error > 0 else 0.0)
            errors.append((graph_name, error, over))
            if (bad, over) > (worst[2], worst[1]) or not worst[3]:
                worst = (error, over, bad, graph_name)
        return self._keep(config, Symptom(worst[0], worst[1], nonfinite, worst[3], tuple(errors)))

    def _keep(self, config: Config, symptom: Symptom) -> Symptom:
        self.trials.append(Trial(config, symptom))
        return symptom


def bisect(candidates: list[str], absent_without: Callable[[tuple[str, ...]], bool]) -> str:
    """The one candidate whose removal alone makes `absent_without(removed)` true; "" when none alone does.
    Halves the candidates while one half's removal still removes the symptom; the last one is then confirmed
    on its own (a symptom that needs two removed at once is not named)."""
    pool = list(candidates)
    if not pool or not absent_without(tuple(pool)):
        return ""
    while len(pool) > 1:
        half = pool[: len(pool) // 2]
        pool = half if absent_without(tuple(half)) else pool[len(pool) // 2:]
    return pool[0] if absent_without((pool[0],)) else ""


def locate(measure: Measure) -> StageProof:
    """The first stage of the pipeline whose removal removes the symptom, and within it the rule or pass."""
    full = measure(Config())
    if not full.present:
        return StageProof(Stage.NOT_SHOWN, trials=measure.trials)
    unoptimized = measure(Config(level="disabled"))
    if not unoptimized.present:  # the graph as exported is right: ONNX Runtime's rewrites make it
        lowest = next(level for level in ("basic", "extended", "all")
                      if level == "all" or measure(Config(level=level)).present)
        passes = onnx_graph.ort_passes(measure.graph(onnx_graph.DEFAULT_EXPORT), lowest)
        name = bisect(passes, lambda off: not measure(Config(disabled=off)).present)
        proof = StageProof(Stage.ORT_OPTIMIZER, name, full, candidates=len(passes), level=lowest)
        below = onnx_graph.LEVEL_BELOW[lowest]
        proof.without = Config(disabled=(name,)) if name else Config(level=below)
        proof.without_pass = measure(proof.without)
        proof.trials = measure.trials
        return proof
    plain = onnx_graph.ExportOptions(optimize=False)
    bare = measure(Config(plain, level="disabled"))
    if bare.present:  # no optimizer makes it: the graph itself, or ORT's kernels running it
        proof = StageProof(Stage.UNSEPARATED, "", full, bare, Config(plain, level="disabled"))
        try:
            proof.reference = measure(Config(plain, runtime=REFERENCE))
            proof.stage = Stage.TRANSLATION if proof.reference.present else Stage.ORT_KERNELS
        except Exception as error:  # an op the evaluator lacks: the two stay unseparated, and the proof says so
            proof.reference_error = brief(error)
        proof.trials = measure.trials
        return proof
    rules = [name for name, _ in onnx_graph.optimizer_rules()]
    name = bisect(rules, lambda off: not measure(Config(onnx_graph.ExportOptions(rules_off=off))).present)
    proof = StageProof(Stage.EXPORT_OPTIMIZER, name, full, candidates=len(rules))
    proof.without = Config(onnx_graph.ExportOptions(rules_off=(name,))) if name else Config(plain)
    proof.without_pass = measure(proof.without)
    proof.trials = measure.trials
    return proof


_CALL = re.compile(r"target=torch\.ops\.([\w.]+)\]\(args = \((.*)\), kwargs")


def traced_call(node: onnx.NodeProto) -> tuple[str, list[str]] | None:
    """(aten op, the value names its traced call read) from the node's metadata; None without one."""
    raw = {p.key: p.value for p in node.metadata_props}.get(onnx_graph.FX_NODE_KEY, "")
    found = _CALL.search(raw)
    if not found:
        return None
    return found.group(1), re.findall(r"%(\w+)", found.group(2))


def _computed(model: onnx.ModelProto) -> set[str]:
    graph = model.graph
    return ({v.name for v in graph.input} | {t.name for t in graph.initializer}
            | {o for n in graph.node for o in n.output})


def _producer(model: onnx.ModelProto, name: str) -> tuple[str, tuple[str | float, ...]]:
    """How `model` computes `name`: its node's op and inputs, a scalar constant input as its value ("", () where
    no node makes it)."""
    constants = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Constant":
            for attribute in node.attribute:
                if attribute.name == "value":
                    constants[node.output[0]] = onnx.numpy_helper.to_array(attribute.t)
    for node in model.graph.node:
        if name in node.output:
            read = [i for i in node.input if i]  # "": an optional input left out
            return node.op_type, tuple(constants[i].reshape(-1)[0].item() if i in constants and constants[i].size == 1
                                       else i for i in read)
    return "", ()


def missing_inputs(model: onnx.ModelProto, node_name: str, unoptimized: onnx.ModelProto | None = None
                   ) -> MissingInput | None:
    """Whether `node_name`'s traced call reads a value `model` no longer computes (a node an optimizer removed)."""
    node = next((n for n in model.graph.node if n.name == node_name), None)
    traced = traced_call(node) if node is not None else None
    if traced is None:
        return None
    op, args = traced
    computed = _computed(model)
    for position, arg in enumerate(args):
        if arg in computed:
            continue
        # the traced call's arguments line up with the node's inputs only when they are as many
        reads = node.input[position] if len(args) == len(node.input) else ""
        was_op, was_args = _producer(unoptimized, arg) if unoptimized is not None else ("", ())
        return MissingInput(node.name, node.op_type, op.split(".")[1] if "." in op else op, tuple(args), arg, reads,
                            was_op, was_args)
    return None
