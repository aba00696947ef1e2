"""Export with transformers' own ONNX exporter (as the export test does) and expose intermediates.

Every node the exporter writes carries the torch module scopes it came from
(`pkg.torch.onnx.name_scopes`); the last node under a module's scope produces that module's output. Those
values are added as graph outputs, so one ORT run returns every module's output next to the model's own
outputs. No node is found by a hard-coded name.
"""

from __future__ import annotations

import ast
import contextlib
import io
import logging
import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import torch

SCOPES_KEY = "pkg.torch.onnx.name_scopes"
# Quantizer internals that are not module outputs: (label, op type) of the node inside `quantizer`.
QUANTIZER_OPS = {"quantizer.argmax": "ArgMax", "quantizer.one_hot": "ScatterElements"}


@dataclass
class ExportedGraph:
    model: onnx.ModelProto
    outputs: list[str]  # the model's own outputs, in order
    intermediates: dict[str, str] = field(default_factory=dict)  # module path or label -> graph value name
    export_seconds: float = 0.0

    def initializer_arrays(self) -> dict[str, np.ndarray]:
        return {t.name: onnx.numpy_helper.to_array(t) for t in self.model.graph.initializer}

    def exposing(self, labels) -> ExportedGraph:
        """The same graph exposing only its own outputs and the intermediates in `labels`. Exposing a value
        can keep ORT from fusing the nodes around it, which moves other outputs by an ulp: with every module
        exposed, two classes' `projected_states` differ from the export test's graph; a graph exposing a
        few values is checked against the bare graph before its numbers are used (`GraphPool`)."""
        kept = {label: name for label, name in self.intermediates.items() if label in labels}
        names = set(self.outputs) | set(kept.values())
        model = onnx.ModelProto()
        model.CopyFrom(self.model)
        outputs = [o for o in model.graph.output if o.name in names]
        del model.graph.output[:]
        model.graph.output.extend(outputs)
        return ExportedGraph(model, self.outputs, kept, self.export_seconds)


def export(model: torch.nn.Module, inputs: dict[str, torch.Tensor], dynamic: bool, quiet: bool = True) -> ExportedGraph:
    from transformers.exporters.exporter_onnx import OnnxConfig, OnnxExporter

    began = time.monotonic()
    with _quiet() if quiet else contextlib.nullcontext():
        exported = OnnxExporter().export(model, inputs, config=OnnxConfig(dynamic=dynamic, optimize=True))
    program: ir.Model = exported.program
    outputs = [v.name for v in program.graph.outputs]
    intermediates = expose_intermediates(program)
    return ExportedGraph(ir.to_proto(program), outputs, intermediates, time.monotonic() - began)


@contextlib.contextmanager
def _quiet():
    # The exporter prints progress and version-drift notes; a sweep exporting many graphs would drown in them.
    sink = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        warnings.simplefilter("ignore")
        previous = logging.root.manager.disable
        logging.disable(logging.WARNING)
        try:
            yield
        finally:
            logging.disable(previous)


def node_modules(node: ir.Node) -> list[str]:
    """The module paths a node sits under, outermost first ('' is the root module)."""
    raw = node.metadata_props.get(SCOPES_KEY)
    if not raw:
        return []
    scopes = ast.literal_eval(raw)
    return [s for s in scopes[:-1] if s]  # the last entry names the node itself


def expose_intermediates(program: ir.Model) -> dict[str, str]:
    """Add every module's output (and the quantizer's argmax and one-hot) as graph outputs; return
    label -> value name, in the order the graph computes them (the depth of each tensor)."""
    graph = program.graph
    last: dict[str, tuple[int, ir.Value]] = {}
    special: dict[str, tuple[int, ir.Value]] = {}
    for position, node in enumerate(graph):  # graph order is topological: a later node under a scope wins
        modules = node_modules(node)
        for module in modules:
            if node.outputs:
                last[module] = (position, node.outputs[0])
        if modules and modules[-1] == "quantizer":
            for label, op_type in QUANTIZER_OPS.items():
                if node.op_type == op_type and label not in special:
                    special[label] = (position, node.outputs[0])
    exposed = sorted({**last, **special}.items(), key=lambda item: item[1][0])
    existing = {v.name for v in graph.outputs}
    for _, (_, value) in exposed:
        if value.name not in existing:
            graph.outputs.append(value)
            existing.add(value.name)
    return {label: value.name for label, (_, value) in exposed}


class OrtRunner:
    """An ONNX Runtime CPU session over an exported graph, returning every exposed value by name."""

    def __init__(self, graph: ExportedGraph, initializers: dict[str, np.ndarray] | None = None,
                 optimization: str = "all", intra_op_threads: int = 0, defect: dict | None = None):
        model = graph.model
        if initializers or defect:
            model = with_initializers(model, initializers or {})
        if defect:
            from exactness.runtimes.defects import inject

            self.defect = inject(model, **defect)
        self.graph = graph
        self.session = ort.InferenceSession(model.SerializeToString(), session_options(optimization, intra_op_threads),
                                            providers=["CPUExecutionProvider"])
        self.names = [o.name for o in self.session.get_outputs()]

    def run(self, inputs: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
        feed = {i.name: inputs[i.name].numpy() for i in self.session.get_inputs()}
        return dict(zip(self.names, self.session.run(self.names, feed), strict=True))


def session_options(optimization: str = "all", intra_op_threads: int = 0) -> ort.SessionOptions:
    options = ort.SessionOptions()
    options.graph_optimization_level = {
        "disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }[optimization]
    options.intra_op_num_threads = intra_op_threads
    options.log_severity_level = 3
    return options


def with_initializers(model: onnx.ModelProto, arrays: dict[str, np.ndarray]) -> onnx.ModelProto:
    swapped = onnx.ModelProto()
    swapped.CopyFrom(model)
    for tensor in swapped.graph.initializer:
        if tensor.name in arrays:
            # np.ascontiguousarray would turn a 0-d array into shape (1,)
            tensor.CopyFrom(onnx.numpy_helper.from_array(np.array(arrays[tensor.name], order="C"), tensor.name))
    return swapped
