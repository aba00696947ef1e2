"""End to end: the ulp-noise study on its smoke parameters through the real CLI."""

import json

import pandas as pd
import pytest

from browser import inspect_page
from conftest import run_study


@pytest.fixture(scope="module")
def ulp_run(tmp_path_factory):
    return run_study("ulp_noise", tmp_path_factory.mktemp("outputs"), "-f", "smoke", "-p", "near_tie_run", "''")


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
