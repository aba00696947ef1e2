"""The one-session weight feed on a small hand-made graph (no export: milliseconds)."""

import numpy as np
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from exactness.runtimes import fed_graph
from exactness.runtimes.onnx_graph import ExportedGraph, OrtRunner


def _graph() -> ExportedGraph:
    """Y = relu(X @ W1 + b) @ W2 with a long inner dimension (300), beside Z = X2 @ W3 with a short one."""
    rng = np.random.default_rng(0)
    weights = {"W1": rng.standard_normal((300, 8)), "b": rng.standard_normal(8), "W2": rng.standard_normal((8, 3)),
               "W3": rng.standard_normal((16, 4))}
    nodes = [helper.make_node("MatMul", ["X", "W1"], ["h"]), helper.make_node("Add", ["h", "b"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["r"]), helper.make_node("MatMul", ["r", "W2"], ["Y"]),
             helper.make_node("MatMul", ["X2", "W3"], ["Z"])]
    graph = helper.make_graph(
        nodes, "toy", [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["n", 300]),
                       helper.make_tensor_value_info("X2", TensorProto.FLOAT, ["n", 16])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("Y", "Z", "r")],
        [numpy_helper.from_array(v.astype(np.float32), k) for k, v in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return ExportedGraph(model, ["Y", "Z"], {"relu": "r"})


def _seed(seed: int) -> tuple[dict[str, np.ndarray], dict[str, torch.Tensor]]:
    rng = np.random.default_rng(seed)
    weights = {"W1": rng.standard_normal((300, 8)), "b": rng.standard_normal(8), "W2": rng.standard_normal((8, 3)),
               "W3": rng.standard_normal((16, 4))}
    inputs = {"X": torch.from_numpy(rng.standard_normal((64, 300)).astype(np.float32)),
              "X2": torch.from_numpy(rng.standard_normal((64, 16)).astype(np.float32))}
    return {k: v.astype(np.float32) for k, v in weights.items()}, inputs


def _assert_like_per_seed_sessions(fed, graph, seeds):
    for seed in seeds:
        weights, inputs = _seed(seed)
        expected = OrtRunner(graph, weights, intra_op_threads=1).run(inputs)
        got = fed.runner(weights, intra_op_threads=1).run(inputs)
        assert list(got) == list(expected)
        for name in expected:
            assert np.array_equal(got[name], expected[name]), (seed, name)


def test_everything_downstream_of_a_node_is_its_tail():
    graph = _graph()
    assert fed_graph._downstream(graph.model, {0}) == [0, 1, 2, 3]  # not the independent MatMul (4)
    assert fed_graph._downstream(graph.model, {4}) == [4]
    assert fed_graph._downstream(graph.model, set()) == []


def test_fed_weights_give_what_a_session_per_seed_gives():
    graph = _graph()
    fed = fed_graph.learn(graph, [_seed(1), _seed(2)])
    _assert_like_per_seed_sessions(fed, graph, range(3, 8))
    if fed.tail is not None:  # where this CPU's kernels round the long MatMul differently when fed
        assert "Z" not in {o for n in fed.tail.graph.node for o in n.output}


def test_a_split_graph_runs_its_tail_with_constant_weights(monkeypatch):
    # whatever this CPU's kernels do, the long MatMul is made to start the tail
    monkeypatch.setattr(fed_graph, "_rounding_differently", lambda *args: {0})
    graph = _graph()
    fed = fed_graph.learn(graph, [_seed(1), _seed(2)])
    assert [n.op_type for n in fed.tail.graph.node] == ["MatMul", "Add", "Relu", "MatMul"]
    assert {i.name for i in fed.tail.graph.input} == {"X"}
    assert {t.name for t in fed.tail.graph.initializer} == {"W1", "b", "W2"}
    assert {i.name for i in fed.head.graph.input} == {"X", "X2", "W3"} and not fed.head.graph.initializer
    assert [o.name for o in fed.head.graph.output] == ["Z"]
    _assert_like_per_seed_sessions(fed, graph, range(3, 6))


def test_a_graph_whose_every_node_falls_in_the_tail_is_refused_before_an_empty_head_is_built(monkeypatch):
    monkeypatch.setattr(fed_graph, "_rounding_differently", lambda *args: {0, 4})  # both MatMuls that read X
    with pytest.raises(fed_graph.FedError, match="no head to share"):
        fed_graph.learn(_graph(), [_seed(1), _seed(2)])


def test_a_feed_that_differs_from_per_seed_sessions_is_refused(monkeypatch):
    real_run = fed_graph.FedRunner.run

    def off_by_one_ulp(self, inputs):
        out = real_run(self, inputs)
        out["Z"] = np.nextafter(out["Z"], np.float32(np.inf))
        return out

    monkeypatch.setattr(fed_graph.FedRunner, "run", off_by_one_ulp)
    with pytest.raises(fed_graph.FedError, match="first: 'Z'"):
        fed_graph.learn(_graph(), [_seed(1), _seed(2)])


def test_sessions_are_rebuilt_after_pickling():
    import pickle

    graph = _graph()
    fed = fed_graph.learn(graph, [_seed(1), _seed(2)])
    copy = pickle.loads(pickle.dumps(fed))
    assert copy._head_session is None
    _assert_like_per_seed_sessions(copy, graph, [9])


def test_only_the_verified_session_options_are_fed():
    graph = _graph()
    fed = fed_graph.learn(graph, [_seed(1), _seed(2)])
    weights, _ = _seed(3)
    assert fed_graph.verified_for({"intra_op_threads": 1}) and fed_graph.verified_for(fed_graph.VERIFIED_OPTIONS)
    for options in ({}, {"optimization": "basic"}, {"intra_op_threads": 2}, {"optimization": "disabled"}):
        assert not fed_graph.verified_for(options)
        with pytest.raises(fed_graph.FedError, match="not verified"):
            fed.runner(weights, **options)


def _relu_as(op_type: str):
    def rewrite(model):
        import onnx

        changed = onnx.ModelProto()
        changed.CopyFrom(model)
        for node in changed.graph.node:
            if node.op_type == "Relu":
                node.op_type = op_type
        return changed

    return rewrite


def test_a_rewrite_is_split_instead_of_the_graph_only_if_it_gives_the_graphs_values():
    graph = _graph()
    same = fed_graph.learn(graph, [_seed(1), _seed(2)], rewrite=_relu_as("Relu"))  # a copy: the same values
    assert same.rewritten
    _assert_like_per_seed_sessions(same, graph, range(3, 5))
    assert not fed_graph.learn(graph, [_seed(1), _seed(2)], rewrite=lambda model: None).rewritten
    with pytest.raises(fed_graph.FedError, match="differ from a per-seed session"):
        fed_graph.learn(graph, [_seed(1), _seed(2)], rewrite=_relu_as("Sigmoid"))
