import subprocess
import sys
from pathlib import Path

import pytest

from conftest import cli_env
from exactness.workbook import cli
from exactness.workbook.manifest import Manifest
from exactness.workbook.project import Project


def exactness(*args, project=None, home=None):
    return subprocess.run([sys.executable, "-m", "exactness", *args], capture_output=True, text=True,
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


@pytest.mark.slow
def test_unknown_study_and_parameter_set_are_named(tiny_project):
    assert "unknown study 'nope'" in exactness("run", "nope", project=tiny_project).stderr
    result = exactness("run", "ok", "-f", "huge", project=tiny_project)
    assert result.returncode == 2 and "no parameter set 'huge' for study 'ok'" in result.stderr


@pytest.mark.slow
def test_a_failing_study_exits_non_zero_with_a_one_line_reason(tiny_project):
    result = exactness("run", "failing", project=tiny_project)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "FAILED: failing failed in cell [4]: ValueError: second line names the problem")
    assert 'class="failed"' in (tiny_project / "outputs" / "index.html").read_text()


@pytest.mark.slow
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


def test_a_parameter_file_given_by_path_is_the_primary_studys_only(tiny_project):
    (tiny_project / "params" / "ok" / "big.yaml").write_text("n_values: 7\n")
    planned = cli.plan(Project.at(tiny_project), "ok", [str(tiny_project / "params" / "ok" / "big.yaml")], [])
    assert [(p.study.name, p.param_set) for p in planned] == [("environment", "default"), ("ok", "big")]
    assert planned[1].params["n_values"] == 7
    shared = cli.plan(Project.at(tiny_project), "ok", [str(tiny_project / "params" / "ok" / "smoke.yaml")], [])
    assert [p.param_set for p in shared] == ["default", "smoke"]  # the environment's smoke is its own file


def test_plan_for_all_rejects_an_override_no_study_declares(tiny_project):
    import pytest

    from exactness.workbook.parameters import ParameterError

    with pytest.raises(ParameterError, match="no study has parameter"):
        cli.plan(Project.at(tiny_project), "all", [], [("bogus", "1")])


def _sweeping_study(root):
    """A study whose sweep dies at the chunk holding item 4 on its first attempt only."""
    from conftest import write_notebook

    write_notebook(
        root / "notebooks" / "sweepy.ipynb", "n = 6",
        "import os\nimport pandas as pd\nfrom exactness.workbook import sweep\n"
        "from exactness.workbook.artifacts import RunArtifacts\n"
        "artifacts = RunArtifacts.current('sweepy')",
        "def work(chunk):\n    with open('calls.txt', 'a') as log:\n        log.write(f'{chunk[0]}\\n')\n"
        "    if 4 in chunk and not os.path.exists('died-once'):\n        open('died-once', 'w').close()\n"
        "        raise RuntimeError('the machine went away')\n    return pd.DataFrame({'item': list(chunk)})",
        "table = sweep.map_chunks(work, range(n), chunk_size=2, shards=artifacts.shards())\n"
        "artifacts.table('items', table)\nartifacts.summary(items=len(table))",
    )
    (root / "params" / "sweepy").mkdir(parents=True)
    (root / "params" / "sweepy" / "default.yaml").write_text("{}\n")


@pytest.mark.slow
def test_resume_finishes_a_failed_run_in_place_computing_only_what_is_missing(tiny_project):
    import pandas as pd

    from exactness.workbook.manifest import Manifest

    _sweeping_study(tiny_project)
    first = exactness("run", "sweepy", project=tiny_project)
    assert first.returncode == 1 and "the machine went away" in first.stderr
    (folder,) = (tiny_project / "outputs" / "sweepy").iterdir()
    assert len(list((folder / "shards").glob("*.pkl"))) == 2

    result = exactness("run", "sweepy", "--resume", folder.name, project=tiny_project)
    assert result.returncode == 0, result.stderr
    assert "2 finished shards kept" in result.stdout
    assert (folder / "calls.txt").read_text().split() == ["0", "2", "4", "4"]  # only the missing chunk ran again
    assert pd.read_parquet(folder / "tables" / "items.parquet").item.tolist() == list(range(6))
    manifest = Manifest.read(folder)
    assert manifest.status == "passed" and len(manifest.attempts) == 1
    assert manifest.attempts[0]["status"] == "failed" and "machine went away" in manifest.attempts[0]["error"]
    assert (folder / "attempts" / "1" / "sweepy.ipynb").exists() and (folder / "report.html").exists()
    assert len(list((tiny_project / "outputs" / "sweepy").iterdir())) == 1


