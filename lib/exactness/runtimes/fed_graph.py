"""One ONNX Runtime session for every seed: the swapped weights become graph inputs.

Building a session costs 30-60 ms for these small graphs (more than running it), and a weight swap with
constant initializers needs one per seed. Fed as inputs instead of initializers, the weights reach the same kernels,
with one exception: ORT pre-packs a MatMul's constant right-hand side, and the packed path rounds some
shapes differently (measured: the quantizer's `project_q`, K = 256, agrees once pre-packing is turned
off; a lone MatMul differs for K = 300 and 512 but not 256, so which shapes differ is measured here, not
assumed). So the graph is split: the nodes that round differently when fed (found by comparing every
value, fed against constant, on a learning seed) and everything downstream of them form a small *tail*
that still gets its weights as constants, in a session built per seed (a few nodes: about a
millisecond); the rest, the *head*, runs in one session built once per process. The split is then
verified bit for bit against the per-seed session on two seeds; anything it cannot reproduce makes
`learn` fail, and callers keep building a session per seed.

Fast path (`exactness.runtimes.speedup_paths`, switched off by `fast_paths: false`; a check row's `session_path`):
- replaces: an ORT session built for each seed's swapped graph;
- exact because: fed weights reach the same kernels, except where measured otherwise: those nodes and all
  after them keep constant weights in the per-seed tail;
- verified by: `learn` on two seeds against per-seed sessions (or refused: `GraphPool.fed_state`),
  tests/runtimes/test_fed_graph.py and tests/studies/near_tie/test_near_tie_paths.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper

from exactness.runtimes.onnx_graph import ExportedGraph, OrtRunner, session_options, with_initializers


class FedError(RuntimeError):
    pass


# The session options `learn` verifies under. Other optimisation levels fuse, fold and pre-pack other
# nodes, so the split found here says nothing about them: callers build a session per seed for those.
VERIFIED_OPTIONS = {"optimization": "all", "intra_op_threads": 1}


def verified_for(options: dict) -> bool:
    """Whether `OrtRunner` options (defaults: optimisation "all", ORT's own thread count) are the verified ones."""
    return {"optimization": "all", "intra_op_threads": 0, **options} == VERIFIED_OPTIONS


def _all_values_exposed(model: onnx.ModelProto) -> onnx.ModelProto:
    exposed = onnx.ModelProto()
    exposed.CopyFrom(model)
    existing = {o.name for o in exposed.graph.output}
    for node in exposed.graph.node:
        for name in node.output:
            if name and name not in existing:
                exposed.graph.output.append(onnx.ValueInfoProto(name=name))
                existing.add(name)
    return exposed


def _as_inputs(model: onnx.ModelProto, names: set[str]) -> onnx.ModelProto:
    """The model with the initializers in `names` turned into graph inputs of the same type and shape."""
    fed = onnx.ModelProto()
    fed.CopyFrom(model)
    moved = [t for t in fed.graph.initializer if t.name in names]
    kept = [t for t in fed.graph.initializer if t.name not in names]
    del fed.graph.initializer[:]
    fed.graph.initializer.extend(kept)
    fed.graph.input.extend(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in moved)
    return fed


def _session(model: onnx.ModelProto, options: dict) -> ort.InferenceSession:
    return ort.InferenceSession(model.SerializeToString(), session_options(**options),
                                providers=["CPUExecutionProvider"])


def _run(session: ort.InferenceSession, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    names = [o.name for o in session.get_outputs()]
    feed = {i.name: values[i.name] for i in session.get_inputs()}
    return dict(zip(names, session.run(names, feed), strict=True))


def _rounding_differently(model: onnx.ModelProto, weights: dict[str, np.ndarray], inputs: dict[str, np.ndarray],
                          constant: dict[str, np.ndarray]) -> set[int]:
    """Indices of the nodes whose output differs, fed against constant weights (`constant`: every value of
    the constant run), although every input they read is equal: where the two sessions' kernels part ways."""
    fed = _run(_session(_as_inputs(_all_values_exposed(model), set(weights)), VERIFIED_OPTIONS), {**inputs, **weights})
    differs = {name for name, value in constant.items() if not np.array_equal(value, fed[name], equal_nan=True)}
    return {i for i, node in enumerate(model.graph.node)
            if set(node.output) & differs and not set(node.input) & differs}


def _downstream(model: onnx.ModelProto, start: set[int]) -> list[int]:
    produced_in_tail: set[str] = set()
    tail = []
    for i, node in enumerate(model.graph.node):  # graph order is topological
        if i in start or set(node.input) & produced_in_tail:
            if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute):
                raise FedError(f"node {node.name!r} ({node.op_type}) with a subgraph would fall in the tail")
            tail.append(i)
            produced_in_tail.update(node.output)
    return tail


@dataclass
class FedGraph:
    """The head (weights fed, one session per process) and the tail (weights constant, a session per seed)."""

    graph: ExportedGraph  # the template: its output names are what a run returns
    head: onnx.ModelProto
    tail: onnx.ModelProto | None  # None: every node rounds alike fed
    rewritten: bool = False  # head and tail come from `learn`'s rewrite of the graph, not the graph itself
    _head_session: ort.InferenceSession | None = field(default=None, repr=False)

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_head_session": None}  # sessions do not pickle; each process builds its own

    def runner(self, weights: dict[str, np.ndarray], **options) -> FedRunner:
        if not verified_for(options):
            raise FedError(f"session options {options} were not verified (only {VERIFIED_OPTIONS})")
        if self._head_session is None:
            self._head_session = _session(self.head, VERIFIED_OPTIONS)
        tail = None if self.tail is None else _session(with_initializers(self.tail, weights), VERIFIED_OPTIONS)
        return FedRunner(self.graph, self._head_session, tail, dict(weights))


class FedRunner:
    """The same interface as `OrtRunner`: `graph` and `run(inputs)` with every exposed value by name."""

    def __init__(self, graph: ExportedGraph, head: ort.InferenceSession, tail: ort.InferenceSession | None,
                 weights: dict[str, np.ndarray]):
        self.graph, self.head, self.tail, self.weights = graph, head, tail, weights
        self.names = [o.name for o in graph.model.graph.output]

    def run(self, inputs) -> dict[str, np.ndarray]:
        values = {**{k: v.numpy() for k, v in inputs.items()}, **self.weights}
        values.update(_run(self.head, values))
        if self.tail is not None:
            values.update(_run(self.tail, values))
        return {name: values[name] for name in self.names}


def _split(model: onnx.ModelProto, tail_nodes: list[int], swapped: set[str],
           types: dict[str, int]) -> tuple[onnx.ModelProto, onnx.ModelProto | None]:
    """(head, tail): the head takes the swapped weights it reads as inputs and also returns the values the
    tail reads (`boundary`); the tail keeps its weights as initializers, to be replaced per seed."""
    if not tail_nodes:
        return _as_inputs(model, swapped), None
    graph = model.graph
    in_tail = set(tail_nodes)
    head_nodes = [n for i, n in enumerate(graph.node) if i not in in_tail]
    tail_list = [graph.node[i] for i in tail_nodes]
    made_in_tail = {o for n in tail_list for o in n.output}
    initializers = {t.name for t in graph.initializer}
    inputs = {i.name for i in graph.input}
    boundary = list(dict.fromkeys(i for n in tail_list for i in n.input
                                  if i and i not in made_in_tail and i not in initializers))
    # the tail declares what the whole graph declared (symbolic shapes included), so ORT optimises it alike
    declared = {v.name: v for v in [*graph.value_info, *graph.input, *graph.output]
                if v.type.tensor_type.elem_type}

    def declaration(name: str) -> onnx.ValueInfoProto:
        return declared.get(name) or helper.make_tensor_value_info(name, types[name], None)

    head = _subgraph(model, head_nodes)
    head.graph.output.extend(declaration(b) for b in boundary if b not in inputs)
    head = _as_inputs(head, swapped)
    tail = _subgraph(model, tail_list)
    del tail.graph.input[:]
    tail.graph.input.extend(declaration(b) for b in boundary)
    return head, tail


def _subgraph(model: onnx.ModelProto, nodes: list[onnx.NodeProto]) -> onnx.ModelProto:
    """The model restricted to `nodes`: the initializers they read, the outputs they make."""
    part = onnx.ModelProto()
    part.CopyFrom(model)
    graph = part.graph
    used = {i for n in nodes for i in n.input}
    made = {o for n in nodes for o in n.output}
    kept_initializers = [t for t in graph.initializer if t.name in used]
    kept_outputs = [o for o in graph.output if o.name in made]
    kept_info = [v for v in graph.value_info if v.name in made or v.name in used]
    del graph.node[:], graph.initializer[:], graph.output[:], graph.value_info[:]
    graph.node.extend(nodes)
    graph.initializer.extend(kept_initializers)
    graph.output.extend(kept_outputs)
    graph.value_info.extend(kept_info)
    return part


def learn(graph: ExportedGraph, seeds: list[tuple[dict[str, np.ndarray], dict]],
          rewrite: Callable[[onnx.ModelProto], onnx.ModelProto | None] | None = None) -> FedGraph:
    """`seeds`: (swapped weights, inputs as torch tensors) for two seeds; the first also finds the nodes
    that round differently when fed. `rewrite`: a graph that computes the same values faster (None: no
    such rewrite), split instead of the graph itself. Raises FedError unless every output of both seeds is
    bit-identical to the per-seed session's of the graph as exported (`OrtRunner` with the weights swapped in)."""
    weights, inputs = seeds[0]
    swapped = set(weights)
    arrays = {k: v.numpy() for k, v in inputs.items()}
    source = (rewrite(graph.model) if rewrite is not None else None) or graph.model
    everything = _run(_session(with_initializers(_all_values_exposed(source), weights), VERIFIED_OPTIONS), arrays)
    types = {name: helper.np_dtype_to_tensor_dtype(value.dtype) for name, value in {**everything, **arrays}.items()}
    tail_nodes = _downstream(source, _rounding_differently(source, weights, arrays, everything))
    if len(tail_nodes) == len(source.graph.node):  # nothing left to share: the head would be an empty session
        raise FedError("every node rounds differently fed (or follows one that does): no head to share")
    head, tail = _split(source, tail_nodes, swapped, types)
    fed = FedGraph(graph, head, tail, rewritten=source is not graph.model)
    for seed_weights, seed_inputs in seeds:
        expected = OrtRunner(graph, seed_weights, **VERIFIED_OPTIONS).run(seed_inputs)
        got = fed.runner(seed_weights, **VERIFIED_OPTIONS).run(seed_inputs)
        wrong = [n for n in expected if not np.array_equal(expected[n], got[n], equal_nan=True)]
        if wrong:
            raise FedError(f"{len(wrong)} values differ from a per-seed session (first: {wrong[0]!r})")
    return fed
