import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from exactness.models import wav2vec2_family as family
from exactness.runtimes import codevector_lookup, eager_capture
from exactness.runtimes.onnx_graph import ExportedGraph, OrtRunner

SCREENED = ["Wav2Vec2ForPreTraining", "Wav2Vec2ConformerForPreTraining", "UniSpeechForPreTraining"]


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        (x.dtype == y.dtype and torch.equal(x, y)) if isinstance(x, torch.Tensor)
        else len(x) == len(y) and all(torch.equal(s, t) for s, t in zip(x, y, strict=True))
        for x, y in ((a[k], b[k]) for k in a))


@pytest.mark.parametrize("model", SCREENED)
@pytest.mark.slow
def test_gathered_codevectors_give_the_models_own_outputs_and_intermediates(model):
    for seed in (3, 11, 1371433937):
        built, inputs = family.build_model(model, seed), family.tester_inputs(model, seed)
        own = eager_capture.run(built, inputs, capture=True)
        gathered = codevector_lookup.run(built, inputs, capture=True)
        assert gathered.gathered and not own.gathered
        assert _same(own.outputs, gathered.outputs) and _same(own.modules, gathered.modules)
        # with the argmax's choices forced, as the aligned and what-if forwards run
        codes = torch.randint(0, built.config.num_codevectors_per_group, (own.modules["quantizer.weight_proj"][0]
                                                                          .numel() // 320,))
        assert _same(eager_capture.run(built, inputs, capture=False, force_codes=codes).outputs,
                     codevector_lookup.run(built, inputs, capture=False, force_codes=codes).outputs)
        assert "forward" not in vars(built.quantizer)  # the class's own forward again afterwards (exports use it)


def test_a_lookup_that_differs_is_not_used(monkeypatch, own_worker_state):
    model = "Wav2Vec2ConformerForPreTraining"
    original = codevector_lookup.lookup_forward

    def off_by_one(self, hidden_states, mask_time_indices=None):
        codevectors, perplexity = original(self, hidden_states, mask_time_indices)
        return codevectors + 1, perplexity

    monkeypatch.setattr(codevector_lookup, "lookup_forward", off_by_one)
    built, inputs = family.build_model(model, 4), family.tester_inputs(model, 4)
    result = codevector_lookup.run(built, inputs, capture=False)
    assert not result.gathered
    assert _same(result.outputs, eager_capture.run(built, inputs, capture=False).outputs)


def test_a_moved_private_method_falls_back_to_the_models_own_forward_and_says_why(monkeypatch, own_worker_state):
    from exactness import compat

    model = "Wav2Vec2ConformerForPreTraining"

    def moved(quantizer):
        raise compat.moved("transformers", "Quantizer._compute_perplexity", "the lookup is off")

    monkeypatch.setattr(compat, "perplexity_of", moved)
    built, inputs = family.build_model(model, 4), family.tester_inputs(model, 4)
    result = codevector_lookup.run(built, inputs, capture=False)
    assert not result.gathered
    assert _same(result.outputs, eager_capture.run(built, inputs, capture=False).outputs)
    assert "has no Quantizer._compute_perplexity" in codevector_lookup.fallback(type(built).__name__)
    assert "forward" not in vars(built.quantizer)


def test_only_an_eval_mode_gumbel_quantizer_is_looked_up():
    built = family.build_model("Wav2Vec2ConformerForPreTraining", 0)
    assert codevector_lookup.applies_to(built)
    assert not codevector_lookup.applies_to(built.train())  # training samples with Gumbel noise instead
    assert not codevector_lookup.applies_to(torch.nn.Linear(2, 2))


# The graph side, on a hand-made graph shaped like the exporter's quantizer (milliseconds, no export).
GROUPS, CODES, DIM = 2, 5, 3


def _quantizer_graph(ones: float = 1.0, reduce_axis: int = -2) -> onnx.ModelProto:
    def const(name, values):
        return numpy_helper.from_array(np.array(values, dtype=np.int64), name)

    rng = np.random.default_rng(0)
    book = numpy_helper.from_array(rng.random((1, GROUPS * CODES, DIM)).astype(np.float32), "book")
    project = numpy_helper.from_array(rng.standard_normal((GROUPS * DIM, 4)).astype(np.float32), "project")
    nodes = [
        helper.make_node("ArgMax", ["logits"], ["codes"], axis=-1, keepdims=0),
        helper.make_node("Reshape", ["codes", "column"], ["codes_2d"]),
        helper.make_node("Shape", ["logits"], ["logits_shape"]),
        helper.make_node("ConstantOfShape", ["logits_shape"], ["zeros"]),
        helper.make_node("Shape", ["codes_2d"], ["codes_shape"]),
        helper.make_node("ConstantOfShape", ["codes_shape"], ["ones"],
                         value=numpy_helper.from_array(np.array([ones], dtype=np.float32))),
        helper.make_node("ScatterElements", ["zeros", "codes_2d", "ones"], ["one_hot"], axis=-1),
        helper.make_node("Reshape", ["one_hot", "per_row"], ["one_hot_rows"]),
        helper.make_node("Unsqueeze", ["one_hot_rows", "last"], ["one_hot_3d"]),
        helper.make_node("Mul", ["one_hot_3d", "book"], ["product"]),
        helper.make_node("Reshape", ["product", "split"], ["product_4d"]),
        helper.make_node("ReduceSum", ["product_4d", "axis"], ["picked"], keepdims=0),
        helper.make_node("Reshape", ["picked", "flat"], ["picked_rows"]),
        helper.make_node("MatMul", ["picked_rows", "project"], ["projected"]),
    ]
    graph = helper.make_graph(
        nodes, "quantizer", [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["n", CODES])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("picked", "projected")],
        [book, project, const("column", [-1, 1]), const("per_row", [-1, GROUPS * CODES]), const("last", [-1]),
         const("split", [-1, GROUPS, CODES, DIM]), const("axis", [reduce_axis]), const("flat", [-1, GROUPS * DIM])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model


def _run(model: onnx.ModelProto, logits: np.ndarray, book: np.ndarray | None = None) -> dict[str, np.ndarray]:
    graph = ExportedGraph(model, ["picked", "projected"])
    return OrtRunner(graph, {"book": book} if book is not None else None, intra_op_threads=1).run(
        {"logits": torch.from_numpy(logits)})


def test_the_graphs_codevector_product_becomes_a_gather_with_the_same_values():
    model = _quantizer_graph()
    gathered = codevector_lookup.gathered_graph(model)
    assert gathered is not None
    ops = [n.op_type for n in gathered.graph.node]
    assert "Gather" in ops and "ReduceSum" not in ops and ops.count("Mul") == 0
    rng = np.random.default_rng(1)
    for rows in (6, 40):
        logits = rng.integers(0, 3, (rows * GROUPS, CODES)).astype(np.float32)  # many exact ties: first wins
        book = rng.standard_normal((1, GROUPS * CODES, DIM)).astype(np.float32)  # fed values, signs mixed
        for weights in (None, book):
            expected, got = _run(model, logits, weights), _run(gathered, logits, weights)
            assert all(np.array_equal(expected[k], got[k]) for k in expected)


@pytest.mark.parametrize("change", [{"ones": 2.0}, {"reduce_axis": -1}])
def test_anything_but_a_one_hot_summed_over_its_codes_is_left_alone(change):
    assert codevector_lookup.gathered_graph(_quantizer_graph(**change)) is None
