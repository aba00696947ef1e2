"""The GPU command, tested on a CPU for everything but the CUDA calls: it writes what a near_tie run reads back."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import REPO
from exactness.studies.near_tie import gpu_run, precision


@pytest.mark.slow
def test_the_gpu_command_runs_without_a_gpu_and_writes_a_readable_folder(tmp_path):
    out = tmp_path / "gpu"
    env = {**os.environ, "PYTHONPATH": str(REPO / "lib")}
    done = subprocess.run([sys.executable, "-m", "exactness.gpu", "--out", str(out), "--seeds", "30",
                           "--calibration", "10", "--workers", "1", "--skip-dac"], capture_output=True, text=True,
                          env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    facts = json.loads((out / "machine.json").read_text())
    assert facts["errors"] == [] and facts["seeds"] == 30
    assert all(facts["proofs"]["logits_fast_equals_plain"].values())
    assert any("no CUDA device" in s for s in facts["skipped"])  # this machine has none: said, not hidden
    run = gpu_run.read(str(out))
    assert set(run.table.pair) == {p for p in facts["pairs"]}
    assert len(run.table) == 30 * len(facts["pairs"])
    assert {s.held_out for s in precision.summarize(run.table)} == {20}
    assert set(run.probe.columns) >= {"layer", "emulated_changes"}
