"""End to end: the DAC batching study on its smoke parameters through the real CLI."""

import json

import pandas as pd
import pytest

from browser import inspect_page
from conftest import smoke_run

pytestmark = pytest.mark.slow  # a smoke batch, a browser or a benchmark: the fast tier leaves it out


def test_dac_batching_smoke_run(smoke_batch):
    folder = smoke_run(smoke_batch, "dac_batching")
    table = pd.read_parquet(folder / "tables" / "batching.parquet")
    assert {"clip", "stage", "first_diff_from_end", "receptive_field", "bit_identical_before"} <= set(table.columns)
    summary = json.loads((folder / "summary.json").read_text())
    assert 0 < summary["padding_tail_latent_frames"] <= summary["receptive_field_frames"] + 1
    claims = [f["claim"] for f in summary["findings"]]
    assert 3 <= len(claims) <= 7 and "not broken" in claims[0]
    # every changed frame counted, those above the threshold within them
    assert summary["padding_tail_latent_frames"] <= summary["padding_changed_latent_frames"]
    assert f"changes the last {summary['padding_changed_latent_frames']} latent frames" in claims[0]
    assert "float32 ulps of it" in claims[0] and "rounding" not in claims[0]
    repair = pd.read_parquet(folder / "tables" / "repair.parquet").iloc[0]  # the recommended fix, measured
    assert repair.code_frames_after == 0 and "measured below" in claims[0] and "recompute its last" in claims[-1]
    assert isinstance(summary["batch_size_code_frames"], int)  # frames that differ, counted
    page = inspect_page(folder / "report.html")
    assert page["errors"] == [] and page["error_outputs"] == 0 and len(page["images"]) >= 2
    html = (folder / "report.html").read_text()
    assert html.index("Findings") < html.index("How much context") and "Not computed yet" not in html
    assert "PosixPath" not in html and "<Axes" not in html