@pytest.mark.slow
def test_resume_refuses_a_passed_run_and_changed_parameters(tiny_project):
    _sweeping_study(tiny_project)
    exactness("run", "sweepy", project=tiny_project)
    (folder,) = (tiny_project / "outputs" / "sweepy").iterdir()
    changed = exactness("run", "sweepy", "--resume", folder.name, "-p", "n", "8", project=tiny_project)
    assert changed.returncode == 2 and "keeps its parameters" in changed.stderr and "n (6 -> 8)" in changed.stderr
    # the run's own value, given again, is no change (the default set's other values are not compared)
    assert exactness("run", "sweepy", "--resume", folder.name, "-p", "n", "6", project=tiny_project).returncode == 0
    again = exactness("run", "sweepy", "--resume", folder.name, project=tiny_project)
    assert again.returncode == 2 and "passed; there is nothing to resume" in again.stderr
    assert "resuming" not in again.stdout  # refused before anything claims to resume


def test_invalid_yaml_in_an_override_is_one_line_and_creates_nothing(tiny_project):
    result = exactness("run", "ok", "-p", "models", "[1, 2", project=tiny_project)
    assert result.returncode == 2
    assert result.stderr.startswith("exactness: error: -p models: '[1, 2' is not valid YAML: ")
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert not (tiny_project / "outputs").exists()


def test_an_unusable_out_folder_is_one_line_and_creates_nothing(tiny_project, tmp_path):
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    for out in (a_file, a_file / "below"):
        result = exactness("--out", str(out), "run", "ok", project=tiny_project)
        assert result.returncode == 2, result.stderr
        assert result.stderr.strip().splitlines() == [f"exactness: error: --out {out}: {a_file} is not a folder"]
    assert a_file.read_text() == "x" and not (tiny_project / "outputs").exists()


@pytest.mark.slow
def test_resuming_a_folder_outside_outputs_keeps_everything_in_its_own_outputs(tiny_project, tmp_path):
    from exactness.workbook.manifest import Manifest

    _sweeping_study(tiny_project)
    elsewhere = tmp_path / "elsewhere"
    assert exactness("--out", str(elsewhere), "run", "sweepy", project=tiny_project).returncode == 1
    (folder,) = (elsewhere / "sweepy").iterdir()
    (env_run,) = (elsewhere / "environment").iterdir()
    result = exactness("run", "sweepy", "--resume", str(folder), project=tiny_project)
    assert result.returncode == 0, result.stderr
    assert not (tiny_project / "outputs").exists()
    assert Manifest.read(folder).status == "passed"
    assert 'class="passed"' in (elsewhere / "index.html").read_text()
    page = (folder / "report.html").read_text()
    assert "../../index.html" in page and f"../../environment/{env_run.name}/report.html" in page


@pytest.mark.slow
def test_index_and_show_survive_an_ill_typed_manifest_and_show_a_killed_run_as_died(tiny_project):
    import socket

    from exactness.workbook.manifest import Manifest

    outputs = tiny_project / "outputs"
    bad = outputs / "ok" / "bad"
    bad.mkdir(parents=True)
    (bad / "manifest.json").write_text('{"study": "ok", "run_id": "bad", "param_set": "p", "params": {},'
                                       ' "batch": "b", "duration_s": "abc"}')
    killed = outputs / "ok" / "killed"
    killed.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    Manifest(study="ok", run_id="killed", param_set="p", params={}, batch="b", started="2026-11-30T01:00:00",
             pid=dead.pid, host=socket.gethostname()).write(killed)
    indexed = exactness("index", project=tiny_project)
    assert indexed.returncode == 0, indexed.stderr
    assert "unreadable" in (outputs / "index.html").read_text()
    shown = exactness("show", str(bad), project=tiny_project)
    assert shown.returncode == 2 and shown.stderr.strip().splitlines() == [
        f"exactness: error: {bad / 'manifest.json'} is unreadable: field 'duration_s' is str 'abc', "
        "expected int or float or null"]
    assert "killed: died" in exactness("show", str(killed), project=tiny_project).stdout


