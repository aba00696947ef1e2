import subprocess
import sys

from conftest import cli_env
from exactness import cli
from exactness.project import Project


def exactness(*args, project=None, home=None):
    return subprocess.run([sys.executable, "-m", "exactness.cli", *args], capture_output=True, text=True,
                          env=cli_env(project, home), timeout=600)


def test_list_shows_studies_and_their_parameter_sets(tiny_project):
    result = exactness("list", project=tiny_project)
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["environment", "default", "smoke"]  # environment first: it runs first
    assert ["failing", "default", "smoke"] in [line.split() for line in lines]


def test_unknown_parameter_is_rejected_before_anything_is_created(tiny_project):
    result = exactness("run", "ok", "-p", "n_valeus", "3", project=tiny_project)
    assert result.returncode == 2
    assert "unknown parameter 'n_valeus'; valid parameters: n_values, scale, label, models, scheduler" in result.stderr
    assert not (tiny_project / "outputs").exists()


def test_wrong_type_is_rejected_with_what_was_given_and_expected(tiny_project):
    result = exactness("run", "ok", "-p", "scale", "big", project=tiny_project)
    assert result.returncode == 2
    assert "parameter 'scale' (from -p): expected float, got str 'big'" in result.stderr
    assert not (tiny_project / "outputs").exists()


def test_unknown_study_and_parameter_set_are_named(tiny_project):
    assert "unknown study 'nope'" in exactness("run", "nope", project=tiny_project).stderr
    result = exactness("run", "ok", "-f", "huge", project=tiny_project)
    assert result.returncode == 2 and "no parameter set 'huge' for study 'ok'" in result.stderr


def test_a_failing_study_exits_non_zero_with_a_one_line_reason(tiny_project):
    result = exactness("run", "failing", project=tiny_project)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "FAILED: failing failed in cell [4]: ValueError: second line names the problem")
    assert 'class="failed"' in (tiny_project / "outputs" / "index.html").read_text()


def test_a_batch_runs_the_environment_first_and_reports_link_to_it(tiny_project):
    result = exactness("run", "ok", "-f", "smoke", "-p", "label", "cli", project=tiny_project)
    assert result.returncode == 0, result.stderr
    assert "[1/2] environment (smoke)" in result.stdout and "[2/2] ok (smoke+p)" in result.stdout
    (ok_run,) = (tiny_project / "outputs" / "ok").iterdir()
    (env_run,) = (tiny_project / "outputs" / "environment").iterdir()
    assert f"../../environment/{env_run.name}/report.html" in (ok_run / "report.html").read_text()
    shown = exactness("show", "ok", project=tiny_project)
    assert "label: cli" in shown.stdout and "total: 1.5" in shown.stdout


def test_plan_for_all_applies_overrides_only_where_declared(tiny_project):
    project = Project.at(tiny_project)
    planned = cli.plan(project, "all", ["smoke"], [("fail", "false")])
    assert [p.study.name for p in planned] == ["environment", "failing", "ok"]
    assert planned[1].params == {"fail": False} and planned[1].param_set == "smoke+p"
    assert planned[2].params["n_values"] == 2 and planned[2].param_set == "smoke"


def test_plan_for_all_rejects_an_override_no_study_declares(tiny_project):
    import pytest

    from exactness.parameters import ParameterError

    with pytest.raises(ParameterError, match="no study has parameter"):
        cli.plan(Project.at(tiny_project), "all", [], [("bogus", "1")])
