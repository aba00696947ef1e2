"""The Gumbel quantizer's eval forward with its codevector lookup done as a gather.

In eval mode the quantizer turns its argmax into a one-hot `probs` and computes
`(probs.unsqueeze(-1) * codevectors).view(rows, groups, codes, dim).sum(-2)`: a broadcast product of
rows x 640 x dim floats (37 million, 150 MB, for UniSpeech's 455 rows) summed over the codes, to pick one
codevector per row and group. Every term but the chosen one is 0 * x, a zero (the codebook is finite),
and adding zeros to a float leaves its value unchanged in any order, so the sum is exactly the chosen
codevector: the gather gives the same values (a chosen -0.0 may come out +0.0, the same value). Measured
here on one thread, the eager forward of a check takes 53 -> 12 ms (UniSpeech), 25 -> 11 ms (Wav2Vec2),
31 -> 15 ms (conformer).

The lookup replaces nothing else: the argmax, the one-hot, the perplexity are the model's own code, run the
same way. It is only ever used for eager runs (`run`), never while exporting: the exported graph is the
model's own. Each process checks it once per model class against the model's own forward, on the first
inputs it is used with; if any output differs, that class keeps its own forward in that process.

Fast path (`exactness.runtimes.speedup_paths`, switched off by `fast_paths: false`; a check row's `eager_lookup_path`
and `ort_lookup_path`):
- replaces: the quantizer's one-hot times the codebook summed over the codes, eager (`run`) and in the fed
  ORT session (`gathered_graph`);
- exact because: every other term is 0 * x, and adding zeros leaves the chosen codevector's value;
- verified by: `verified` once per class and process against the model's own forward, `fed_graph.learn`
  against the graph as exported, tests/runtimes/test_codevector_lookup.py and test_near_tie_paths.py.
"""

from __future__ import annotations

import contextlib
import types

import numpy as np
import onnx
import torch

from exactness import compat
from exactness.runtimes import eager_capture, worker_state


def lookup_forward(self, hidden_states: torch.Tensor, mask_time_indices: torch.Tensor | None = None):
    """`*GumbelVectorQuantizer.forward` in eval mode (transformers 5.23.0), the codevectors gathered."""
    batch_size, sequence_length, _ = hidden_states.shape
    hidden_states = self.weight_proj(hidden_states)
    hidden_states = hidden_states.view(batch_size * sequence_length * self.num_groups, -1)
    codevector_idx = hidden_states.argmax(dim=-1)
    codevector_probs = hidden_states.new_zeros(hidden_states.shape).scatter_(-1, codevector_idx.view(-1, 1), 1.0)
    codevector_probs = codevector_probs.view(batch_size * sequence_length, self.num_groups, -1)
    # UniSpeech's quantizer takes no mask; Wav2Vec2's takes one and treats None as no mask
    compute_perplexity = compat.perplexity_of(self)
    perplexity = (compute_perplexity(codevector_probs) if mask_time_indices is None
                  else compute_perplexity(codevector_probs, mask_time_indices))
    offsets = torch.arange(self.num_groups) * self.num_vars  # group g's codes start at g * num_vars
    chosen = self.codevectors[0][codevector_idx.view(-1, self.num_groups) + offsets]
    return chosen.view(batch_size, sequence_length, -1), perplexity


def applies_to(model: torch.nn.Module) -> bool:
    quantizer = getattr(model, "quantizer", None)
    return (quantizer is not None and type(quantizer).__name__.endswith("GumbelVectorQuantizer")
            and not quantizer.training)


@contextlib.contextmanager
def _patched(model: torch.nn.Module):
    model.quantizer.forward = types.MethodType(lookup_forward, model.quantizer)
    try:
        yield
    finally:
        del model.quantizer.forward  # the class's own forward again


def fallback(model_class: str) -> str | None:
    """Why this process keeps `model_class`'s own forward; None where the lookup was verified or not yet tried."""
    return worker_state.current().lookup_checked.get(model_class)


def verified(model: torch.nn.Module, inputs: dict[str, torch.Tensor]) -> bool:
    """Whether the lookup gives the model's own outputs; checked on the first call per class and process
    (the worker's state keeps the answer: None when it held, else why not)."""
    checked, key = worker_state.current().lookup_checked, type(model).__name__
    if key not in checked:
        own = eager_capture.run(model, inputs, capture=False).outputs
        try:
            with _patched(model):
                looked_up = eager_capture.run(model, inputs, capture=False).outputs
        except (compat.CompatError, TypeError) as error:  # the quantizer's private method moved or changed
            checked[key] = f"{type(error).__name__}: {error}"
            return False
        same = own.keys() == looked_up.keys() and all(
            own[k].dtype == looked_up[k].dtype and torch.equal(own[k], looked_up[k]) for k in own)
        checked[key] = None if same else "the gathered lookup's outputs differed from the model's own"
    return checked[key] is None


def run(model: torch.nn.Module, inputs: dict[str, torch.Tensor], **options) -> eager_capture.EagerRun:
    """`eager_capture.run` with the codevectors gathered where that is verified (`EagerRun.gathered`)."""
    if applies_to(model) and verified(model, inputs):
        with _patched(model):
            result = eager_capture.run(model, inputs, **options)
        result.gathered = True
        return result
    return eager_capture.run(model, inputs, **options)


# The same lookup in the exported graph, for ORT: Mul(one-hot, codebook) -> Reshape [-1, G, V, D] ->
# ReduceSum over V becomes Gather(codebook as [G * V, D], argmax as [-1, G] + g * V). ORT's Mul and ReduceSum
# give the chosen codevector exactly for the same reason as torch's; the rewritten graph is only used
# after a run compares it bit for bit with the graph as exported (fed_graph.learn).

