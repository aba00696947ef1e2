import json

import pandas as pd

from exactness.workbook.artifacts import RunArtifacts


def test_summary_merges_and_stays_standard_json(tmp_path):
    import numpy as np

    artifacts = RunArtifacts(tmp_path)
    artifacts.summary(a=np.float32(0.5), b=float("nan"))
    artifacts.summary(c={"ours": np.int64(3)}, a=1)
    assert json.loads((tmp_path / "summary.json").read_text()) == {"a": 1, "b": "nan", "c": {"ours": 3}}


def test_tables_and_figures_go_into_their_folders(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    artifacts = RunArtifacts(tmp_path)
    assert artifacts.table("t", pd.DataFrame({"x": [1]})) == tmp_path / "tables" / "t.parquet"
    fig, _ = plt.subplots()
    assert artifacts.figure("f", fig).stat().st_size > 0


def test_outside_a_run_files_go_to_scratch(tiny_project, monkeypatch):
    monkeypatch.delenv("EXACTNESS_RUN_DIR", raising=False)
    artifacts = RunArtifacts.current("ok")
    assert artifacts.interactive and artifacts.folder == tiny_project / "outputs" / "scratch" / "ok"
    monkeypatch.setenv("EXACTNESS_RUN_DIR", "/somewhere")
    assert not RunArtifacts.current("ok").interactive
