"""Find the discrete choices in an exported ONNX graph and the outputs each one reaches by data flow.

A discrete op turns values into a choice: ArgMax/ArgMin, TopK (which is also how a sort exports), NonZero,
Round/Floor/Ceil feeding an integer Cast, a comparison (Greater, Less, Equal, ...) whose boolean feeds a
Where or a mask, and any Random*/Bernoulli/Multinomial node. Such a choice can flip between runtimes only
when what it reads is float arithmetic that may round differently. So every op that is not a random draw
says why it does not count (`not_counted`, "" when it counts):

- it reads no float computed from the weights or float inputs: integer ids, an attention mask or positions
  cast to float (`INTEGER_ONLY`);
- it reads only integer-valued data decided by another choice: a count of a comparison's booleans, a one-hot
  of an argmax (`FOLLOWS_CHOICE`). Float data flows only through float values; a boolean or an index breaks
  it, so such an op flips only when the choice it follows does, and that choice is scanned on its own;
- it compares with the float32 extreme (+-3.4e38 or +-inf), the value a mask writes into masked positions
  (`MASK_SENTINEL`): its ties are exactly the masked positions, which the mask decides, and no finite
  computation of these models comes within rounding of it.

Nodes inside subgraphs (If/Loop bodies) are not scanned.
"""

from __future__ import annotations

import ast
import re
from collections import deque
from dataclasses import dataclass, field

import numpy as np
import onnx

SCOPES_KEY = "pkg.torch.onnx.name_scopes"
FX_NODE_KEY = "pkg.torch.onnx.fx_node"
CATEGORIES = {
    "ArgMax": "argmax", "ArgMin": "argmin", "TopK": "topk", "NonZero": "nonzero",
    "Greater": "compare", "Less": "compare", "GreaterOrEqual": "compare", "LessOrEqual": "compare", "Equal": "compare",
    "Round": "rounding", "Floor": "rounding", "Ceil": "rounding",
    "RandomNormal": "random", "RandomNormalLike": "random", "RandomUniform": "random", "RandomUniformLike": "random",
    "Bernoulli": "random", "Multinomial": "random",
}
FLOAT_TYPES = {onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16}
INTEGER_TYPES = {onnx.TensorProto.INT8, onnx.TensorProto.INT16, onnx.TensorProto.INT32, onnx.TensorProto.INT64,
                 onnx.TensorProto.UINT8, onnx.TensorProto.UINT16, onnx.TensorProto.UINT32, onnx.TensorProto.UINT64}
INTEGER_ONLY = "reads only integer inputs and constants (ids, masks, positions)"
FOLLOWS_CHOICE = "reads integer-valued data decided by another discrete op (a count, cast or index of its choice)"
MASK_SENTINEL = "compares with the mask value {value:.3g}: its ties are the masked positions"
FLOAT32_MAX = float(np.finfo(np.float32).max)
DISCRETE_TYPES = INTEGER_TYPES | {onnx.TensorProto.BOOL}  # a value of unknown type is taken to be float
_FX_TARGET = re.compile(r"target=([\w.]+)\]")
_FX_NAME = re.compile(r"^%(\w+)")


@dataclass
class DiscreteOp:
    node: str  # the ONNX node's name
    index: int  # its position in the graph (topological order)
    op_type: str
    category: str  # argmax, argmin, topk, nonzero, compare, rounding, random
    scope: str  # the innermost torch module it came from ("" for the root module)
    aten: str  # the torch op it was exported from (aten.topk.default), "" when the graph does not say
    fx_name: str  # the traced node's name (topk_1): its order among that op's calls in the forward
    inputs: list[str]
    outputs: list[str]
    consumers: list[str] = field(default_factory=list)  # op types reading its first output
    reaches_outputs: list[str] = field(default_factory=list)
    weight_dependent: bool = True  # reads float values computed from weights or float inputs
    not_counted: str = ""  # why it cannot flip on its own (INTEGER_ONLY, FOLLOWS_CHOICE, MASK_SENTINEL); "" counts

    @property
    def on_output_path(self) -> bool:
        return bool(self.reaches_outputs)

    @property
    def can_flip(self) -> bool:
        """A choice two runtimes may make differently on their own: random, or read from float arithmetic."""
        return self.category == "random" or not self.not_counted


def node_scope(node: onnx.NodeProto) -> str:
    for prop in node.metadata_props:
        if prop.key == SCOPES_KEY:
            scopes = [s for s in ast.literal_eval(prop.value)[:-1] if s]  # the last entry names the node itself
            return scopes[-1] if scopes else ""
    return ""


def fx_target(node: onnx.NodeProto) -> tuple[str, str]:
    """(aten op, traced node name) from the exporter's metadata, ("", "") where it has none."""
    for prop in node.metadata_props:
        if prop.key == FX_NODE_KEY:
            target, name = _FX_TARGET.search(prop.value), _FX_NAME.search(prop.value)
            aten = target.group(1).removeprefix("torch.ops.") if target else ""
            return aten, (name.group(1) if name else "")
    return "", ""


def value_types(model: onnx.ModelProto) -> dict[str, int]:
    """Element type of every value: graph inputs and outputs, initializers, and inferred intermediates."""
    inferred = onnx.shape_inference.infer_shapes(model)
    graph = inferred.graph
    types = {v.name: v.type.tensor_type.elem_type for v in [*graph.input, *graph.output, *graph.value_info]}
    types.update({t.name: t.data_type for t in graph.initializer})
    return types


