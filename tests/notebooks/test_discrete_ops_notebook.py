"""End to end: the discrete-ops study on its smoke parameters through the real CLI."""

import json

import pandas as pd
import pytest

from browser import inspect_page
from conftest import smoke_run

pytestmark = pytest.mark.slow  # a smoke batch, a browser or a benchmark: the fast tier leaves it out


@pytest.fixture(scope="module")
def discrete_ops_run(smoke_batch):
    return smoke_run(smoke_batch, "discrete_ops")  # the session's `run all -f smoke`


def test_tables_have_the_promised_columns(discrete_ops_run):
    tables = discrete_ops_run / "tables"
    ops = pd.read_parquet(tables / "ops.parquet")
    assert {"model", "node", "op_type", "scope", "reaches_outputs", "on_output_path"} <= set(ops.columns)
    margins = pd.read_parquet(tables / "margins.parquet")
    assert {"model", "seed", "node", "min_margin", "min_margin_ulps", "exact_ties", "flipped",
            "reads_nonfinite_ort"} <= set(margins.columns)
    outputs = pd.read_parquet(tables / "outputs.parquet")
    assert {"eager_f64_err", "ort_f64_err", "noise_bound", "within_noise", "explained_by_flip"} <= set(outputs.columns)
    verdicts = pd.read_parquet(tables / "verdicts.parquet").set_index("model")
    # the control has nothing that can flip on its outputs; XLM's top-k picks among exact ties
    assert verdicts.loc["BertModel", "cause"] == "nothing reaches"
    assert verdicts.loc["XLMForQuestionAnswering", "cause"] == "exact tie"
    assert "end_top_index" in verdicts.loc["XLMForQuestionAnswering", "skip_reason"]
    assert verdicts.loc["XLMForQuestionAnswering", "verified"]


def test_summary_carries_answers_and_the_report_opens_with_them(discrete_ops_run):
    summary = json.loads((discrete_ops_run / "summary.json").read_text())
    answers = {a["class"]: a for a in summary["answers"]}
    tf32 = " · eager CPU fp32 vs eager CPU TF32 convolutions (emulated)"  # the smoke set's one emulated pair
    assert set(answers) == {"BertModel", "XLMForQuestionAnswering", "BertModel" + tf32,
                            "XLMForQuestionAnswering" + tf32} and summary["classes"] == 2
    assert answers["BertModel" + tf32]["cause"] == "never fails here"  # no convolution: TF32 changes nothing
    xlm = answers["XLMForQuestionAnswering"]
    assert xlm["cause"] == "exact tie" and "end_top_index" in xlm["exclude"] and "cls_logits" in xlm["compare"]
    assert xlm["failures_per_40000"] is not None and xlm["verified"]
    assert 2 <= len(summary["findings"]) <= 7
    page = (discrete_ops_run / "report.html").read_text()
    assert page.index("exactness-answers") < page.index("exactness-findings") < page.index("What is measured")
    assert "exactness-pending" not in page and "PosixPath" not in page


def test_report_renders_with_figures_and_no_errors(discrete_ops_run):
    page = inspect_page(discrete_ops_run / "report.html")
    assert page["errors"] == [] and page["error_outputs"] == 0
    assert len(page["images"]) >= 2 and all(w > 0 and h > 0 for w, h, _, _ in page["images"])
