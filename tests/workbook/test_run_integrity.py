"""A run's record stays true: a full disk fails the run naming the file (never a cut report marked passed),
"newest" is the latest instant whatever the time zones, and a resume records which code computed what."""

import errno
import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, cli_env
from exactness.workbook import catalog, index, manifest, parameters, runs
from exactness.workbook.cli import find_run
from exactness.workbook.manifest import CodeVersion, Manifest, WriteError, write_atomically
from exactness.workbook.project import Project


def _copy_notebook(input_path, output_path, **_):
    """papermill without a kernel: the executed notebook is the notebook as written."""
    shutil.copy(input_path, output_path)


@pytest.fixture
def quick(monkeypatch):
    """Runs through runs.execute and resume without a kernel and without reading the machine's facts."""
    import papermill

    monkeypatch.setattr(papermill, "execute_notebook", _copy_notebook)
    monkeypatch.setattr(runs, "run_facts", lambda root: {})


def _full_disk_for(monkeypatch, name: str, code: int = errno.ENOSPC):
    """Every write of a file called `name` fails as on a full disk, after writing part of it."""
    fill = manifest._fill

    def failing(path, data):
        if path.name.startswith(f".{name}."):
            fill(path, data[:len(data) // 2])
            raise OSError(code, os.strerror(code))
        fill(path, data)

    monkeypatch.setattr(manifest, "_fill", failing)


def _execute(root, name="ok"):
    project = Project.at(root)
    study = catalog.get(project, name)
    return runs.execute(project, study, parameters.resolve(study.notebook, [], []), "smoke", batch="b")


def test_a_write_that_runs_out_of_space_leaves_the_earlier_file_whole_and_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "summary.json"
    write_atomically(target, '{"earlier": 1}\n')
    _full_disk_for(monkeypatch, "summary.json")
    with pytest.raises(WriteError) as error:
        write_atomically(target, '{"later": 2}\n' * 100)
    assert str(error.value) == f"could not write {target}: [Errno 28] No space left on device"
    assert target.read_text() == '{"earlier": 1}\n' and [p.name for p in tmp_path.iterdir()] == ["summary.json"]


def test_disk_full_while_writing_the_report_marks_the_run_failed_and_names_the_run_and_the_file(
        tiny_project, quick, monkeypatch):
    _full_disk_for(monkeypatch, "report.html")
    result = _execute(tiny_project)
    assert not result and result.write_error is not None
    recorded = Manifest.read(result.folder)
    assert recorded.status == "failed"
    assert recorded.error == f"could not write {result.folder / 'report.html'}: [Errno 28] No space left on device"
    assert result.reason == f"ok failed: {recorded.error}"
    assert not (result.folder / "report.html").exists()
    assert not [p.name for p in result.folder.iterdir() if p.name.startswith(".")]  # no temporary, no reserve
    assert 'class="failed"' in (tiny_project / "outputs" / "index.html").read_text()


def test_disk_full_while_papermill_writes_the_notebook_fails_the_run_naming_the_notebook(tiny_project, monkeypatch):
    import papermill

    def cut_notebook(input_path, output_path, **_):
        Path(output_path).write_text('{"cells": [')
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(papermill, "execute_notebook", cut_notebook)
    monkeypatch.setattr(runs, "run_facts", lambda root: {})
    result = _execute(tiny_project)
    recorded = Manifest.read(result.folder)
    assert recorded.status == "failed" and result.write_error is not None
    assert recorded.error == f"could not write {result.folder / 'ok.ipynb'}: [Errno 28] No space left on device"
    assert not list(result.folder.glob("*.ipynb*")) and not list(result.folder.glob("*.partial*"))


def test_a_full_disk_at_the_last_manifest_write_still_records_the_outcome(tiny_project, quick, monkeypatch):
    fill, failed = manifest._fill, []

    def full_while_reserved(path, data):
        folder = path.parent
        if path.name.startswith(".manifest.json.") and (folder / runs.RESERVE).exists() and \
                (folder / "report.html").exists():
            failed.append(path)
            raise OSError(errno.ENOSPC, "No space left on device")
        fill(path, data)

    monkeypatch.setattr(manifest, "_fill", full_while_reserved)
    result = _execute(tiny_project)
    assert failed and result and Manifest.read(result.folder).status == "passed"
    assert not (result.folder / runs.RESERVE).exists()


@pytest.mark.slow
def test_a_cut_report_is_never_marked_passed_and_the_batch_says_what_did_not_run(tiny_project):
    # a real file-size limit (EFBIG, as ENOSPC: the write fails partway): the report is larger than it
    def limited():
        resource.setrlimit(resource.RLIMIT_FSIZE, (150_000, 150_000))

    result = subprocess.run([sys.executable, "-m", "exactness", "run", "ok", "-f", "smoke"], capture_output=True,
                            text=True, env=cli_env(tiny_project), timeout=600, preexec_fn=limited)
    assert result.returncode == 1, result.stdout + result.stderr
    (folder,) = (tiny_project / "outputs" / "environment").iterdir()
    recorded = Manifest.read(folder)
    assert recorded.status == "failed" and recorded.error == (
        f"could not write {folder / 'report.html'}: [Errno 27] File too large")
    assert not (folder / "report.html").exists()
    assert result.stderr.strip().splitlines() == [
        f"FAILED: environment failed: {recorded.error}",
        "FAILED: not run: ok (the batch stopped at environment's write error)"]
    assert not (tiny_project / "outputs" / "ok").exists()
    assert 'class="failed"' in (tiny_project / "outputs" / "index.html").read_text()


def _run_folder(outputs, study, run_id, started, status="passed"):
    folder = outputs / study / run_id
    folder.mkdir(parents=True)
    Manifest(study=study, run_id=run_id, param_set="smoke", params={}, batch="b", status=status,
             started=started).write(folder)
    return folder


def test_runs_started_in_different_time_zones_order_by_the_instant_not_the_text(tiny_project):
    outputs = tiny_project / "outputs"
    # 20:00 UTC on Dec 31 and 12:00 UTC on Jan 1: as text, the older one reads later
    older = _run_folder(outputs, "ok", "east", "2026-01-01T10:00:00+14:00")
    newer = _run_folder(outputs, "ok", "west", "2026-01-01T00:00:00-12:00")
    project = Project.at(tiny_project)
    assert [e.folder for e in index.collect(project)] == [newer, older]
    assert find_run(project, "ok") == newer
    assert index.render(project).index("west") < index.render(project).index("east")  # the card and the rows


def test_a_manifest_with_a_local_time_of_an_earlier_version_still_loads_and_sorts(tiny_project):
    outputs = tiny_project / "outputs"
    old = _run_folder(outputs, "ok", "old", "2020-05-01T10:00:00")
    new = _run_folder(outputs, "ok", "new", "2026-01-01T00:00:00+00:00")
    assert Manifest.read(old).started_at().tzinfo is not None
    assert [e.folder for e in index.collect(Project.at(tiny_project))] == [new, old]


def test_a_new_run_records_its_start_in_utc_with_its_offset(tiny_project, quick):
    result = _execute(tiny_project)
    assert Manifest.read(result.folder).started.endswith("+00:00")


def _failed_with_shards(root, code: CodeVersion | None, machine=None):
    project = Project.at(root)
    study = catalog.get(project, "ok")
    folder = root / "outputs" / "ok" / "run"
    (folder / "shards").mkdir(parents=True)
    (folder / "shards" / "sweep--0-1-n2.pkl").write_bytes(b"x")
    Manifest(study="ok", run_id="run", param_set="smoke", params=parameters.resolve(study.notebook, [], []),
             batch="b", status="failed", started="2026-01-01T00:00:00+00:00", code=code,
             machine=machine or {}).write(folder)
    return project, study, folder


_OTHER = CodeVersion("0123456789abcdef", False, "f" * 64)


def test_resuming_with_code_that_differs_from_the_shards_is_refused_in_one_line(tiny_project):
    project, study, folder = _failed_with_shards(tiny_project, _OTHER)
    with pytest.raises(runs.ResumeError) as error:
        runs.check_resumable(study, folder)
    message = str(error.value)
    assert "\n" not in message and message.startswith(
        f"{folder}'s shards were computed by commit 0123456789ab, library ffffffffffff; the code now is ")
    assert "pass --resume-across-code-change" in message
    result = subprocess.run([sys.executable, "-m", "exactness", "run", "ok", "--resume", str(folder)],
                            capture_output=True, text=True, env=cli_env(tiny_project), timeout=600)
    assert result.returncode == 2 and result.stderr.strip() == f"exactness: error: {message}"
    assert Manifest.read(folder).status == "failed" and not (folder / "attempts").exists()


def test_a_manifest_of_an_earlier_version_with_only_a_commit_is_compared_by_it(tiny_project):
    project, study, folder = _failed_with_shards(tiny_project, None, {"git_commit": "abc", "git_dirty": False})
    with pytest.raises(runs.ResumeError, match="computed by commit abc; the code now is"):
        runs.check_resumable(study, folder)


def test_resuming_across_a_code_change_when_asked_records_each_attempts_code(tiny_project, quick):
    project, study, folder = _failed_with_shards(tiny_project, _OTHER)
    result = runs.resume(project, study, folder, across_code_change=True)
    assert result, result.reason
    recorded = Manifest.read(folder)
    assert recorded.attempts[0]["code"] == {"git_commit": _OTHER.git_commit, "git_dirty": False,
                                            "library_sha256": _OTHER.library_sha256, "named_code_sha256": None}
    assert recorded.code == CodeVersion.current() and recorded.mixed_code is True
    assert json.loads((folder / "manifest.json").read_text())["code"]["library_sha256"] == manifest.library_digest()


def test_the_same_code_resumes_without_being_asked(tiny_project, quick):
    project, study, folder = _failed_with_shards(tiny_project, CodeVersion.current())
    assert runs.resume(project, study, folder)
    assert Manifest.read(folder).mixed_code is False


def _builder_run_with_shards(tmp_path, builder):
    """A failed discrete_ops run over your builder, with a shard, recorded with the code of now."""
    from exactness.workbook import parameters

    project = Project.at(REPO, tmp_path / "out")
    study = catalog.get(project, "discrete_ops")
    params = {**parameters.resolve(study.notebook, [study.param_file("smoke")], []), "models": [f"{builder}:build"]}
    folder = tmp_path / "out" / "discrete_ops" / "run"
    (folder / "shards").mkdir(parents=True)
    (folder / "shards" / "sweep--0-1-n2.pkl").write_bytes(b"x")
    code = CodeVersion.current(runs.named_code_digest("discrete_ops", params))
    Manifest(study="discrete_ops", run_id="run", param_set="smoke", params=params, batch="b", status="failed",
             started="2026-01-01T00:00:00+00:00", code=code).write(folder)
    return study, folder


def test_resuming_after_your_model_file_was_edited_is_refused_as_a_code_change(tmp_path):
    builder = tmp_path / "mine.py"
    builder.write_text("def build(seed):\n    return None\n")
    study, folder = _builder_run_with_shards(tmp_path, builder)
    assert runs.check_resumable(study, folder, given={"models"})  # unchanged: resumes
    builder.write_text("def build(seed):\n    return 'edited'\n")
    with pytest.raises(runs.ResumeError, match="your models' code .*--resume-across-code-change"):
        runs.check_resumable(study, folder, given={"models"})


def test_a_read_only_kernel_socket_folder_fails_the_run_naming_that_folder_not_the_notebook(
        tiny_project, monkeypatch):
    sockets = tiny_project / ".state" / "k"
    make_folder = os.mkdir

    def read_only_sockets(path, *args, **kwargs):
        if Path(path).parent == sockets:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fspath(path))
        return make_folder(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", read_only_sockets)
    monkeypatch.setattr(runs, "run_facts", lambda root: {})
    result = _execute(tiny_project)
    recorded = Manifest.read(result.folder)
    assert recorded.status == "failed" and result.write_error is not None
    assert recorded.error.startswith(f"could not write {sockets}/") and "Read-only file system" in recorded.error
    assert "ok.ipynb" not in recorded.error
