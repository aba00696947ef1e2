"""Each injected defect on a hand-made graph that holds the names the real graphs hold (no export: milliseconds)."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from exactness.runtimes import defects


def _graph(scope: str = "wav2vec2.feature_extractor") -> onnx.ModelProto:
    weights = {"project_q.bias": np.zeros(3, np.float32), "quantizer.weight_proj.bias": np.arange(6, dtype=np.float32)}
    gelus = []
    for i in range(2):
        node = helper.make_node("Gelu", ["X" if i == 0 else "g0"], [f"g{i}"], name=f"gelu_{i}", approximate="none")
        node.metadata_props.add(key="pkg.torch.onnx.name_scopes", value=repr(["", scope, f"conv_{i}", "gelu"]))
        gelus.append(node)
    nodes = [*gelus, helper.make_node("Add", ["g1", "project_q.bias"], ["Y"])]
    graph = helper.make_graph(nodes, "toy", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [3])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [3])],
                              [numpy_helper.from_array(v, k) for k, v in weights.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])


def _array(model: onnx.ModelProto, name: str) -> np.ndarray:
    return numpy_helper.to_array(next(t for t in model.graph.initializer if t.name == name))


def test_a_perturbed_weight_moves_one_bias_by_a_hundredth():
    model = _graph()
    assert defects.inject(model, "perturbed_weight") == "project_q.bias + 0.01"
    assert np.array_equal(_array(model, "project_q.bias"), np.full(3, 0.01, np.float32))


def test_a_biased_code_raises_one_logit_bias_only():
    model = _graph()
    assert defects.inject(model, "biased_code", code=4, amount=0.5) == "quantizer.weight_proj.bias[4] + 0.5"
    assert _array(model, "quantizer.weight_proj.bias").tolist() == [0, 1, 2, 3, 4.5, 5]


def test_a_wrong_op_turns_the_feature_extractors_last_gelu_into_a_relu():
    model = _graph()
    assert defects.inject(model, "wrong_op") == "gelu_1: Gelu -> Relu"
    assert [(n.op_type, len(n.attribute)) for n in model.graph.node[:2]] == [("Gelu", 1), ("Relu", 0)]
    onnx.checker.check_model(model)


def test_a_graph_without_a_feature_extractor_gelu_or_an_unknown_defect_is_refused():
    with pytest.raises(ValueError, match="no Gelu node inside the feature extractor"):
        defects.inject(_graph(scope="encoder"), "wrong_op")
    with pytest.raises(ValueError, match="unknown defect 'swapped_axes'; use one of"):
        defects.inject(_graph(), "swapped_axes")
    with pytest.raises(KeyError, match="no initializer 'project_q.bias'"):
        model = _graph()
        del model.graph.initializer[0]
        defects.inject(model, "perturbed_weight")


def test_a_node_without_scopes_belongs_to_no_module():
    assert defects.node_modules_from_proto(helper.make_node("Relu", ["a"], ["b"])) == []
    assert defects.node_modules_from_proto(_graph().graph.node[0]) == ["wav2vec2.feature_extractor", "conv_0"]


def test_a_graded_defect_moves_one_channel_of_the_output_where_it_is_written_whatever_reads_it():
    """Planted in the output itself, so that '10x the test's atol' is what the output moves by in every class (a bias
    one layer earlier moves it by that layer's gain: UniSpeech's second projection)."""
    import onnxruntime as ort

    model = _graph()
    model.graph.output[0].name = "projected_quantized_states"
    model.graph.node[-1].output[0] = "projected_quantized_states"
    model.graph.node.append(helper.make_node("Neg", ["projected_quantized_states"], ["Z"]))  # a reader after it
    model.graph.output.append(helper.make_tensor_value_info("Z", TensorProto.FLOAT, [3]))
    assert defects.inject(model, "one_bias_10x") == "projected_quantized_states[..., 0] + 0.01 (10x the test's atol)"
    onnx.checker.check_model(model)
    x = np.array([1.0, -2.0, 3.0], np.float32)
    bare = _graph()
    bare.ir_version = model.ir_version = 10  # what this ONNX Runtime reads (the helper writes onnx's newest)
    plain = ort.InferenceSession(bare.SerializeToString()).run(None, {"X": x})[0]
    y, z = ort.InferenceSession(model.SerializeToString()).run(["projected_quantized_states", "Z"], {"X": x})
    assert abs((y - plain)[0] - 0.01) < 1e-7 and np.array_equal(y[1:], plain[1:]) and np.array_equal(z, -y)
    with pytest.raises(KeyError, match="no graph output 'projected_quantized_states'"):
        defects.inject(_graph(), "one_bias_1x")


def test_a_graded_defect_on_an_output_without_a_fixed_width_or_without_a_producer_is_one_clear_line():
    model = _graph()
    model.graph.output[0].name = "projected_quantized_states"
    with pytest.raises(ValueError, match="no node writes the graph output 'projected_quantized_states'"):
        defects.inject(model, "one_bias_10x")
    model.graph.output[0].type.tensor_type.shape.dim[0].dim_param = "n"
    with pytest.raises(ValueError, match="has no fixed size"):
        defects.inject(model, "one_bias_10x")
