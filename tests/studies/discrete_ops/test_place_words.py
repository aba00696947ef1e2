"""Where a defect starts: the localizer's numbers stay typed (`engine.places`), and `place_words` alone writes them.

The expected sentences are the ones the localizer wrote before its numbers were typed (the default run's
localizations table holds the BitModel and Tapas ones), so a rewording shows here and nowhere in the science.
"""

import numpy as np

from exactness.causes import Stage
from exactness.engine import place_words
from exactness.engine.places import (
    BeyondRounding,
    Config,
    Kind,
    Localization,
    MissingInput,
    NanInEager,
    NodeMade,
    NonFiniteOutput,
    Reproduction,
    Rewritten,
    StageProof,
    Symptom,
    ValueRange,
)
from exactness.runtimes import onnx_graph
from exactness.studies.discrete_ops import localize


def _spot(**fields) -> Localization:
    return Localization("M", "static", 0, **fields)


MADE = NodeMade(397, 416, False, (ValueRange("float32", (13, 32), 0.0, 0.0, 416),
                                  ValueRange("float32", (13, 32), 0.0, 2.5, 397)))


def test_a_nodes_inputs_are_measured_as_their_finite_range_and_zeros():
    values = np.array([[0.0, np.inf], [2.5, 0.0]], np.float32)
    assert localize._range(values) == ValueRange("float32", (2, 2), 0.0, 2.5, 2)
    assert localize._range(np.zeros((0,), np.float32)) is None
    nothing_finite = localize._range(np.array([np.nan], np.float32))
    assert np.isnan(nothing_finite.low) and nothing_finite.zeros == 0


def test_each_departure_is_worded_from_its_numbers():
    tapas = _spot(module="", kind=Kind.NON_FINITE, node="node_div_8", op_type="Div", made=MADE)
    assert place_words.detail(tapas) == (
        "no module's output departs, but this node makes 397 of 416 values non-finite from finite inputs "
        "(float32 (13, 32) in [0, 0], 416 zeros; float32 (13, 32) in [0, 2.5], 397 zeros)")
    bit = _spot(module="embedder.pad", kind=Kind.OPTIMIZATION, eager_err=0.0, ort_err=0.0014, bound=2e-6,
                shows=Rewritten("basic", "last_hidden_state", (("disabled", 2.1e-07), ("basic", 0.0014),
                                                               ("extended", 0.0014), ("all", 0.0014)), 2e-6))
    assert place_words.detail(bit) == (
        "ORT's 'basic' graph optimizations make it (error from float64 of last_hidden_state by level: disabled "
        "2.1e-07, basic 0.0014, extended 0.0014, all 0.0014; bound 2e-06); exposing embedder.pad's output alone "
        "removes it: the rewritten nodes read it")
    assert place_words.detail(_spot(module="a", kind=Kind.NON_FINITE, shows=NonFiniteOutput(3, 8), node="n",
                                    made=NodeMade(3, 8, False, (None,)))) == (
        "ORT's output is non-finite in 3 of 8 values where eager's is finite; the node makes 3 of 8 values "
        "non-finite from finite inputs (empty)")
    assert place_words.detail(_spot(module="a", kind=Kind.BEYOND_ROUNDING, shows=BeyondRounding(684.0),
                                    eager_err=1e-7, ort_err=0.00136)) == (
        "ORT errs 0.00136 from float64, eager 1e-07: 684 times eager's")
    assert place_words.detail(_spot(module="", kind=Kind.BEYOND_ROUNDING)) == (
        "no module output departs from the float64 reference beyond the bound")
    assert place_words.detail(_spot(module="", kind=Kind.NOT_LOCALIZED, failed="ValueError: x")) == "ValueError: x"


def test_nan_in_eager_says_what_float64_holds_there():
    def eager(nans):
        return place_words.detail(_spot(module="logs", kind=Kind.NAN_IN_EAGER, shows=NanInEager(14, 20, nans)))

    assert eager(14) == "eager's output holds a NaN in 14 of 20 values; float64's holds 14: the arithmetic itself"
    assert eager(0) == "eager's output holds a NaN in 14 of 20 values; float64's holds none: float32's range"
    assert eager(None) == "eager's output holds a NaN in 14 of 20 values"
    outside = _spot(module="", kind=Kind.NAN_IN_EAGER, node="node_log_1", op_type="Log",
                    made=NodeMade(1, 4, True, (ValueRange("float32", (4,), -1.0, 1.0, 0),)))
    assert place_words.detail(outside) == (
        "no module's output holds a NaN in eager: the forward's own operations, outside every module, make it; in "
        "the exported graph, this node makes 1 of 4 values NaN from inputs without one (float32 (4,) in [-1, 1], "
        "0 zeros)")


