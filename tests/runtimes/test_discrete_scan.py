"""The discrete-op scanner on small hand-built ONNX graphs."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from exactness.runtimes.discrete_scan import FOLLOWS_CHOICE, INTEGER_ONLY, exposing, reachable_outputs, scan

FLOAT, INT64 = TensorProto.FLOAT, TensorProto.INT64


def _model(nodes, inputs, outputs, initializers=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 10
    onnx.checker.check_model(model)
    return model


def _weights():
    return numpy_helper.from_array(np.arange(9, dtype=np.float32).reshape(3, 3) / 7, "W")


def _x():
    return helper.make_tensor_value_info("X", FLOAT, [2, 3])


def test_an_argmax_reaches_the_output_it_feeds_and_not_the_other():
    model = _model(
        [helper.make_node("MatMul", ["X", "W"], ["Y"], name="matmul"),
         helper.make_node("ArgMax", ["Y"], ["A"], name="argmax", axis=1, keepdims=0),
         helper.make_node("Cast", ["A"], ["choice"], name="cast", to=FLOAT),
         helper.make_node("Relu", ["Y"], ["plain"], name="relu")],
        [_x()], [helper.make_tensor_value_info("choice", FLOAT, [2]),
                 helper.make_tensor_value_info("plain", FLOAT, [2, 3])], [_weights()])
    (op,) = scan(model)
    assert (op.node, op.op_type, op.category) == ("argmax", "ArgMax", "argmax")
    assert op.reaches_outputs == ["choice"] and op.on_output_path and op.weight_dependent
    assert op.consumers == ["Cast"]


def test_a_where_fed_by_a_greater_is_a_comparison_on_the_output_path():
    zero = numpy_helper.from_array(np.array(0.0, dtype=np.float32), "zero")
    model = _model(
        [helper.make_node("MatMul", ["X", "W"], ["Y"], name="matmul"),
         helper.make_node("Greater", ["Y", "zero"], ["G"], name="greater"),
         helper.make_node("Where", ["G", "Y", "zero"], ["out"], name="where")],
        [_x()], [helper.make_tensor_value_info("out", FLOAT, [2, 3])], [_weights(), zero])
    (op,) = scan(model)
    assert (op.op_type, op.category, op.consumers, op.reaches_outputs) == ("Greater", "compare", ["Where"], ["out"])
    assert op.can_flip


def test_comparisons_of_integers_are_exact_and_a_cast_mask_cannot_flip():
    ids = helper.make_tensor_value_info("ids", INT64, [2, 3])
    five = numpy_helper.from_array(np.array(5, dtype=np.int64), "five")
    zero = numpy_helper.from_array(np.array(0.0, dtype=np.float32), "zero")
    model = _model(
        [helper.make_node("Less", ["ids", "five"], ["small"], name="int_less"),
         helper.make_node("Cast", ["ids"], ["idsf"], name="cast", to=FLOAT),
         helper.make_node("Equal", ["idsf", "zero"], ["is_zero"], name="mask_equal"),
         helper.make_node("And", ["small", "is_zero"], ["both"], name="and"),
         helper.make_node("MatMul", ["X", "W"], ["Y"], name="matmul"),
         helper.make_node("Where", ["both", "Y", "zero"], ["out"], name="where")],
        [_x(), ids], [helper.make_tensor_value_info("out", FLOAT, [2, 3])], [_weights(), five, zero])
    (op,) = scan(model)  # the integer Less is not a discrete op that can round differently
    assert op.node == "mask_equal" and op.reaches_outputs == ["out"]
    assert not op.weight_dependent and not op.can_flip and op.not_counted == INTEGER_ONLY


def _masked_scores(threshold: float):
    """Scores computed from weights, masked with the float32 minimum where a boolean mask is off, then compared
    with `threshold`; the comparison's count of booleans is compared again (the fully-masked-row guard)."""
    mask = helper.make_tensor_value_info("mask", TensorProto.BOOL, [2, 3])
    fill = numpy_helper.from_array(np.full((2, 3), np.finfo(np.float32).min, dtype=np.float32), "fill")
    bound = numpy_helper.from_array(np.array(threshold, dtype=np.float32), "bound")
    one = numpy_helper.from_array(np.array(1.0, dtype=np.float32), "one")
    return _model(
        [helper.make_node("MatMul", ["X", "W"], ["Y"], name="matmul"),
         helper.make_node("Where", ["mask", "Y", "fill"], ["masked"], name="where"),
         helper.make_node("Greater", ["masked", "bound"], ["kept"], name="greater"),
         helper.make_node("Cast", ["kept"], ["keptf"], name="cast", to=FLOAT),
         helper.make_node("ReduceSum", ["keptf"], ["count"], name="sum", keepdims=1),
         helper.make_node("Less", ["count", "one"], ["none_kept"], name="less"),
         helper.make_node("Where", ["none_kept", "one", "masked"], ["out"], name="guard")],
        [_x(), mask], [helper.make_tensor_value_info("out", FLOAT, [2, 3])], [_weights(), fill, bound, one])


