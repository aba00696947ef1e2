"""End to end: the discrete-ops study on its smoke parameters through the real CLI."""

import json

import pandas as pd
import pytest

from browser import inspect_page
from conftest import smoke_run


@pytest.fixture(scope="module")
def discrete_ops_run(smoke_batch):
    return smoke_run(smoke_batch, "discrete_ops")  # the session's `run all -f smoke`


def test_tables_have_the_promised_columns(discrete_ops_run):
    tables = discrete_ops_run / "tables"
    ops = pd.read_parquet(tables / "ops.parquet")
    assert {"model", "node", "op_type", "scope", "reaches_outputs", "on_output_path"} <= set(ops.columns)
    margins = pd.read_parquet(tables / "margins.parquet")
    assert {"model", "seed", "node", "min_margin", "min_margin_ulps", "exact_ties", "flipped"} <= set(margins.columns)
    counterfactual = pd.read_parquet(tables / "counterfactual.parquet")
    assert {"model", "seed", "output", "max_abs_diff", "max_ulps_of_scale", "explained_by_flip"} <= set(
        counterfactual.columns)
    verdicts = pd.read_parquet(tables / "verdicts.parquet").set_index("model")
    assert {"skip_reason_reference", "discrete_ops_on_outputs", "tie_fraction", "flip_rate", "rate_low", "rate_high",
            "verdict"} <= set(verdicts.columns)
    # the control has nothing that can flip on its outputs; XLM's top-k reaches its index outputs
    assert verdicts.loc["BertModel", "discrete_ops_on_outputs"] == 0
    assert verdicts.loc["XLMForQuestionAnswering", "discrete_ops_on_outputs"] == 2
    assert "end_top_index" in verdicts.loc["XLMForQuestionAnswering", "skip_reason_reference"]


def test_summary_carries_findings_and_report_opens_with_them(discrete_ops_run):
    summary = json.loads((discrete_ops_run / "summary.json").read_text())
    assert 3 <= len(summary["findings"]) <= 7 and summary["classes"] == 2
    page = (discrete_ops_run / "report.html").read_text()
    assert page.index("exactness-findings") < page.index("What is measured")
    assert "exactness-pending" not in page and "PosixPath" not in page


def test_report_renders_with_figures_and_no_errors(discrete_ops_run):
    page = inspect_page(discrete_ops_run / "report.html")
    assert page["errors"] == [] and page["error_outputs"] == 0
    assert len(page["images"]) >= 2 and all(w > 0 and h > 0 for w, h, _, _ in page["images"])
