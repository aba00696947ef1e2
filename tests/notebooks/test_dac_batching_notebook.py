"""End to end: the DAC batching study on its smoke parameters through the real CLI."""

import json
import subprocess
import sys

import pandas as pd

from browser import inspect_page
from conftest import REPO, cli_env


def test_dac_batching_smoke_run(tmp_path):
    result = subprocess.run([sys.executable, "-m", "exactness.cli", "--out", str(tmp_path), "run", "dac_batching",
                             "-f", "smoke"], capture_output=True, text=True, env=cli_env(REPO), timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    (folder,) = (tmp_path / "dac_batching").iterdir()
    table = pd.read_parquet(folder / "tables" / "batching.parquet")
    assert {"clip", "stage", "first_diff_from_end", "receptive_field", "bit_identical_before"} <= set(table.columns)
    summary = json.loads((folder / "summary.json").read_text())
    assert 0 < summary["padding_tail_latent_frames"] <= summary["receptive_field_frames"] + 1
    page = inspect_page(folder / "report.html")
    assert page["errors"] == [] and page["error_outputs"] == 0 and len(page["images"]) >= 2