def _int64_constants(model: onnx.ModelProto) -> dict[str, list[int]]:
    """The graph's int64 initializers (shapes, axes) as lists, by name."""
    return {t.name: onnx.numpy_helper.to_array(t).tolist() for t in model.graph.initializer
            if t.data_type == onnx.TensorProto.INT64}


def _attribute(node: onnx.NodeProto, name: str, default=None):
    return next((onnx.helper.get_attribute_value(a) for a in node.attribute if a.name == name), default)


def _one_hot_of(name: str, producers: dict, ints: dict[str, list[int]]) -> onnx.NodeProto | None:
    """The ArgMax whose one-hot `name` is (through Reshape and a last-axis Unsqueeze), or None."""
    node = producers.get(name)
    while node is not None and node.op_type in ("Reshape", "Unsqueeze"):
        if node.op_type == "Unsqueeze" and ints.get(node.input[1]) not in ([-1], [2]):
            return None
        node = producers.get(node.input[0])
    if node is None or node.op_type != "ScatterElements" or _attribute(node, "axis") not in (-1, 1):
        return None
    zeros, indices, ones = (producers.get(n) for n in node.input)
    if not (zeros is not None and zeros.op_type == "ConstantOfShape" and _fill(zeros) == 0.0
            and ones is not None and ones.op_type == "ConstantOfShape" and _fill(ones) == 1.0):
        return None
    while indices is not None and indices.op_type == "Reshape":
        indices = producers.get(indices.input[0])
    if indices is None or indices.op_type != "ArgMax" or _attribute(indices, "keepdims") != 0 \
            or _attribute(indices, "axis") not in (-1, 1) or _attribute(indices, "select_last_index", 0) != 0:
        return None
    return indices


def _fill(node: onnx.NodeProto) -> float:
    value = _attribute(node, "value")
    return 0.0 if value is None else float(onnx.numpy_helper.to_array(value).reshape(-1)[0])


def gathered_graph(model: onnx.ModelProto) -> onnx.ModelProto | None:
    """A copy of `model` with its codevector product replaced by a Gather; None where the graph has no
    such product (anything other than the pattern above, exactly)."""
    graph = model.graph
    producers = {o: n for n in graph.node for o in n.output}
    readers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    outputs = {o.name for o in graph.output}
    ints = _int64_constants(model)
    position = {id(n): i for i, n in enumerate(graph.node)}
    for mul in (n for n in graph.node if n.op_type == "Mul"):
        reshape = readers.get(mul.output[0], [])
        if len(reshape) != 1 or reshape[0].op_type != "Reshape" or mul.output[0] in outputs:
            continue
        reshape = reshape[0]
        reduce = readers.get(reshape.output[0], [])
        shape = ints.get(reshape.input[1])
        if len(reduce) != 1 or reduce[0].op_type != "ReduceSum" or shape is None or len(shape) != 4 \
                or reshape.output[0] in outputs:
            continue
        reduce = reduce[0]
        if _attribute(reduce, "keepdims", 1) != 0 or len(reduce.input) < 2 \
                or ints.get(reduce.input[1]) not in ([-2], [2]):
            continue
        for one_hot, book in (mul.input, mul.input[::-1]):
            argmax = _one_hot_of(one_hot, producers, ints)
            if argmax is not None and producers.get(book) is None:  # the codebook: a weight, not computed
                removed = tuple(position[id(n)] for n in (mul, reshape, reduce))
                return _rewritten(model, removed, argmax.output[0], book, *shape[1:])
    return None


gathered_graph.words = "its codevector product replaced by a gather (the same values, checked)"


def _rewritten(model: onnx.ModelProto, removed: tuple[int, ...], codes: str, book: str, groups: int,
               per_group: int, dim: int) -> onnx.ModelProto:
    """`removed`: the positions of the Mul, Reshape and ReduceSum; the Gather writes the ReduceSum's output."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    result = graph.node[removed[-1]].output[0]
    gone = {o for i in removed for o in graph.node[i].output} - {result}
    p = "codevector_lookup"
    graph.initializer.extend([
        onnx.numpy_helper.from_array(np.array([-1, groups], dtype=np.int64), f"{p}/codes_shape"),
        onnx.numpy_helper.from_array(np.arange(groups, dtype=np.int64) * per_group, f"{p}/group_offsets"),
        onnx.numpy_helper.from_array(np.array([groups * per_group, dim], dtype=np.int64), f"{p}/book_shape"),
    ])
    lookup = [
        onnx.helper.make_node("Reshape", [codes, f"{p}/codes_shape"], [f"{p}/codes"], name=f"{p}/codes"),
        onnx.helper.make_node("Add", [f"{p}/codes", f"{p}/group_offsets"], [f"{p}/rows"], name=f"{p}/rows"),
        onnx.helper.make_node("Reshape", [book, f"{p}/book_shape"], [f"{p}/book"], name=f"{p}/book"),
        onnx.helper.make_node("Gather", [f"{p}/book", f"{p}/rows"], [result], name=f"{p}/gather", axis=0),
    ]
    # where the ReduceSum was: its inputs' producers come before it, its readers after
    nodes = [n for i, n in enumerate(graph.node) if i not in removed[:-1]]
    at = removed[-1] - sum(1 for i in removed[:-1] if i < removed[-1])
    nodes[at:at + 1] = lookup
    del graph.node[:]
    graph.node.extend(nodes)
    info = [v for v in graph.value_info if v.name not in gone]
    del graph.value_info[:]
    graph.value_info.extend(info)
    return out
