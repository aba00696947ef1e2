"""End to end: the DAC propagation study on its smoke parameters through the real CLI."""

import json

import pandas as pd
import pytest

from browser import inspect_page
from conftest import smoke_run

pytestmark = pytest.mark.slow  # a smoke batch, a browser or a benchmark: the fast tier leaves it out


def test_dac_propagation_smoke_run(smoke_batch):
    folder = smoke_run(smoke_batch, "dac_propagation")
    table = pd.read_parquet(folder / "tables" / "propagation.parquet")
    assert {"variant", "layer", "depth", "max_abs_err", "mean_abs_err", "growth", "act_rms", "rel_err"} <= set(
        table.columns)
    assert set(table.init) == {"default", "variance_preserving"}
    others = pd.read_parquet(folder / "tables" / "other_variants.parquet")  # smoke.yaml asks for the tiny one again
    assert list(others.variant) == ["tiny", "tiny"] and others.fold_fp32_exact.all()
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["fold_fp32_bit_identical"] is True
    assert summary["default_encoder_error"]["seed"] == 2.75e-2
    verdicts = [f["verdict"] for f in summary["findings"]]
    assert len(verdicts) == 8 and verdicts[0] == "fact"  # the float32 fold is the same call: equal by construction
    assert summary["findings"][-1]["claim"].startswith("On the other configurations")
    # the tiny model is never set against the seed's 44.1 kHz figures; the configuration check is variant-free
    assert verdicts[1:6] == ["not comparable"] * 5
    page = inspect_page(folder / "report.html")
    assert page["errors"] == [] and page["error_outputs"] == 0 and len(page["images"]) >= 2
    html = (folder / "report.html").read_text()
    assert html.index("Findings") < html.index("The runs.") and "Not computed yet" not in html
    assert "PosixPath" not in html and "<Axes" not in html


def test_a_checkpoint_of_your_own_runs_in_the_inits_place_through_the_real_cli(tmp_path):
    import subprocess
    import sys

    from conftest import REPO, cli_env
    from dac_files import write_original
    from exactness.models import dac

    write_original(tmp_path / "trained.pth", dac.template("tiny", 3), trained=True)
    outputs = tmp_path / "outputs"
    result = subprocess.run([sys.executable, "-m", "exactness", "--out", str(outputs), "run", "dac_propagation", "-f",
                             "smoke", "-p", "checkpoint", str(tmp_path / "trained.pth"), "-p", "other_variants", "[]",
                             "-p", "precisions", "[]"], capture_output=True, text=True,
                            env=cli_env(REPO, tmp_path / "home"), timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (folder,) = (outputs / "dac_propagation").iterdir()
    weights = pd.read_parquet(folder / "tables" / "weights.parquet")
    assert set(weights.init) == {"trained.pth"}
    # the float32 fold is the recomputation's own call on the checkpoint's (g, v); float64 folds them otherwise
    assert weights[weights.variant == "folded_fp32"].max_abs_diff.max() == 0
    assert weights[weights.variant == "folded_fp64"].max_abs_diff.max() > 0
    summary = json.loads((folder / "summary.json").read_text())
    assert [a["subject"] for a in summary["answers"]] == ["trained.pth, folded in float32",
                                                         "trained.pth, folded in float64"]
    html = (folder / "report.html").read_text()
    assert "random weights make the codec error large" not in html and "trained.pth" in html