@pytest.mark.slow
def test_a_value_out_of_its_studys_range_is_one_line_before_anything_is_created(tmp_path):
    out = tmp_path / "out"
    for arguments, message in [
        (["near_tie", "-p", "n_seeds", "0"], "near_tie: n_seeds (from -p) must be at least 1, got 0"),
        (["near_tie", "-p", "models", "[UniSpeechForPreTraining, UniSpeechForPreTraining]"],
         "models (from -p) lists UniSpeechForPreTraining more than once"),
        (["ulp_noise", "-p", "model", "DacEncoder-48khz"], "DacEncoder-44khz, DacEncoder-tiny"),
        (["dac_propagation", "-p", "seconds", "-1"], "seconds (from -p) must be at least 0.05"),
        (["near_tie", "-p", "threshold", ".nan"], "threshold (from -p) must be positive and finite, got nan"),
    ]:
        result = exactness("--out", str(out), "run", *arguments)
        assert result.returncode == 2, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and message in result.stderr, result.stderr
    assert not out.exists()


def _slow_run(project, busy_cell: str, ignore_sighup: bool = False) -> tuple[subprocess.Popen, Path]:
    """`exactness run slow` in its own process group, once its kernel has started the cell after the one that
    writes kernel.pid (the kernel's process id) into the run folder: the run folder. `ignore_sighup`: started
    as `nohup` starts it."""
    import time

    from conftest import write_notebook

    write_notebook(project / "notebooks" / "slow.ipynb", "n = 1",
                   "import os, pathlib, sys, time\npathlib.Path('kernel.pid').write_text(str(os.getpid()))",
                   busy_cell)
    (project / "params" / "slow").mkdir()
    (project / "params" / "slow" / "default.yaml").write_text("{}\n")
    import signal

    # A job started with `&` by a shell without job control inherits SIGINT ignored, and one started under nohup
    # SIGHUP ignored (an ignored signal stays ignored across exec): reset both, as a terminal's foreground process
    # has them, so that the test does not depend on how its own runner was started.
    process = subprocess.Popen([sys.executable, "-m", "exactness", "run", "slow"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=cli_env(project), start_new_session=True,
                               preexec_fn=lambda: (signal.signal(signal.SIGINT, signal.SIG_DFL),
                                                   signal.signal(signal.SIGHUP, signal.SIG_IGN if ignore_sighup
                                                                 else signal.SIG_DFL)))
    deadline = time.monotonic() + 120
    while not (pids := list((project / "outputs").glob("slow/*/kernel.pid"))) and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1)
    return process, pids[0].parent


@pytest.mark.slow
def test_ctrl_c_during_a_cell_prints_one_line_and_keeps_the_kernels_messages_in_the_run_folder(tiny_project):
    import os
    import signal

    # A cell that keeps the kernel talking (stderr output) when the terminal's Ctrl-C reaches every process.
    process, folder = _slow_run(tiny_project,
                                "for i in range(6000):\n    print(i, file=sys.stderr)\n    time.sleep(0.01)")
    os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole process group
    out, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert err.strip().splitlines() == [
        f"interrupted; {folder} is marked interrupted (finish it with `exactness run slow --resume {folder}`)"], err
    assert Manifest.read(folder).status == "interrupted"
    assert (folder / "kernel.log").exists()


