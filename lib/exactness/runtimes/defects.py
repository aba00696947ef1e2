"""Deliberate defects injected into an exported graph, to prove a comparison still catches real bugs."""

from __future__ import annotations

import numpy as np
import onnx

# One channel of the quantized output off by 1, 10 and 100 times the export test's atol, added where the graph writes
# it (a bias on the layer before would move it by that layer's gain: UniSpeech projects the quantized features twice,
# and its project_q.bias[0] + 10 atol moved the output by 0.6 atol). One channel is 1/256 of the conformer's output
# and 1/16 of UniSpeech's (the 5% allowance forgives the first, not the second), so a comparison with an allowance can
# miss it and one at full tolerance may not see the smallest: what is caught is measured, never implied by the planting.
GRADED = {"one_bias_1x": 1.0, "one_bias_10x": 10.0, "one_bias_100x": 100.0}
GRADED_OUTPUT = "projected_quantized_states"
TEST_ATOL = 1e-3
DEFECTS = ("perturbed_weight", "wrong_op", "biased_code", *GRADED)
REQUIRED_FACTOR = 10.0  # a comparison that keeps value checks must catch every defect at least this many tolerances


def tolerances(kind: str) -> float:
    """How many of the test's tolerances a graded defect moves its element by (NaN for the others)."""
    return GRADED.get(kind, float("nan"))


def required(kind: str) -> bool:
    """Whether a comparison must catch this defect to keep value checks: every ungraded one, and a graded one of at
    least REQUIRED_FACTOR tolerances."""
    return kind not in GRADED or GRADED[kind] >= REQUIRED_FACTOR


def _initializer(model: onnx.ModelProto, name: str) -> onnx.TensorProto:
    for tensor in model.graph.initializer:
        if tensor.name == name:
            return tensor
    raise KeyError(f"no initializer {name!r} in the graph")


def _add(model: onnx.ModelProto, name: str, delta: np.ndarray | float) -> None:
    tensor = _initializer(model, name)
    value = onnx.numpy_helper.to_array(tensor) + np.asarray(delta, dtype=np.float32)
    tensor.CopyFrom(onnx.numpy_helper.from_array(value.astype(np.float32), name))


def _add_to_output(model: onnx.ModelProto, output: str, channel: int, amount: float) -> None:
    """`output` (a graph output, its last axis of known size) gets `amount` added at `channel` of its last axis,
    where it is written: whatever reads it in the graph reads the changed value."""
    value = next((o for o in model.graph.output if o.name == output), None)
    if value is None:
        raise KeyError(f"no graph output {output!r} to plant a graded defect in")
    dims = value.type.tensor_type.shape.dim
    if not dims or not dims[-1].dim_value:
        raise ValueError(f"the last axis of {output!r} has no fixed size: a graded defect needs one")
    nodes = list(model.graph.node)
    at = next((i for i, n in enumerate(nodes) if output in n.output), None)
    if at is None:
        raise ValueError(f"no node writes the graph output {output!r} (an input or a constant): nothing to plant in")
    width = dims[-1].dim_value
    before = f"{output}__before_planted"
    nodes[at].output[list(nodes[at].output).index(output)] = before
    delta = np.zeros(width, np.float32)
    delta[channel] = amount
    model.graph.initializer.append(onnx.numpy_helper.from_array(delta, f"{output}__planted"))
    # right after its producer: the nodes stay in topological order for whatever reads the output
    nodes.insert(at + 1, onnx.helper.make_node("Add", [before, f"{output}__planted"], [output],
                                               name=f"{output}__planted_add"))
    del model.graph.node[:]
    model.graph.node.extend(nodes)


def inject(model: onnx.ModelProto, kind: str, code: int = 0, amount: float = 2e-3) -> str:
    """Change `model` in place; return what was changed. `biased_code` raises one code's logit by
    `amount` in every row: chosen to flip a row eager was confident about, it mimics a tie flip that is
    really a bug."""
    if kind == "perturbed_weight":  # a bias off by 1e-2: a small, systematic error downstream of the argmax
        _add(model, "project_q.bias", 1e-2)
        return "project_q.bias + 0.01"
    if kind in GRADED:
        _add_to_output(model, GRADED_OUTPUT, 0, GRADED[kind] * TEST_ATOL)
        return f"{GRADED_OUTPUT}[..., 0] + {GRADED[kind] * TEST_ATOL:g} ({GRADED[kind]:g}x the test's atol)"
    if kind == "biased_code":
        bias = onnx.numpy_helper.to_array(_initializer(model, "quantizer.weight_proj.bias"))
        delta = np.zeros_like(bias)
        delta[code] = amount
        _add(model, "quantizer.weight_proj.bias", delta)
        return f"quantizer.weight_proj.bias[{code}] + {amount:.3g}"
    if kind == "wrong_op":  # the feature extractor's last GELU computed as a ReLU
        gelus = [n for n in model.graph.node if n.op_type == "Gelu"
                 and any(s.endswith("feature_extractor") for s in node_modules_from_proto(n))]
        if not gelus:
            raise ValueError("no Gelu node inside the feature extractor to break")
        gelus[-1].op_type = "Relu"
        del gelus[-1].attribute[:]
        return f"{gelus[-1].name}: Gelu -> Relu"
    raise ValueError(f"unknown defect {kind!r}; use one of {DEFECTS}")


def node_modules_from_proto(node: onnx.NodeProto) -> list[str]:
    import ast

    for prop in node.metadata_props:
        if prop.key == "pkg.torch.onnx.name_scopes":
            return [s for s in ast.literal_eval(prop.value)[:-1] if s]
    return []



