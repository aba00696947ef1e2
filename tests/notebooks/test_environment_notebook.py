"""End to end: the environment study through the real CLI, its report and the index in a real browser."""

import json

import pandas as pd
import pytest

from browser import inspect_page
from conftest import REPO, smoke_run

pytestmark = pytest.mark.slow  # a smoke batch, a browser or a benchmark: the fast tier leaves it out


@pytest.fixture(scope="module")
def environment_run(smoke_batch):
    """The environment run of the session's smoke batch (`run all -f smoke` with a HOME of its own)."""
    outputs, home = smoke_batch
    return smoke_run(smoke_batch, "environment"), outputs, home


def test_environment_run_writes_tables_figures_and_summary(environment_run):
    folder, _, _ = environment_run
    spacing = pd.read_parquet(folder / "tables" / "float_spacing.parquet")
    assert spacing.magnitude.tolist() == [0.001, 1.0, 1000.0]  # smoke.yaml's magnitudes
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["float32_ulp_at_1"] == 2.0**-23
    assert (folder / "figures" / "float_spacing.png").stat().st_size > 1000


def test_nothing_is_written_into_home(environment_run):
    _, _, home = environment_run
    assert list(home.iterdir()) == []


def test_report_renders_in_a_browser_with_figures_and_no_errors(environment_run):
    folder, _, _ = environment_run
    page = inspect_page(folder / "report.html")
    assert page["errors"] == []
    assert page["error_outputs"] == 0
    assert page["images"] and all(w > 0 and h > 0 and shown_w > 0 for w, h, shown_w, _ in page["images"])
    assert "Subnormal" in page["text"] or "flushed" in page["text"]


def test_index_renders_and_links_the_report(environment_run):
    folder, outputs, _ = environment_run
    page = inspect_page(outputs / "index.html")
    assert page["errors"] == []
    assert folder.name in page["text"] and "passed" in page["text"]


def test_report_opens_with_computed_findings(environment_run):
    folder, _, _ = environment_run
    found = json.loads((folder / "summary.json").read_text())["findings"]
    # smoke has no magnitude 10; the spacings are arithmetic checked, a fact, never "reproduced"
    assert 3 <= len(found) <= 7 and [f["verdict"] for f in found].count("fact") == 1
    assert all(f["verdict"] in ("new", "fact") for f in found)
    assert any("IEEE 754" in f["claim"] for f in found) and any("subnormal" in f["claim"].lower() for f in found)
    page = (folder / "report.html").read_text()
    assert page.index("exactness-findings") < page.index("Which software versions ran?")
    assert "exactness-pending" not in page and "PosixPath" not in page and "<figcaption" in page


def test_parameters_cell_is_smoke_sized_and_default_yaml_keeps_the_main_jobs_magnitudes():
    from exactness.workbook import parameters

    notebook, default = REPO / "notebooks" / "environment.ipynb", REPO / "params" / "environment" / "default.yaml"
    assert parameters.resolve(notebook, [], [])["magnitudes"] == [0.001, 1.0, 1000.0]
    assert parameters.resolve(notebook, [default], [])["magnitudes"] == [0.001, 0.01, 0.1, 1.0, 10.0, 100.0, 1000.0]
