"""The discrete-ops study's parts: the recorder-to-node match, margins, the counterfactual on a planted tie
and a planted bug, verdicts, and bad input."""

import numpy as np
import onnx
import pandas as pd
import pytest
import torch

from exactness.models import tiny_subjects
from exactness.runtimes import discrete_recorder, discrete_scan, onnx_graph
from exactness.studies import discrete_ops, discrete_ops_check, discrete_ops_verdicts
from exactness.studies import discrete_ops_margins as margins


class TwoHeads(torch.nn.Module):
    """Two argmaxes in two modules, and a third in the root: each must match its own eager call."""

    def __init__(self):
        super().__init__()
        self.first, self.second = torch.nn.Linear(4, 6), torch.nn.Linear(4, 3)

    def forward(self, x):
        a, b = self.first(x), self.second(x)
        return {"a": a.argmax(-1), "b": b.argmax(-1), "both": torch.cat([a, b], -1).argmax(-1), "plain": a * 2}


def test_the_recorder_matches_each_argmax_to_its_own_node():
    torch.manual_seed(0)
    model, inputs = TwoHeads().eval(), {"x": torch.randn(5, 4)}
    graph = onnx_graph.export(model, inputs, dynamic=False).exposing(())
    ops = discrete_scan.scan(graph.model)
    assert sorted(op.reaches_outputs[0] for op in ops) == ["a", "b", "both"]
    _, records = discrete_recorder.record(model, inputs)
    matches = discrete_recorder.match(ops, records)
    for op in ops:
        record = records[matches[op.node].record]
        assert matches[op.node].how == "traced call number"
        (output,) = op.reaches_outputs
        assert record.inputs[0].shape[-1] == {"a": 6, "b": 3, "both": 9}[output]  # read what that node read
    assert {records[m.record].scope for m in matches.values()} == {""}  # argmax runs in the root's forward


class Planted(torch.nn.Module):
    """Columns 1 and 3 tie exactly in every row and always win: a runtime taking the last maximum flips
    every row."""

    def __init__(self):
        super().__init__()
        weights = torch.randn(4, 6)
        weights[:, 3] = weights[:, 1]
        self.proj = torch.nn.Parameter(weights)
        self.table = torch.nn.Parameter(torch.arange(12, dtype=torch.float).reshape(6, 2))

    def forward(self, x):
        logits = x @ self.proj + torch.tensor([0.0, 50.0, 0.0, 50.0, 0.0, 0.0])
        return {"picked": self.table[logits.argmax(-1)], "scaled": logits * 2}


def _planted(bug: bool):
    torch.manual_seed(0)
    model, inputs = Planted().eval(), {"x": torch.randn(5, 4)}
    cg = discrete_ops_check.from_graph("planted", "static", 0, onnx_graph.export(model, inputs, dynamic=False), inputs)
    for graph in (cg.bare, cg.exposed):
        for node in graph.graph.node:
            if node.op_type == "ArgMax":  # the planted tie-break: ORT takes the last maximum, torch the first
                next(a for a in node.attribute if a.name == "select_last_index").i = 1
        if bug:  # the planted bug: a table row the flipped choice reads is wrong in the graph
            table = next(t for t in graph.graph.initializer if onnx.numpy_helper.to_array(t).shape == (6, 2))
            value = onnx.numpy_helper.to_array(table).copy()
            value[3] += 1.0
            table.CopyFrom(onnx.numpy_helper.from_array(value, table.name))
    result = discrete_ops_check.check_seed(cg, 0, model, inputs)
    return result, discrete_ops_verdicts.explain(pd.DataFrame(result["outputs"]), bound=16.0)


def test_a_planted_tie_flips_every_row_and_forcing_explains_every_output():
    result, explained = _planted(bug=False)
    (row,) = result["margins"]
    assert row["exact_ties"] == 5 and row["flipped"] == 5 and row["match_verified"]
    assert explained.set_index("output").max_abs_diff["picked"] == 4.0  # rows 1 and 3 of the table differ
    assert explained.explained_by_flip.all()


def test_a_planted_bug_is_not_explained_by_the_flip():
    _, explained = _planted(bug=True)
    by_output = explained.set_index("output").explained_by_flip
    assert not by_output["picked"] and by_output["scaled"]


def test_margins_of_each_kind():
    top = margins.selection_margins(np.array([[3.0, 1.0, 2.0], [5.0, 5.0, 0.0]]), margins.Selection(-1, 1))
    np.testing.assert_array_equal(top.margin, [1.0, 0.0])
    assert top.summary()["exact_ties"] == 1
    # a top-2 is decided by the neighbours among the three largest: order (4-3) and membership (3-2.5)
    two = margins.selection_margins(np.array([[4.0, 3.0, 2.5, 0.0]]), margins.Selection(-1, 2))
    np.testing.assert_array_equal(two.margin, [0.5])
    np.testing.assert_array_equal(margins.compare_margins([1.0, 2.0], 1.5).margin, [0.5, 0.5])
    np.testing.assert_allclose(margins.rounding_margins([2.5, 2.75], "Round").margin, [0.0, 0.25])
    np.testing.assert_allclose(margins.rounding_margins([2.0, 2.75], "Floor").margin, [0.0, 0.25])
    one_ulp = margins.Margins(np.array([np.spacing(np.float32(1.0))], dtype=np.float64), np.array([1.0]))
    assert one_ulp.ulps[0] == 1.0
    order = margins.Selection(-1, 2)
    assert margins.flipped("topk", np.array([[0, 1], [2, 3]]), np.array([[0, 1], [3, 2]]), order) == 1


