"""Export with transformers' own ONNX exporter (as the export test does) and expose intermediates.

Every node the exporter writes carries the torch module scopes it came from
(`pkg.torch.onnx.name_scopes`); the last node under a module's scope produces that module's output. Those
values are added as graph outputs, so one ORT run returns every module's output next to the model's own
outputs. No node is found by a hard-coded name.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import io
import logging
import os
import pkgutil
import re
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from importlib import metadata

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import torch

SCOPES_KEY = "pkg.torch.onnx.name_scopes"
FX_NODE_KEY = "pkg.torch.onnx.fx_node"  # the traced call a node was translated from: `%div_8 : ... (args = (%a, %b))`
PROVIDER = "CPUExecutionProvider"
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


@dataclass(frozen=True)
class ExportOptions:
    """What the exporter is asked for: its optimizer on or off, and which of the optimizer's rewrite rules
    (`optimizer_rules` names them) are left out. The default is what the export test asks for."""

    optimize: bool = True
    rules_off: tuple[str, ...] = ()

    def as_key(self) -> dict:
        return {"exporter": "transformers OnnxExporter", "optimize": self.optimize, "rules_off": list(self.rules_off)}

    def __str__(self) -> str:
        if not self.optimize:
            return "optimize=False"
        if not self.rules_off:
            return "optimize=True"
        return f"optimize=True without rule{'s' if len(self.rules_off) > 1 else ''} {', '.join(self.rules_off)}"


def optimizer_rules() -> list[tuple[str, object]]:
    """The rewrite rules onnxscript's optimizer applies (`onnxscript.rewriter._DEFAULT_REWRITE_RULES`), each
    with a name that stays the same across processes: the rule module it comes from, its place in that module's
    rule set, and its own name or, for an anonymous rule, the pattern it matches (`no_op[2] Add(x, 0)`)."""
    from onnxscript.rewriter.rules import common

    from exactness.compat import onnxscript_rewriter

    rewriter = onnxscript_rewriter()
    owners: dict[int, tuple[str, int]] = {}
    for info in pkgutil.iter_modules(common.__path__):
        module = importlib.import_module(f"{common.__name__}.{info.name}")
        for index, rule in enumerate(getattr(getattr(module, "rules", None), "rules", ()) or ()):
            owners.setdefault(id(rule), (info.name.lstrip("_"), index))
    named = []
    for position, rule in enumerate(rewriter._DEFAULT_REWRITE_RULES):
        module, index = owners.get(id(rule), ("rule", position))
        named.append((f"{module}[{index}] {rule.name or _pattern_words(rule)}", rule))
    return named


def _pattern_words(rule) -> str:
    """An anonymous rule's pattern: `Add(x, 0)` for one node, else its op types in order."""
    from exactness.compat import rule_pattern

    lines = [line.strip() for line in rule_pattern(rule).splitlines()]
    nodes = [re.sub(r"^\S+ = ", "", line) for line in lines if " = " in line]
    nodes = [re.sub(r"anonymous:\d+", "_", node).replace(" (", "(") for node in nodes]
    if len(nodes) == 1:
        return nodes[0]
    return " -> ".join(node.split("(")[0] for node in nodes) or "pattern"


class _NoRewrite:
    """Stands in for onnxscript's `RewritePass` when every rule is left out (it refuses an empty rule set)."""

    in_place = True

    def __init__(self, rules):
        pass

    def __call__(self, model):
        import onnx_ir.passes as passes

        return passes.PassResult(model, modified=False)


@contextlib.contextmanager
def _rules(options: ExportOptions):
    """onnxscript's optimizer without the rules `options` leaves out (the optimizer reads its rule set, and the
    pass it builds from it, from the module when it runs)."""
    if not options.optimize or not options.rules_off:
        yield
        return
    from exactness.compat import onnxscript_rewriter

    rewriter = onnxscript_rewriter()
    named = optimizer_rules()
    unknown = set(options.rules_off) - {name for name, _ in named}
    if unknown:
        raise ValueError(f"no such optimizer rule: {', '.join(sorted(unknown))} (this onnxscript has {len(named)})")
    kept = tuple(rule for name, rule in named if name not in options.rules_off)
    saved = rewriter._DEFAULT_REWRITE_RULES, rewriter.RewritePass
    rewriter._DEFAULT_REWRITE_RULES = kept
    if not kept:
        rewriter.RewritePass = _NoRewrite
    try:
        yield
    finally:
        rewriter._DEFAULT_REWRITE_RULES, rewriter.RewritePass = saved


DEFAULT_EXPORT = ExportOptions()


