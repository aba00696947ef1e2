"""The report checks must see what they claim to: missing-value markers, classes folded out of a class table,
empty sections, what the first screen shows, and leftovers in the text."""

import pytest

from browser import inspect_page, leftovers

pytestmark = pytest.mark.slow  # a smoke batch, a browser or a benchmark: the fast tier leaves it out


def test_probe_sees_markers_hidden_classes_empty_sections_and_the_first_screen(tmp_path):
    page = tmp_path / "leftovers.html"
    page.write_text(
        "<html><head></head><body><section class=\"exactness-answers\"><h2>Answers</h2><p>x</p></section>"
        "<h2>Empty section</h2><h2>Full section</h2><p>text</p>"
        "<table><thead><tr><th>class</th></tr></thead><tbody><tr><td>A</td></tr></tbody></table>"
        "<details><summary>1 more row</summary><table><thead><tr><th>class</th></tr></thead>"
        "<tbody><tr><td>B</td></tr><tr><td>A</td></tr></tbody></table></details>"
        "<table><tbody><tr><td>&lt;NA&gt;</td><td>nan</td><td>0.5</td></tr></tbody></table>"
        "<div style=\"height: 2000px\"></div><section class=\"exactness-findings\"><ol><li>x</li></ol></section>"
        "</body></html>")
    seen = inspect_page(page)
    assert seen["markers"] == ["<NA>", "nan"] and seen["hidden_classes"] == ["B"]
    assert seen["empty_sections"] == ["Empty section"]
    assert [e["kind"] for e in seen["first_screen"]] == ["answers"]  # the findings lie below 900 px


def test_leftovers_in_text_are_named_and_sound_text_passes():
    bad = "1 failures in 3 draw(s); seed 002 and 000_7a466a87a0836576; seed 1,371,433,937; node_topk_1__1 flipped"
    assert set(leftovers(bad)) == {"a plural with (s)", "a plural after one", "an investigation called a seed",
                                   "a seed with thousands separators", "a node name without its module"}
    good = ("1 failure in 40,000 seeds, 21 failures; seed 1371433937; TopK node_topk_1 in model.encoder.layer.0; "
            "0 of 1 checked seed; 2,000 seeds screened")
    assert leftovers(good) == {}


def test_issue_44s_leftovers_are_named_and_their_one_shapes_pass():
    bad = ("40 per 40,000 seeds; bounded below 0.0015; the flip rate is below 0.0015; (95%: at most 1 in 3); "
           "exact ties at 0.1; growth ∞; "
           "build_path; rewritten by gathered_graph; initializer 'view_3'; the `topk` over *tied* scores")
    assert set(leftovers(bad)) == {"a rate per 40,000", "a rate as a probability", "a zero drawn on a log axis",
                                   "infinity as a figure", "a function or field name", "an ONNX initializer's name",
                                   "Markdown shown raw"}
    good = ("1 in 1,000 (95% 1 in 3,600 to 1 in 270; 2 of 2,000 seeds); none in 8 seeds: at most 1 in 3.1 (95% "
            "bound); never (no discrete op can flip); 15 failures in 40,000 seeds; ArgMax (ONNX node node_argmax_1 "
            "of the exported graph); 2 * 3 = 6; its error is at most 0.094 of the noise bound")
    assert leftovers(good) == {}


def test_the_probe_sees_text_cut_off(tmp_path):
    page = tmp_path / "cut.html"
    page.write_text("<html><head></head><body><p style=\"width: 80px; white-space: nowrap; overflow: hidden; "
                    "text-overflow: ellipsis\">a long line that a reader cannot finish reading</p>"
                    "<p style=\"width: 80px\">a long line that wraps, all of it shown</p></body></html>")
    assert inspect_page(page)["cut_off"] == ["a long line that a reader cannot finish reading"]