def test_inputs_are_drawn_in_the_testers_order_and_repeat_per_seed():
    name = "XLMForQuestionAnswering"
    first, again = tiny_subjects.inputs(name, 3), tiny_subjects.inputs(name, 3)
    assert all(torch.equal(first[k], again[k]) for k in first) and set(first) == {"input_ids", "lengths",
                                                                                  "token_type_ids"}
    assert first["lengths"].min() >= 5 and first["lengths"].max() <= 6  # ids below 2, plus seq_length - 2
    assert not torch.equal(first["input_ids"], tiny_subjects.inputs(name, 4)["input_ids"])


def test_an_unknown_class_names_the_registered_ones_and_says_how_to_add_one():
    with pytest.raises(KeyError) as error:
        discrete_ops.validate(["GPT2Model"], 3, 0, ["static"], 1)
    message = str(error.value)
    assert "GPT2Model" in message and "BertModel" in message and "To add a class" in message
    with pytest.raises(discrete_ops.StudyParameterError, match="n_seeds must be at least 1"):
        discrete_ops.validate(["BertModel"], 0, 0, ["static"], 1)


def test_verdicts_read_the_skip_reason_and_judge_it():
    graphs = pd.DataFrame([{"model": "XLMForQuestionAnswering", "shape_mode": "static", "error": "", "seeds": 2},
                           {"model": "BertModel", "shape_mode": "static", "error": "ValueError: no", "seeds": 0}])
    ops = pd.DataFrame([{"model": "XLMForQuestionAnswering", "shape_mode": "static", "node": "t", "op_type": "TopK",
                         "category": "topk", "scope": "qa", "reaches_outputs": ["idx"], "on_output_path": True,
                         "can_flip": True}])
    margins_table = pd.DataFrame([{"model": "XLMForQuestionAnswering", "shape_mode": "static", "seed": s, "node": "t",
                                   "op_type": "TopK", "flipped": f, "exact_ties": 1, "min_margin": 0.0}
                                  for s, f in ((0, 1), (1, 0))])
    outputs = pd.DataFrame([{"model": "XLMForQuestionAnswering", "shape_mode": "static", "seed": 0, "output": "idx",
                             "max_abs_diff": 1.0, "max_ulps_of_scale": np.nan, "mismatched": 1,
                             "forced_max_abs_diff": 0.0, "forced_max_ulps_of_scale": np.nan, "forced_mismatched": 0,
                             "seed_flipped": True},
                            {"model": "XLMForQuestionAnswering", "shape_mode": "static", "seed": 1, "output": "idx",
                             "max_abs_diff": 0.0, "max_ulps_of_scale": np.nan, "mismatched": 0, "seed_flipped": False}])
    table, counterfactual = discrete_ops_verdicts.verdicts(graphs, ops, margins_table, outputs)
    xlm, bert = table.set_index("model").loc["XLMForQuestionAnswering"], table.set_index("model").loc["BertModel"]
    assert xlm.verdict == discrete_ops_verdicts.EXACT_TIES and xlm.reason_holds and xlm.flip_rate == 0.5
    assert "tie" in xlm.skip_reason_reference and xlm.reason_kind == "tie"
    assert bert.verdict == discrete_ops_verdicts.EXPORT_FAILED and "ValueError" in bert.detail
    assert counterfactual.explained_by_flip.all()


def test_stacked_token_types_and_an_undrawn_pixel_mask_follow_the_testers():
    tapas = tiny_subjects.inputs("TapasForQuestionAnswering", 2)
    assert tapas["token_type_ids"].shape == (13, 7, 7)
    sizes = torch.tensor([3, 256, 256, 2, 256, 256, 10])  # the tester's type_vocab_sizes, one per stacked column
    assert (tapas["token_type_ids"].amax(dim=(0, 1)) < sizes).all() and tapas["token_type_ids"].min() >= 0
    assert tapas["token_type_ids"][..., 0].max() == 2  # segment ids drawn below 3, not below 256
    lw = tiny_subjects.inputs("LwDetrForObjectDetection", 2)
    assert torch.equal(lw["pixel_mask"], torch.ones(3, 256, 256))
    import random

    rng = random.Random(2)  # the mask draws nothing: pixel values are the whole of the seed's stream
    assert lw["pixel_values"].reshape(-1)[:5].tolist() == pytest.approx([rng.random() for _ in range(5)])
