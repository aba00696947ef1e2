"""Bad values that used to pass the up-front checks and fail after the environment study (issue 28, item 9):
each is refused in one line before anything is created."""

import json
import os
import subprocess
import sys

import pytest

from conftest import REPO, cli_env
from exactness.workbook import study_rules
from exactness.workbook.parameter_rules import StudyParameterError


def _run(*arguments, tmp_path):
    done = subprocess.run([sys.executable, "-m", "exactness", "--out", str(tmp_path / "out"), "run", *arguments],
                          capture_output=True, text=True, env=cli_env(REPO, tmp_path), timeout=120)
    return done.returncode, done.stderr


def test_a_kernel_set_this_cpu_lacks_is_refused_before_the_environment_runs(monkeypatch):
    from exactness.workbook import machine

    monkeypatch.setattr(machine, "cpu_facts", lambda: {"vector_extensions": ["sse2", "avx", "avx2"]})
    with pytest.raises(StudyParameterError, match="cpu_kernels 'avx512' needs"):
        study_rules.check("near_tie", {"cpu_kernels": ["native", "avx512"]})


def test_a_near_tie_run_that_is_another_studys_or_whose_checks_are_cut_is_refused(tmp_path):
    environment = tmp_path / "env-run"
    (environment / "tables").mkdir(parents=True)
    (environment / "manifest.json").write_text(json.dumps({"study": "environment"}))
    with pytest.raises(StudyParameterError, match="a run of environment, not of near_tie"):
        study_rules.check("ulp_noise", {"near_tie_run": str(environment)})
    near_tie = tmp_path / "near-tie-run"
    (near_tie / "tables").mkdir(parents=True)
    (near_tie / "manifest.json").write_text(json.dumps({"study": "near_tie"}))
    (near_tie / "tables" / "checks.parquet").write_bytes(b"PAR1 cut short")
    with pytest.raises(StudyParameterError, match="tables/checks.parquet cannot be read"):
        study_rules.check("ulp_noise", {"near_tie_run": str(near_tie)})


def test_a_huge_scheduler_host_and_too_many_seeds_are_refused_with_their_size():
    with pytest.raises(StudyParameterError, match="100,011 characters"):
        study_rules.check("near_tie", {"scheduler": "tcp://" + "a" * 100_000 + ":8786"})
    with pytest.raises(StudyParameterError, match="n_seeds must be at most 1e\\+07"):
        study_rules.check("near_tie", {"n_seeds": 10**12})


@pytest.mark.slow
def test_a_long_or_repeated_parameter_file_is_one_line_before_anything_is_created(tmp_path):
    for name in ("x" * 250, "y" * 300):  # a name that fits a file name, one that cannot
        code, err = _run("environment", "-f", name, tmp_path=tmp_path)
        assert code == 2 and "no parameter set" in err and len(err.strip().splitlines()) == 1
        assert not (tmp_path / "out").exists()
    code, err = _run("environment", *(["-f", "smoke"] * 50), tmp_path=tmp_path)
    assert code == 0, err
    (run,) = os.listdir(tmp_path / "out" / "environment")
    assert len(run) < 80 and "smoke+49more" in run


@pytest.mark.parametrize("address", ["foo://h:1", "tls://scheduler:8786", "ucx://h:13337", "inproc://h:1"])
def test_a_scheduler_address_dask_cannot_reach_without_settings_is_refused_up_front(address):
    with pytest.raises(StudyParameterError, match=r"scheduler must be empty .*tcp://host:port"):
        study_rules.check("near_tie", {"scheduler": address})
    study_rules.check("near_tie", {"scheduler": "tcp://node-1.cluster:8786"})


def test_a_near_tie_run_whose_tables_lack_the_columns_read_is_refused_naming_file_and_columns(tmp_path):
    import pandas as pd

    near_tie = tmp_path / "near-tie-run"
    (near_tie / "tables").mkdir(parents=True)
    (near_tie / "manifest.json").write_text(json.dumps({"study": "near_tie"}))
    pd.DataFrame({"model": ["m"], "seed": [0]}).to_parquet(near_tie / "tables" / "checks.parquet")
    pd.DataFrame({"model": ["m"], "seed": [0], "shape_mode": ["static"], "label": ["x"],
                  "max_abs_diff": [0.0]}).to_parquet(near_tie / "tables" / "tensors.parquet")
    with pytest.raises(StudyParameterError,
                       match=r"tables/checks.parquet lacks column\(s\) shape_mode, test_rule_passed"):
        study_rules.check("ulp_noise", {"near_tie_run": str(near_tie)})
    pd.DataFrame({"model": ["m"], "seed": [0], "shape_mode": ["static"], "test_rule_passed": [True]}).to_parquet(
        near_tie / "tables" / "checks.parquet")
    study_rules.check("ulp_noise", {"near_tie_run": str(near_tie)})
