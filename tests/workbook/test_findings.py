import json

import pytest

from exactness.workbook import findings
from exactness.workbook.artifacts import RunArtifacts
from exactness.workbook.findings import Finding, FindingError


def test_a_verdict_outside_the_four_words_is_refused():
    with pytest.raises(FindingError, match="not one of reproduced, differs, not comparable, new"):
        Finding(claim="x", ours="1", verdict="confirmed")


def test_reproduced_and_differs_need_the_investigations_figure_and_new_has_none():
    with pytest.raises(FindingError, match="needs the investigation's figure"):
        Finding(claim="x", ours="1", verdict="reproduced")
    with pytest.raises(FindingError, match="has no investigation.s figure"):
        Finding(claim="x", ours="1", verdict="new", source="2 (transformers #50575, section 5)")
    with pytest.raises(FindingError, match="says why"):
        Finding(claim="x", ours="1", verdict="differs", source="2 (transformers #50575, section 5)")


def test_records_round_trip_through_summary_json_and_bad_records_are_skipped(tmp_path):
    kept = [Finding(claim="a", ours="1", verdict="new", evidence="tables/t.parquet"),
            Finding(claim="b", ours="2", verdict="differs", source="3 (transformers #50575, section 5)",
                    why="unexplained")]
    RunArtifacts(tmp_path).summary(findings=[f.to_dict() for f in kept])
    summary = json.loads((tmp_path / "summary.json").read_text())
    summary["findings"].append({"claim": "c", "ours": "1", "verdict": "maybe"})
    summary["findings"].append("not a record")
    assert findings.from_summary(summary) == kept
    assert findings.from_summary(None) == [] and findings.from_summary({"findings": 3}) == []


def test_html_shows_each_verdict_word_and_escapes_the_claims():
    page = findings.to_html([Finding(claim="a < b", ours="1", verdict="new"),
                             Finding(claim="c", ours="2", verdict="not comparable", why="other model")])
    assert page.index("exactness-findings") < page.index("a &lt; b")
    assert "verdict-new" in page and "verdict-not-comparable" in page and "why: other model" in page


def test_rate_text_is_the_one_rate_shape_and_none_is_a_bound():
    assert findings.rate_text(0, 2000) == "no failures in 2,000 seeds: at most 1 in 670 (95% bound)"
    assert findings.rate_text(15, 40000).startswith("failures 1 in 2,700 (95% 1 in ")
    assert findings.rate_text(15, 40000).endswith("; 15 of 40,000 seeds)")
    assert "inf" not in findings.rate_text(0, 1) and findings.one_in(0.0) == "none"


def test_rate_verdict_follows_the_counts():
    verdict, why = findings.rate_verdict(0, 2000, 15, 40000)  # P(0) = 0.47: this sample could not have disagreed
    assert verdict == "not comparable" and "0.75 were expected" in why and "none at all would agree too" in why
    verdict, why = findings.rate_verdict(12, 40000, 15, 40000)
    assert verdict == "reproduced" and "consistent" in why
    verdict, why = findings.rate_verdict(30, 2000, 15, 40000)
    assert verdict == "differs" and "inconsistent" in why


def test_findings_fill_the_placeholder_at_the_top_of_an_executed_notebook(tmp_path):
    import nbformat
    import papermill
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    nb = new_notebook()
    nb.metadata["kernelspec"] = {"name": "exactness", "display_name": "Python (exactness)", "language": "python"}
    nb.cells = [new_markdown_cell("# T"),
                new_code_cell("from exactness.workbook import findings as F\nF.placeholder()"),
                new_code_cell("x = 2"),
                new_code_cell("F.show([F.Finding(claim=f'x is {x}', ours=str(x), verdict='new')])")]
    nbformat.write(nb, tmp_path / "in.ipynb")
    papermill.execute_notebook(str(tmp_path / "in.ipynb"), str(tmp_path / "out.ipynb"), kernel_name="exactness",
                               progress_bar=False)
    executed = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    top = executed.cells[1].outputs[0]["data"]["text/html"]
    assert "x is 2" in top and "Not computed yet" not in top
    assert executed.cells[3].outputs == []  # nothing else is printed where the findings are computed


def test_span_prints_one_value_when_both_ends_print_the_same():
    from exactness.workbook.findings import span
    assert span(2.1e-6, 2.14e-6) == "2.1e-06"
    assert span(0.19, 0.95) == "0.19 to 0.95" and span(1, 2, "..") == "1.0..2.0"


def test_a_script_is_written_whole_under_a_safe_name(tmp_path):
    from exactness.workbook.artifacts import RunArtifacts

    path = RunArtifacts(tmp_path).script("reproduce_/abs/my_model.py:build", "print('x')\n")
    assert path.parent == tmp_path / "scripts" and path.name == "reproduce__abs_my_model.py_build.py"
    assert path.read_text() == "print('x')\n"