def test_where_joins_the_place_the_missing_value_and_the_stage():
    full, off = Symptom(1e4, 1.28e6, 0, "logits"), Symptom(0.0, 0.0, 0, "logits")
    rule = "no_op[2] Add(x, 0)"
    proof = StageProof(Stage.EXPORT_OPTIMIZER, rule, full, off,
                       Config(onnx_graph.ExportOptions(rules_off=(rule,))), candidates=46)
    spot = _spot(module="", kind=Kind.NON_FINITE, node="node_div_8", op_type="Div", made=MADE, proof=proof,
                 missing=MissingInput("node_div_8", "Div", "div", ("view_3", "add_34"), "add_34", "sum_1", "Add",
                                      ("sum_1", 1e-10)))
    assert (spot.stage, spot.pass_name, spot.error_with, spot.error_without) == (
        Stage.EXPORT_OPTIMIZER.value, rule, 1e4, 0.0)
    assert place_words.start(spot) == "the model's own forward, its Div (ONNX node node_div_8 of the exported graph)"
    assert place_words.where(spot) == (
        "the model's own forward, its Div (ONNX node node_div_8 of the exported graph): no module's output departs, "
        "but this node makes 397 of 416 values non-finite from finite inputs (float32 (13, 32) in [0, 0], 416 zeros; "
        "float32 (13, 32) in [0, 2.5], 397 zeros); the node was traced from torch's div(x, y), but the optimized "
        "graph no longer computes y (exported with optimize=False, y = Add(z, 1e-10)); the node reads z in its place; "
        "made by the exporter's optimizer (onnxscript), rule no_op[2] Add(x, 0): with it logits errs 1e+04 from "
        "float64 (1.28e+06 times its bound); without it alone (export optimize=True without rule no_op[2] Add(x, 0), "
        "ORT level 'all'), logits errs 0 from float64 (0 times its bound) (bisected over 46 rules in 0 trials)")
    unmeasured = _spot(module="a", kind=Kind.BEYOND_ROUNDING, shows=BeyondRounding(9.0), no_reference=True)
    assert place_words.where(unmeasured).endswith(
        "; no stage located: no float64 reference to measure each configuration against")
    failed = _spot(module="a", kind=Kind.BEYOND_ROUNDING, shows=BeyondRounding(9.0), switch_error="OSError: gone")
    assert place_words.where(failed).endswith("; no stage located: switching the pipeline failed (OSError: gone)")
    assert place_words.where(None) == place_words.start(None) == ""
    # a defect eager makes too: the model's stage, with nothing switched and nothing to disable
    eager = _spot(module="logs", kind=Kind.NAN_IN_EAGER, shows=NanInEager(1, 2, 1), proof=StageProof(Stage.MODEL,
                                                                                                  provider=""))
    assert place_words.where(eager).endswith(f"; made by {Stage.MODEL.value}")
    assert eager.remedy.stage is Stage.MODEL and not eager.remedy.provider


def test_a_proof_built_without_a_measurement_says_so():
    by_hand = StageProof(Stage.ORT_OPTIMIZER, "P", Symptom(1.0, 2.0, 0, "y"))
    assert place_words.proof(by_hand) == ("ONNX Runtime's graph optimizations, pass P: with it y errs 1 from float64 "
                                          "(2 times its bound); without it alone (not measured), not measured "
                                          "(bisected over 0 passes in 0 trials)")
    assert place_words.symptom(None) == place_words.config(None) == place_words.NOT_MEASURED


def test_a_reproductions_run_is_worded_from_its_counts():
    ran = Reproduction("", True, 9, 0, 1.4900935, 0, 0.0, "with Pad_Fusion: 1.4900935 without: 0.0")
    assert place_words.reproduction(ran) == (
        "with the pass 0 of 9 values non-finite where eager's are finite, the rest apart by 1.49; without it 0 "
        "non-finite, apart by 0 (it prints: with Pad_Fusion: 1.4900935 without: 0.0)")
    assert place_words.reproduction(Reproduction("", False, 4, 4, 0.0, 0, 0.0)).endswith("apart by 0")