def _consumers(graph: onnx.GraphProto) -> dict[str, list[int]]:
    readers: dict[str, list[int]] = {}
    for i, node in enumerate(graph.node):
        for name in node.input:
            if name:
                readers.setdefault(name, []).append(i)
    return readers


def reachable_outputs(graph: onnx.GraphProto, start: list[str],
                      readers: dict[str, list[int]] | None = None) -> list[str]:
    """The graph outputs that depend on any value in `start`, in the graph's output order."""
    readers = readers if readers is not None else _consumers(graph)
    seen, queue = set(start), deque(start)
    while queue:
        for i in readers.get(queue.popleft(), []):
            for name in graph.node[i].output:
                if name and name not in seen:
                    seen.add(name)
                    queue.append(name)
    return [o.name for o in graph.output if o.name in seen]


def _float_sources(graph: onnx.GraphProto, types: dict[str, int]) -> set[str]:
    """Float graph inputs and float initializers of more than one element (weights, not scalar constants)."""
    sources = {i.name for i in graph.input if types.get(i.name) in FLOAT_TYPES}
    return sources | {t.name for t in graph.initializer if t.data_type in FLOAT_TYPES and _numel(t) > 1}


def _dependent_values(graph: onnx.GraphProto, types: dict[str, int], float_only: bool) -> set[str]:
    """Values computed (by data flow) from the float sources. `float_only`: the flow passes only through
    float values, so a boolean, an index or an integer cast stops it: what is computed from those is
    integer-valued even when stored as float."""
    tainted = _float_sources(graph, types)
    for node in graph.node:  # topological order: one pass suffices
        if any(name in tainted for name in node.input):
            tainted.update(o for o in node.output if o and (not float_only or types.get(o) not in DISCRETE_TYPES))
    return tainted


def constant_values(graph: onnx.GraphProto) -> dict[str, np.ndarray]:
    values = {t.name: onnx.numpy_helper.to_array(t) for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant":
            for attribute in node.attribute:
                if attribute.name == "value":
                    values[node.output[0]] = onnx.numpy_helper.to_array(attribute.t)
    return values


def mask_sentinel(node: onnx.NodeProto, constants: dict[str, np.ndarray]) -> float | None:
    """The float32 extreme (+-max or +-inf) a comparison tests against, None when it has none."""
    for name in node.input:
        value = constants.get(name)
        if value is not None and value.size and value.dtype.kind == "f":
            flat = np.asarray(value, dtype=np.float64).reshape(-1)
            if np.all(flat == flat[0]) and abs(flat[0]) >= FLOAT32_MAX:
                return float(flat[0])
    return None


def _numel(tensor: onnx.TensorProto) -> int:
    n = 1
    for d in tensor.dims:
        n *= d
    return n


def _feeds_integer_cast(graph: onnx.GraphProto, value: str, readers: dict[str, list[int]]) -> bool:
    for i in readers.get(value, []):
        node = graph.node[i]
        if node.op_type == "Cast" and any(a.name == "to" and a.i in INTEGER_TYPES for a in node.attribute):
            return True
    return False


def _not_counted(op: DiscreteOp, node: onnx.NodeProto, anything: set[str], constants: dict) -> str:
    if op.category == "random":
        return ""
    if not op.weight_dependent:
        return FOLLOWS_CHOICE if any(name in anything for name in node.input if name) else INTEGER_ONLY
    if op.category == "compare":
        sentinel = mask_sentinel(node, constants)
        if sentinel is not None:
            return MASK_SENTINEL.format(value=sentinel)
    return ""


def scan(model: onnx.ModelProto) -> list[DiscreteOp]:
    """Every discrete op of the graph, in graph order, with the graph outputs it reaches."""
    graph = model.graph
    types = value_types(model)
    readers = _consumers(graph)
    floats = _dependent_values(graph, types, float_only=True)
    anything = _dependent_values(graph, types, float_only=False)
    constants = constant_values(graph)
    found = []
    for index, node in enumerate(graph.node):
        category = CATEGORIES.get(node.op_type)
        if category is None:
            continue
        if category == "rounding" and not _feeds_integer_cast(graph, node.output[0], readers):
            continue
        if category == "compare" and not any(types.get(name) in FLOAT_TYPES for name in node.input):
            continue  # integer comparisons are exact on every runtime
        aten, fx_name = fx_target(node)
        op = DiscreteOp(node.name, index, node.op_type, category, node_scope(node), aten, fx_name,
                        list(node.input), [o for o in node.output if o])
        op.consumers = [graph.node[i].op_type for i in readers.get(node.output[0], [])]
        op.reaches_outputs = reachable_outputs(graph, op.outputs, readers)
        op.weight_dependent = any(name in floats for name in node.input if name)
        op.not_counted = _not_counted(op, node, anything, constants)
        found.append(op)
    return found


def exposing(model: onnx.ModelProto, names: list[str], types: dict[str, int] | None = None) -> onnx.ModelProto:
    """A copy of `model` that also returns the values in `names` (graph inputs and initializers excluded:
    they are known without running)."""
    types = types if types is not None else value_types(model)
    fixed = {i.name for i in model.graph.input} | {t.name for t in model.graph.initializer}
    exposed = onnx.ModelProto()
    exposed.CopyFrom(model)
    present = {o.name for o in exposed.graph.output}
    for name in names:
        if name and name not in present and name not in fixed:
            if name not in types:
                raise KeyError(f"value {name!r} has no known type; it cannot be exposed")
            exposed.graph.output.append(onnx.helper.make_tensor_value_info(name, types[name], None))
            present.add(name)
    return exposed
