"""Every way the rows can show a defect reads as its own sentence, naming the seed and the numbers that prove it
(the rarer signs are never reached by a default run or a smoke batch, so their words are checked here)."""

from __future__ import annotations

import pytest

from exactness.engine import verdict_words
from exactness.engine.evidence import Defect, DefectSign

COMMON = {"seed": 17, "output": "logits", "count": 3, "of": 64, "eager_count": 1, "ort_error": 0.25,
          "eager_error": 1.5e-7, "times": 1.7e6, "bound": 4.5e-7, "forced_difference": 0.031, "op_type": "ArgMax",
          "node": "node_ArgMax_12", "margin_ulps": 812.0, "reach_ulps": 9.5}
SHOWN = {  # what each sign's sentence must carry from the evidence
    DefectSign.SHAPE: ("logits", "shape"),
    DefectSign.DTYPE: ("logits", "dtype"),
    DefectSign.NONFINITE_OUTPUT: ("logits", "3 of 64"),
    DefectSign.BEYOND_NOISE: ("0.25", "1.5e-07", "1.7e+06", "4.5e-07"),
    DefectSign.NOT_EXPLAINED: ("0.031", "forcing"),
    DefectSign.NONFINITE_INPUT: ("ArgMax in quantizer", "3 of 64", "1 in eager"),
    DefectSign.FLIP_AMONG_NONFINITE: ("ArgMax in quantizer", "not all finite"),
    DefectSign.FLIP_BEYOND_REACH: ("ArgMax in quantizer", "812", "9.5"),
    DefectSign.NAN_IN_EAGER: ("logits", "3 of 64", "eager float32 itself"),
}


@pytest.mark.parametrize("sign", list(DefectSign))
def test_each_defect_sign_reads_as_its_own_sentence_with_its_numbers(sign):
    words = verdict_words.defect(Defect(sign=sign, scope="quantizer", **COMMON))
    assert words.startswith("seed 17: ")
    for shown in SHOWN[sign]:
        assert shown in words, (sign, words)
    others = {verdict_words.defect(Defect(sign=s, scope="quantizer", **COMMON)) for s in DefectSign if s is not sign}
    assert words not in others


def test_an_op_without_a_module_is_named_by_its_graph_node():
    words = verdict_words.defect(Defect(sign=DefectSign.FLIP_AMONG_NONFINITE, **COMMON))
    assert "ArgMax (ONNX node node_ArgMax_12 of the exported graph)" in words


def test_nan_in_eager_at_an_op_names_the_op_and_both_counts():
    words = verdict_words.defect(Defect(sign=DefectSign.NAN_IN_EAGER, **{**COMMON, "output": ""}, scope="quantizer"))
    assert "ArgMax in quantizer" in words and "(1 of 64 decisions" in words and "3 in ORT" in words