def export(model: torch.nn.Module, inputs: dict[str, torch.Tensor], dynamic: bool, quiet: bool = True,
           options: ExportOptions = DEFAULT_EXPORT) -> ExportedGraph:
    from transformers.exporters.exporter_onnx import OnnxConfig, OnnxExporter

    began = time.monotonic()
    with _quiet() if quiet else contextlib.nullcontext(), _rules(options):
        try:
            exported = OnnxExporter().export(model, inputs,
                                             config=OnnxConfig(dynamic=dynamic, optimize=options.optimize))
        except TypeError as error:
            named = _namedtuple_output(error)
            if named is None:
                raise
            raise UnexportableOutputError(
                f"the model returns a namedtuple ({named}), which transformers {metadata.version('transformers')}'s "
                "OnnxExporter cannot rebuild (exporters/utils.py calls the tuple's type on a generator): return a "
                "dict or a plain tuple from forward") from error
    program: ir.Model = exported.program
    outputs = [v.name for v in program.graph.outputs]
    intermediates = expose_intermediates(program)
    return ExportedGraph(ir.to_proto(program), outputs, intermediates, time.monotonic() - began)


class UnexportableOutputError(TypeError):
    """The model's output is a container the exporter cannot rebuild; the message names it and the fix."""


def _namedtuple_output(error: TypeError) -> str | None:
    """The namedtuple type transformers' exporter failed to rebuild (it calls `type(obj)(generator)`, which a
    namedtuple refuses), read from the failing frame; None for any other TypeError."""
    tb = error.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        held = frame.f_locals.get("obj")
        if frame.f_code.co_name == "_map_leaf_tensors" and isinstance(held, tuple) and hasattr(held, "_fields"):
            return type(held).__name__
        tb = tb.tb_next
    return None


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
                 optimization: str = "all", intra_op_threads: int = 0, defect: dict | None = None,
                 disabled_optimizers: tuple[str, ...] = ()):
        model = graph.model
        if initializers or defect:
            model = with_initializers(model, initializers or {})
        if defect:
            from exactness.runtimes.defects import inject

            self.defect = inject(model, **defect)
        self.graph = graph
        # ONNX Runtime ignores a name it does not know: a disabled pass is shown to matter only by what changes
        extra = {"disabled_optimizers": list(disabled_optimizers)} if disabled_optimizers else {}
        self.session = ort.InferenceSession(model.SerializeToString(), session_options(optimization, intra_op_threads),
                                            providers=[PROVIDER], **extra)
        self.names = [o.name for o in self.session.get_outputs()]

    def run(self, inputs: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
        feed = {i.name: inputs[i.name].numpy() for i in self.session.get_inputs()}
        return dict(zip(self.names, self.session.run(self.names, feed), strict=True))


LEVELS = ("disabled", "basic", "extended", "all")  # ORT's graph optimization levels, in order
LEVEL_BELOW = dict(zip(LEVELS[1:], LEVELS[:-1], strict=True))


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


# The rules inside ONNX Runtime's level-1 rule-based transformer (`GenerateRewriteRules`, onnxruntime
# core/optimizer/graph_transformer_utils.cc, 1.31): the session's log names the transformer, never its rules.
# Each is a name `disabled_optimizers` takes; a name ORT does not know is ignored, so a pass is named only where
# disabling it alone is measured to remove a difference.
LEVEL1_RULES = ("EliminateIdentity", "EliminateSlice", "UnsqueezeElimination", "EliminateDropout",
                "ExpandElimination", "CastElimination", "PreShapeNodeElimination", "NoopElimination", "DivMulFusion",
                "FuseReluClip", "GemmSumFusion", "GemmTransposeFusion", "NotWhereFusion", "ConvAddFusion",
                "ConvMulFusion", "ConvBNFusion", "Pad_Fusion", "LabelEncoderFusion")
_MODIFIED = re.compile(r"GraphTransformer (\S+) modified: (\d+)")


def ort_passes(model: onnx.ModelProto, optimization: str) -> list[str]:
    """The named passes ONNX Runtime applies to `model` at `optimization` and that change it, from the session's
    verbose log (written to the process's stderr, read back from a temporary file); a rule-based transformer
    stands for its rules (`LEVEL1_RULES`)."""
    options = session_options(optimization, 1)
    options.log_severity_level, options.log_verbosity_level = 0, 1
    saved = os.dup(2)
    with tempfile.TemporaryFile() as log:
        os.dup2(log.fileno(), 2)
        try:
            ort.InferenceSession(model.SerializeToString(), options, providers=[PROVIDER])
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        log.seek(0)
        text = log.read().decode(errors="replace")
    found: list[str] = []
    for name, modified in _MODIFIED.findall(text):
        if int(modified) and name not in found:
            found.append(name)
    passes: list[str] = []
    for name in found:
        passes.extend(LEVEL1_RULES if name == "Level1_RuleBasedTransformer" else (name,))
    return list(dict.fromkeys(passes))
