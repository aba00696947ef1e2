"""End to end: the ulp-noise study on its smoke parameters through the real CLI."""

import json
import re

import numpy as np
import pandas as pd
import pytest

from browser import inspect_page
from conftest import REPO, smoke_run

pytestmark = pytest.mark.slow  # a smoke batch, a browser or a benchmark: the fast tier leaves it out


@pytest.fixture(scope="module")
def ulp_run(smoke_batch):
    return smoke_run(smoke_batch, "ulp_noise")


def test_noise_table_has_one_row_per_draw_and_tensor(ulp_run):
    noise = pd.read_parquet(ulp_run / "tables" / "noise.parquet")
    columns = {"seed", "tensor", "depth", "max_abs_diff", "max_ulp", "p99_ulp", "median_ulp", "rel_rms"}
    assert columns <= set(noise.columns)
    assert sorted(noise.seed.unique()) == [0, 1, 2, 3]
    per_draw = noise.groupby("seed").tensor.count()
    assert (per_draw == per_draw.iloc[0]).all() and per_draw.iloc[0] > 50
    assert (noise.max_ulp >= 0).all()


def test_settings_cover_levels_and_threads(ulp_run):
    settings = pd.read_parquet(ulp_run / "tables" / "settings.parquet")
    assert set(settings.setting) == {"ort_optimization", "ort_threads", "eager_threads"}
    assert set(settings[settings.setting == "ort_optimization"].value) == {"disabled", "basic", "extended", "all"}


def test_summary_and_report(ulp_run):
    summary = json.loads((ulp_run / "summary.json").read_text())
    assert summary["logits_median_max_abs_diff"]["seed"] == 9.5e-6
    assert 0 < summary["logits_median_max_abs_diff"]["ours"] < 1e-3
    page = inspect_page(ulp_run / "report.html")
    assert page["errors"] == [] and page["error_outputs"] == 0 and len(page["images"]) >= 3


def test_summary_carries_computed_findings_that_do_not_compare_a_static_export_with_the_seed(ulp_run):
    found = json.loads((ulp_run / "summary.json").read_text())["findings"]
    assert 3 <= len(found) <= 7
    medians = found[0]
    # the smoke set exports statically, the seed measured the dynamic export: its medians sit beside, unjudged
    assert medians["verdict"] == "not comparable" and "dynamic" in medians["why"] and "section 3" in medians["source"]
    assert "range of 4 draws" in medians["ours"]  # 4 draws are too few for a 95% interval of the median
    assert all(f["verdict"] in ("new", "not comparable") for f in found)


def test_report_opens_with_findings_and_hides_nothing_for_the_reader(ulp_run):
    page = (ulp_run / "report.html").read_text()
    assert page.index("exactness-findings") < page.index("What is measured")
    block = page[page.index('<section class="exactness-findings"'):]
    block = block[:block.index("</section>")]
    assert "exactness-pending" not in page and "PosixPath" not in page and not re.search(r"\binf\b", block)
    assert "IProgress" not in page and "Warning" not in page
    assert page.count("<figcaption") >= 3 and 'alt=""' not in page


def test_parameters_cell_is_smoke_sized_and_default_yaml_keeps_the_main_job():
    from exactness.workbook import parameters

    notebook, params = REPO / "notebooks" / "ulp_noise.ipynb", REPO / "params" / "ulp_noise"
    plain = parameters.resolve(notebook, [], [])
    assert plain == parameters.resolve(notebook, [params / "smoke.yaml"], [])  # "Run All" runs the smoke set
    default = parameters.resolve(notebook, [params / "default.yaml"], [])
    assert (default["n_draws"], default["shape_mode"], default["reference_draws"], default["settings_draws"]) == \
        (100, "dynamic", 3, 3)
    paper = parameters.resolve(notebook, [params / "paper.yaml"], [])
    assert (paper["n_draws"], paper["shape_mode"], paper["reference_draws"], paper["settings_draws"]) == \
        (300, "dynamic", 5, 5)


def test_growth_is_measured_per_layer_kind_in_relative_and_absolute_terms(ulp_run):
    noise = pd.read_parquet(ulp_run / "tables" / "noise.parquet")
    located = noise.dropna(subset=["worst_of_rms"])
    assert len(located) and (located.worst_of_rms >= 0).all() and noise.model_output.any()
    kinds = pd.read_parquet(ulp_run / "tables" / "growth_by_kind.parquet")
    growth = pd.read_parquet(ulp_run / "tables" / "growth.parquet")
    finite = growth[np.isfinite(growth.absolute_factor) & np.isfinite(growth.relative_factor)]
    # every kind with a measured factor, "linear" among them (a norm reading an exact tensor has none)
    assert set(kinds.kind) == set(finite.kind) and "linear" in set(kinds.kind) and (kinds.relative_factor > 0).all()
    assert kinds.role.str.len().gt(0).all()  # what each kind does: in the table, not in a sentence
    found = json.loads((ulp_run / "summary.json").read_text())["findings"]
    growth_claim = next(f for f in found if "relative noise" in f["claim"])
    assert "relative" in growth_claim["ours"] and "Median factor per layer kind" not in growth_claim["claim"]
    assert any("in ulps of each tensor's RMS the worst" in f["claim"] and "worst element" in f["ours"] for f in found)