@pytest.mark.slow
def test_sigterm_stops_a_run_as_ctrl_c_does_and_leaves_no_kernel_running(tiny_project):
    import signal
    import time

    from exactness.workbook.manifest import process_alive

    process, folder = _slow_run(tiny_project, "time.sleep(120)")
    kernel = int((folder / "kernel.pid").read_text())
    process.send_signal(signal.SIGTERM)  # the CLI alone, as a scheduler or `kill PID` does
    out, err = process.communicate(timeout=120)
    assert process.returncode == 130 and len(err.strip().splitlines()) == 1, err
    assert Manifest.read(folder).status == "interrupted"
    deadline = time.monotonic() + 30
    while process_alive(kernel) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not process_alive(kernel), "the kernel outlived its run"


@pytest.mark.slow
def test_a_run_shows_its_sections_on_the_terminal_without_log_output(tiny_project):
    result = exactness("run", "ok", "-f", "smoke", project=tiny_project)
    assert result.returncode == 0, result.stderr
    assert "      A tiny study (cell 1 of 5)" in result.stdout.splitlines()


@pytest.mark.slow
def test_an_empty_out_and_a_glob_pattern_as_a_run_are_refused_in_one_line(tiny_project):
    empty = exactness("--out", "", "index", project=tiny_project)
    assert empty.returncode == 2 and empty.stderr.startswith("exactness: error: --out is empty")
    exactness("run", "ok", "-f", "smoke", project=tiny_project)
    pattern = exactness("show", "*", project=tiny_project)
    assert pattern.returncode == 2 and "no run '*'" in pattern.stderr


@pytest.mark.slow
def test_list_params_names_each_parameter_with_its_type_default_and_meaning():
    import subprocess
    import sys

    from conftest import REPO, cli_env

    done = subprocess.run([sys.executable, "-m", "exactness", "list", "--params", "discrete_ops"],
                          capture_output=True, text=True, env=cli_env(REPO), timeout=60)
    assert done.returncode == 0, done.stderr
    lines = {line.split()[0]: line for line in done.stdout.splitlines()}
    assert "n_seeds" in lines and "int" in lines["n_seeds"] and "screened" in lines["n_seeds"]
    unknown = subprocess.run([sys.executable, "-m", "exactness", "list", "--params", "nope"],
                             capture_output=True, text=True, env=cli_env(REPO), timeout=60)
    assert unknown.returncode == 2 and "unknown study 'nope'" in unknown.stderr


@pytest.mark.slow
def test_output_piped_into_a_reader_that_exits_marks_the_run_interrupted_in_one_line(tiny_project):
    process = subprocess.Popen([sys.executable, "-m", "exactness", "run", "ok"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=cli_env(tiny_project))
    first = process.stdout.readline()  # `| head -1`: one line read, then the reader is gone
    process.stdout.close()
    err = process.stderr.read()
    process.wait(timeout=300)
    assert first.startswith("[1/2] environment") and process.returncode == 130, err
    (folder,) = (tiny_project / "outputs" / "environment").iterdir()
    assert err.strip().splitlines() == [
        f"interrupted: its output's reader went away (a pipe closed, as `| head` does); {folder} is marked "
        f"interrupted (finish it with `exactness run environment --resume {folder}`)"], err
    recorded = Manifest.read(folder)
    assert recorded.status == "interrupted" and "reader went away" in recorded.error
    assert not (tiny_project / "outputs" / "ok").exists()


@pytest.mark.slow
def test_sighup_marks_the_run_interrupted_in_one_line(tiny_project):
    import signal

    process, folder = _slow_run(tiny_project, "time.sleep(120)")
    process.send_signal(signal.SIGHUP)  # the terminal closed
    out, err = process.communicate(timeout=120)
    assert process.returncode == 130 and err.strip().splitlines() == [
        f"interrupted by SIGHUP (the terminal closed); {folder} is marked interrupted (finish it with "
        f"`exactness run slow --resume {folder}`)"], err
    recorded = Manifest.read(folder)
    assert recorded.status == "interrupted" and recorded.error == "interrupted by SIGHUP (the terminal closed)"


@pytest.mark.slow
def test_a_run_started_under_nohup_keeps_running_through_sighup(tiny_project):
    import signal

    process, folder = _slow_run(tiny_project, "time.sleep(3)", ignore_sighup=True)
    process.send_signal(signal.SIGHUP)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    assert Manifest.read(folder).status == "passed"
