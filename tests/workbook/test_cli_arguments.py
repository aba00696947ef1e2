"""The command line's edges: which project it uses, what --resume takes, negative numbers after -p, a closed
pipe."""

import os
import subprocess
import sys

import pytest

from conftest import REPO, cli_env
from exactness.workbook import cli


def exactness(*args, project=None, cwd=None, **kwargs):
    return subprocess.run([sys.executable, "-m", "exactness", *args], capture_output=True, text=True,
                          env=cli_env(project), timeout=600, cwd=cwd, **kwargs)


def test_a_folder_with_its_own_notebooks_is_not_taken_for_the_project(tmp_path):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "params").mkdir()
    result = exactness("list", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0].split()[0] == "environment"  # the installed project's studies
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notebooks", "params"]  # no .state/, no outputs/


def test_a_project_variable_naming_a_folder_that_is_not_a_project_is_refused_in_one_line(tmp_path):
    result = exactness("list", project=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"exactness: error: EXACTNESS_PROJECT={tmp_path} is not an exactness project (it needs notebooks/ "
        "and params/ folders)"]
    assert list(tmp_path.iterdir()) == []


def test_the_project_is_the_checkout_the_package_is_installed_from():
    from exactness.workbook.project import find_root

    assert find_root() == REPO


def test_an_empty_resume_is_refused_like_an_empty_out(tiny_project):
    result = exactness("run", "ok", "--resume", "", project=tiny_project)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "exactness: error: --resume is empty; give the run to finish (its folder, or its run id under the "
        "outputs folder)"]
    assert not (tiny_project / "outputs").exists()


def test_resume_with_all_says_what_resume_takes(tiny_project):
    result = exactness("run", "all", "--resume", "some-run", project=tiny_project)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "exactness: error: --resume finishes one run of one study: `exactness run STUDY --resume some-run` with "
        "the study of that run (RUN: its folder or run id)")


@pytest.mark.slow
def test_a_negative_number_after_p_is_a_value_and_the_studys_rule_judges_it(tmp_path):
    assert cli.split_params(["--out", "-p", "run", "x", "-p", "atol", "-1e-3", "-f", "-p", "-p", "b"]) == (
        ["--out", "-p", "run", "x", "-f", "-p", "-p", "b"], [["atol", "-1e-3"]])  # "-p b": for argparse to refuse
    result = exactness("--out", str(tmp_path / "out"), "run", "near_tie", "-p", "threshold", "-1e-3")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "exactness: error: near_tie: threshold (from -p) must be positive and finite, got -0.001"]
    short = exactness("run", "near_tie", "-p", "threshold")
    assert short.returncode == 2 and "expected 2 arguments" in short.stderr


def test_list_into_a_closed_pipe_exits_quietly():
    read, write = os.pipe()
    os.close(read)  # the reader is gone before anything is written, as `| head -1` once it has its line
    try:
        result = subprocess.run([sys.executable, "-m", "exactness", "list"], stdout=write, stderr=subprocess.PIPE,
                                text=True, env=cli_env(), timeout=600)
    finally:
        os.close(write)
    assert result.stderr == "" and result.returncode == 141