def test_a_comparison_with_the_mask_value_and_a_count_of_its_booleans_do_not_count():
    greater, less = scan(_masked_scores(float(np.finfo(np.float32).min)))
    assert greater.weight_dependent and not greater.can_flip and "mask value -3.4e+38" in greater.not_counted
    assert not less.weight_dependent and not less.can_flip and less.not_counted == FOLLOWS_CHOICE
    assert greater.reaches_outputs == less.reaches_outputs == ["out"]  # listed, reaching, and still not counted


def test_the_same_comparison_with_an_ordinary_threshold_counts():
    greater, less = scan(_masked_scores(0.5))
    assert greater.can_flip and greater.not_counted == ""
    assert not less.can_flip  # a count of booleans flips only when the comparison it counts does


def test_a_random_normal_is_found_and_reaches_what_it_is_added_to():
    model = _model(
        [helper.make_node("MatMul", ["X", "W"], ["Y"], name="matmul"),
         helper.make_node("RandomNormal", [], ["noise"], name="draw", shape=[2, 3], dtype=FLOAT),
         helper.make_node("Add", ["Y", "noise"], ["noisy"], name="add"),
         helper.make_node("Identity", ["Y"], ["clean"], name="identity")],
        [_x()], [helper.make_tensor_value_info("noisy", FLOAT, [2, 3]),
                 helper.make_tensor_value_info("clean", FLOAT, [2, 3])], [_weights()])
    (op,) = scan(model)
    assert (op.category, op.reaches_outputs) == ("random", ["noisy"])
    assert op.can_flip and not op.weight_dependent  # a draw depends on nothing, and still differs per runtime


def test_rounding_counts_only_where_it_becomes_an_integer():
    model = _model(
        [helper.make_node("MatMul", ["X", "W"], ["Y"], name="matmul"),
         helper.make_node("Round", ["Y"], ["R"], name="round_to_index"),
         helper.make_node("Cast", ["R"], ["index"], name="cast", to=INT64),
         helper.make_node("Floor", ["Y"], ["F"], name="floor_in_float"),
         helper.make_node("Add", ["F", "Y"], ["smooth"], name="add")],
        [_x()], [helper.make_tensor_value_info("index", INT64, [2, 3]),
                 helper.make_tensor_value_info("smooth", FLOAT, [2, 3])], [_weights()])
    assert [op.node for op in scan(model)] == ["round_to_index"]


def test_reachability_follows_every_path_and_keeps_the_output_order():
    model = _model(
        [helper.make_node("Relu", ["X"], ["a"], name="r1"), helper.make_node("Neg", ["a"], ["b"], name="n"),
         helper.make_node("Abs", ["X"], ["c"], name="abs")],
        [_x()], [helper.make_tensor_value_info(n, FLOAT, [2, 3]) for n in ("c", "b", "a")])
    assert reachable_outputs(model.graph, ["a"]) == ["b", "a"]
    assert reachable_outputs(model.graph, ["X"]) == ["c", "b", "a"]


def test_exposing_returns_an_intermediate_beside_the_outputs():
    model = _model(
        [helper.make_node("MatMul", ["X", "W"], ["Y"], name="matmul"),
         helper.make_node("ArgMax", ["Y"], ["choice"], name="argmax", axis=1, keepdims=0)],
        [_x()], [helper.make_tensor_value_info("choice", INT64, [2])], [_weights()])
    exposed = exposing(model, ["Y", "W", "X"])  # an initializer and an input are known without running
    assert [o.name for o in exposed.graph.output] == ["choice", "Y"]
    session = ort.InferenceSession(exposed.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.array([[1, 0, 0], [0, 0, 1]], dtype=np.float32)
    choice, y = session.run(None, {"X": x})
    np.testing.assert_array_equal(choice, y.argmax(axis=1))
    with pytest.raises(KeyError, match="no known type"):
        exposing(model, ["nowhere"])
