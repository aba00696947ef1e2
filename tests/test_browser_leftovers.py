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
