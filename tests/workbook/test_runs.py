import hashlib
import json
import os

import nbformat
import pytest

from exactness.workbook import catalog, runs, study_rules
from exactness.workbook.manifest import Manifest
from exactness.workbook.project import Project


def _run(root, name, params=None):
    project = Project.at(root)
    study = catalog.get(project, name)
    from exactness.workbook import parameters

    resolved = parameters.resolve(study.notebook, [], list((params or {}).items()))
    return runs.execute(project, study, resolved, "smoke", batch="b1")


def _digest(folder):
    return {p.relative_to(folder): hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*") if p.is_file()}


def test_a_passing_run_writes_its_folder(tiny_project):
    result = _run(tiny_project, "ok")
    assert result, result.reason
    names = {p.name for p in result.folder.rglob("*")}
    assert {"ok.ipynb", "report.html", "params.yaml", "manifest.json", "summary.json", "values.parquet"} <= names
    manifest = Manifest.read(result.folder)
    assert manifest.status == "passed" and manifest.duration_s > 0
    assert manifest.params["n_values"] == 3
    assert {"torch", "onnxruntime", "onnx", "onnxscript", "transformers", "numpy", "python"} <= set(
        manifest.machine["versions"])
    assert manifest.machine["cpu_model"] and "torch_intra_op_threads" in manifest.machine["threads"]
    assert "git_commit" in manifest.machine and "git_dirty" in manifest.machine
    assert json.loads((result.folder / "summary.json").read_text()) == {"total": 4.5, "label": "x"}


def test_the_notebook_runs_inside_its_run_folder_with_injected_parameters(tiny_project):
    result = _run(tiny_project, "ok", {"n_values": "4", "scale": "2"})
    executed = nbformat.read(result.folder / "ok.ipynb", as_version=4)
    injected = [c for c in executed.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert injected and "n_values = 4" in injected[0].source
    assert json.loads((result.folder / "summary.json").read_text())["total"] == 12.0


def test_a_failing_cell_keeps_the_run_marked_failed_and_earlier_runs_intact(tiny_project):
    earlier = _run(tiny_project, "ok")
    before = _digest(earlier.folder)
    result = _run(tiny_project, "failing")
    assert not result
    manifest = Manifest.read(result.folder)
    assert manifest.status == "failed"
    assert manifest.failed_cell == 4  # execution count: parameters, injected parameters, x = 1, raise
    assert manifest.error == "ValueError: second line names the problem"
    executed = nbformat.read(result.folder / "failing.ipynb", as_version=4)
    assert any(o.get("output_type") == "error" for c in executed.cells for o in c.get("outputs", []))
    assert (result.folder / "report.html").exists()
    assert _digest(earlier.folder) == before
    assert "failing failed in cell [4]" in result.reason


def test_ctrl_c_leaves_the_run_marked_interrupted(tiny_project, monkeypatch):
    import papermill

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(papermill, "execute_notebook", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _run(tiny_project, "ok")
    (folder,) = (tiny_project / "outputs" / "ok").iterdir()
    assert Manifest.read(folder).status == "interrupted"
    assert "interrupted" in (tiny_project / "outputs" / "index.html").read_text()


def test_run_folders_are_never_reused(tiny_project):
    project = Project.at(tiny_project)
    folders = {runs.new_run_folder(project, "ok", "smoke")[1] for _ in range(20)}
    assert len(folders) == 20


def test_a_missing_kernel_is_named(monkeypatch):
    from jupyter_client.kernelspec import KernelSpecManager

    monkeypatch.setattr(KernelSpecManager, "find_kernel_specs", lambda self: {"python3": "/x"})
    with pytest.raises(runs.KernelMissingError, match="make install"):
        runs.ensure_kernel()


@pytest.mark.slow
def test_a_run_kernel_uses_ipc_sockets_inside_the_project_and_no_tcp_warning(tiny_project):
    import subprocess
    import sys

    from conftest import cli_env, write_notebook

    write_notebook(tiny_project / "notebooks" / "conn.ipynb", "x = 1",
                   "from ipykernel.connect import get_connection_info\n"
                   "open('connection.json', 'w').write(get_connection_info())")
    (tiny_project / "params" / "conn").mkdir()
    (tiny_project / "params" / "conn" / "default.yaml").write_text("{}\n")
    result = subprocess.run([sys.executable, "-m", "exactness", "run", "conn", "--log-output"],
                            capture_output=True, text=True, env=cli_env(tiny_project), timeout=600)
    assert result.returncode == 0, result.stderr
    assert "without encryption" not in result.stdout + result.stderr
    (folder,) = (tiny_project / "outputs" / "conn").iterdir()
    connection = json.loads((folder / "connection.json").read_text())
    state = tiny_project / ".state" / "k"
    assert connection["transport"] == "ipc" and connection["ip"].startswith(str(state))
    assert not list(state.iterdir())  # the kernels' socket files are removed when they shut down
    assert oct(state.stat().st_mode & 0o777) == "0o700"


def test_ipc_socket_prefix_falls_back_to_a_private_tmp_folder_for_long_paths(tmp_path):
    import os

    project = Project.at(tmp_path / ("x" * 120), tmp_path / "out")
    prefix = runs.ipc_prefix(project)
    try:
        assert len(prefix) < 100 and prefix.startswith("/tmp/")
        assert oct(os.stat(os.path.dirname(prefix)).st_mode & 0o777) == "0o700"
    finally:
        os.rmdir(os.path.dirname(prefix))  # what kernel_sockets does when a run ends


def test_a_second_resume_of_the_same_run_started_meanwhile_is_refused_in_one_line(tiny_project):
    failed = _run(tiny_project, "failing")
    project = Project.at(tiny_project)
    (failed.folder / "attempts" / "1").mkdir(parents=True)  # what the first resume has just made
    with pytest.raises(runs.ResumeError, match="is being resumed by another process"):
        runs.resume(project, catalog.get(project, "failing"), failed.folder)
    assert Manifest.read(failed.folder).status == "failed"  # untouched



def test_a_studys_kernel_starts_with_its_environment_and_the_caller_gets_its_own_back(tiny_project, monkeypatch):
    from conftest import write_notebook

    write_notebook(tiny_project / "notebooks" / "env.ipynb", "x = 0",
                   "import os\nfrom exactness.workbook.artifacts import RunArtifacts",
                   "RunArtifacts.current('env').summary(seen=os.environ.get('EXACTNESS_PROBE', 'unset'))")
    (tiny_project / "params" / "env").mkdir()
    (tiny_project / "params" / "env" / "smoke.yaml").write_text("{}\n")
    registered = study_rules.registration
    monkeypatch.setattr(study_rules, "registration", lambda study: study_rules.Registration(
        kernel_environment={"EXACTNESS_PROBE": "set for the kernel"}) if study == "env" else registered(study))
    monkeypatch.setenv("EXACTNESS_PROBE", "the caller's")
    result = _run(tiny_project, "env")
    assert result, result.reason
    assert json.loads((result.folder / "summary.json").read_text())["seen"] == "set for the kernel"
    assert os.environ["EXACTNESS_PROBE"] == "the caller's"
    monkeypatch.delenv("EXACTNESS_PROBE")
    with runs.kernel_environment({"EXACTNESS_PROBE": "x"}):
        assert os.environ["EXACTNESS_PROBE"] == "x"
    assert "EXACTNESS_PROBE" not in os.environ



def test_a_kernel_that_dies_names_the_cell_that_was_running(tiny_project):
    from conftest import write_notebook

    write_notebook(tiny_project / "notebooks" / "dies.ipynb", "code = 3", "x = 1", "y = 2",
                   "import os\nos._exit(code)", "z = 4")
    (tiny_project / "params" / "dies").mkdir()
    result = _run(tiny_project, "dies")
    recorded = Manifest.read(result.folder)
    assert recorded.status == "failed" and "DeadKernelError" in recorded.error
    # cells: parameters [1], injected parameters [2], x [3], y [4], the exit [5]
    assert recorded.failed_cell == 5 and result.reason.startswith("dies failed in cell [5]: DeadKernelError")


def _answering(root, name, causes):
    """A study whose notebook answers one line per class with these causes, as a model study does."""
    from conftest import write_notebook

    write_notebook(root / "notebooks" / f"{name}.ipynb", f"causes = {causes!r}",
                   "from exactness.workbook.answers import Answer\n"
                   "from exactness.workbook.artifacts import RunArtifacts\n"
                   f"RunArtifacts.current({name!r}).summary(answers=[Answer(f'Class{{i}}', cause, 'fix the builder "
                   "first', '', 'Could not build: your builder raised ValueError for seed 0: broken.').to_dict() "
                   "for i, cause in enumerate(causes)])")
    (root / "params" / name).mkdir()
    (root / "params" / name / "default.yaml").write_text("{}\n")


def test_a_run_whose_every_class_did_not_run_fails_and_names_each_on_the_terminal(tiny_project, capsys):
    from exactness.workbook import cli

    _answering(tiny_project, "nothing", ["not run", "not run"])
    result = _run(tiny_project, "nothing")
    recorded = Manifest.read(result.folder)
    assert recorded.status == "failed" and not result
    assert recorded.error == ("no class ran: none of the 2 built or exported (the first, Class0: Could not "
                              "build: your builder raised ValueError for seed 0: broken.)")
    capsys.readouterr()
    assert cli.main(["run", "nothing"]) == 1
    captured = capsys.readouterr()
    assert [line.strip() for line in captured.out.splitlines() if "not run:" in line] == [
        f"not run: Class{i}: Could not build: your builder raised ValueError for seed 0: broken." for i in (0, 1)]
    assert "FAILED: nothing failed: no class ran" in captured.err


def test_a_run_where_some_classes_ran_passes_and_still_names_those_that_did_not(tiny_project, capsys):
    from exactness.workbook import cli

    _answering(tiny_project, "some", ["not run", "exact tie"])
    assert cli.main(["run", "some"]) == 0
    assert [line.strip() for line in capsys.readouterr().out.splitlines() if "not run:" in line] == [
        "not run: Class0: Could not build: your builder raised ValueError for seed 0: broken."]


def test_a_cell_that_prints_megabytes_keeps_a_capped_notebook_and_the_rest_in_kernel_log(tiny_project):
    from conftest import write_notebook
    from exactness.workbook import cell_output

    write_notebook(tiny_project / "notebooks" / "loud.ipynb", "lines = 60_000",
                   "for i in range(lines):\n    print(f'line {i:06d} ' + 'x' * 90)",  # 6 MB on stdout
                   "print('the next cell prints again')")
    (tiny_project / "params" / "loud").mkdir()
    result = _run(tiny_project, "loud")
    assert result, result.reason
    notebook = nbformat.read(result.folder / "loud.ipynb", as_version=4)
    loud, after = notebook.cells[-2], notebook.cells[-1]
    printed = "".join(o.get("text", "") for o in loud.outputs)
    assert cell_output.LIMIT <= len(printed) < cell_output.LIMIT + 1_000
    assert "more than 1,000,000 characters to stdout; the rest is in kernel.log" in printed
    assert "".join(o.get("text", "") for o in after.outputs) == "the next cell prints again\n"
    log = (result.folder / "kernel.log").read_text()
    assert "line 059999 " in log and "line 000000 " not in log
    assert (result.folder / "loud.ipynb").stat().st_size < 3 * cell_output.LIMIT
    assert (result.folder / "report.html").stat().st_size < 3 * cell_output.LIMIT


def test_a_class_that_ran_only_under_another_pair_of_sides_did_not_run(tmp_path):
    """Eager against eager runs without the export: a class whose export failed still gets that line, and it must not
    make the run pass."""
    import json

    from exactness.workbook import answers, runs

    lines = [answers.Answer("Mine", answers.NOT_RUN, "fix the export first", "", "TypeError: broken"),
             answers.Answer(f"Mine{answers.PAIR_SEPARATOR}eager CPU fp32 vs eager CPU TF32 convolutions (emulated)",
                            "never fails here", "nothing to change for this precision", "none in 2 seeds")]
    (tmp_path / "summary.json").write_text(json.dumps({answers.SUMMARY_KEY: [a.to_dict() for a in lines]}))
    assert runs.nothing_ran(tmp_path) == "no class ran: Mine: TypeError: broken"
    assert [a.subject for a in answers.class_lines(lines)] == ["Mine"]
