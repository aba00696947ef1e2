"""End to end: the DAC batching study on its smoke parameters through the real CLI."""

import json

import pandas as pd

from browser import inspect_page
from conftest import run_study


def test_dac_batching_smoke_run(tmp_path):
    folder = run_study("dac_batching", tmp_path, "-f", "smoke")
    table = pd.read_parquet(folder / "tables" / "batching.parquet")
    assert {"clip", "stage", "first_diff_from_end", "receptive_field", "bit_identical_before"} <= set(table.columns)
    summary = json.loads((folder / "summary.json").read_text())
    assert 0 < summary["padding_tail_latent_frames"] <= summary["receptive_field_frames"] + 1
    page = inspect_page(folder / "report.html")
    assert page["errors"] == [] and page["error_outputs"] == 0 and len(page["images"]) >= 2
