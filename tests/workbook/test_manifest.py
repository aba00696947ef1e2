import json

from exactness.workbook.manifest import Manifest


def test_manifest_round_trips_and_ignores_unknown_fields(tmp_path):
    manifest = Manifest(study="s", run_id="r", param_set="p", params={"a": [1, 2]}, batch="b", duration_s=1.5)
    manifest.write(tmp_path)
    data = json.loads((tmp_path / "manifest.json").read_text())
    data["added_later"] = True
    (tmp_path / "manifest.json").write_text(json.dumps(data))
    assert Manifest.read(tmp_path) == manifest
    assert not list(tmp_path.glob("*.tmp"))


import pytest  # noqa: E402

from exactness.workbook.manifest import ManifestError  # noqa: E402


@pytest.mark.parametrize("text, field", [
    ("null", "manifest"), ("[1, 2]", "manifest"),
    ('{"study": "s", "run_id": "r", "param_set": "p", "params": {}, "batch": "b", "started": null}', "started"),
    ('{"study": "s", "run_id": "r", "param_set": "p", "params": {}, "batch": "b", "status": 3}', "status"),
    ('{"study": "s", "run_id": "r", "param_set": "p", "params": {}, "batch": "b", "duration_s": "abc"}', "duration_s"),
    ('{"study": "s", "run_id": "r", "param_set": "p", "params": {}}', "batch"),
    ('{"study": "s", "run_id": "r", "param_set": "p", "params": {}, "batch": "b", "pid": 99999999999999999999}',
     "pid"),
    ('{"study": "s", "run_id": "r", "param_set": "p", "params": {}, "batch": "b", "pid": -1}', "pid"),
    ('{"study": "s", "run_id": "r", "param_set": "p", "params": {}, "batch": "b", "started": "not a date"}',
     "started"),
])
def test_an_ill_typed_manifest_raises_one_error_naming_path_and_field(tmp_path, text, field):
    (tmp_path / "manifest.json").write_text(text)
    with pytest.raises(ManifestError, match=field) as caught:
        Manifest.read(tmp_path)
    assert str(tmp_path / "manifest.json") in str(caught.value)


def test_concurrent_writers_never_collide_on_the_temporary_file(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    manifest = Manifest(study="s", run_id="r", param_set="p", params={}, batch="b")
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda _: manifest.write(tmp_path), range(200)))
    assert Manifest.read(tmp_path) == manifest and not list(tmp_path.glob("*.tmp*"))


def test_a_running_run_whose_pid_was_reused_by_another_process_died(tmp_path):
    import socket
    import subprocess
    import sys

    from exactness.workbook import manifest as manifest_module

    def running(pid, started):
        return Manifest(study="ok", run_id="r", param_set="p", params={}, batch="b", status="running", pid=pid,
                        pid_started=started, host=socket.gethostname())

    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        # a manifest without a start time (an earlier version's): the process must at least run exactness
        assert running(other.pid, None).observed_status() == "died"
        started = manifest_module.process_start(other.pid)
        assert running(other.pid, started).observed_status() == "running"
        assert running(other.pid, started - 3600).observed_status() == "died"  # the pid, an hour later: reused
    finally:
        other.kill()
        other.wait()
    assert running(other.pid, started).observed_status() == "died"


def test_resume_is_not_refused_by_a_pid_another_process_now_has(tiny_project):
    import socket
    import subprocess
    import sys

    from exactness.workbook import catalog, runs
    from exactness.workbook import manifest as manifest_module
    from exactness.workbook.project import Project

    folder = tiny_project / "outputs" / "ok" / "r"
    folder.mkdir(parents=True)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:  # the pid the run had, now another process's: the run's own started an hour earlier
        Manifest(study="ok", run_id="r", param_set="smoke", params={}, batch="b", status="running", pid=other.pid,
                 pid_started=manifest_module.process_start(other.pid) - 3600, host=socket.gethostname()).write(folder)
        assert runs.check_resumable(catalog.get(Project.at(tiny_project), "ok"), folder).pid == other.pid
        Manifest(study="ok", run_id="r", param_set="smoke", params={}, batch="b", status="running", pid=other.pid,
                 pid_started=manifest_module.process_start(other.pid), host=socket.gethostname()).write(folder)
        with pytest.raises(runs.ResumeError, match="still running"):
            runs.check_resumable(catalog.get(Project.at(tiny_project), "ok"), folder)
    finally:
        other.kill()
        other.wait()


def test_a_process_runs_exactness_by_its_command_not_by_a_path_that_mentions_it():
    from exactness.workbook.manifest import _runs_exactness

    assert _runs_exactness(["/p/.venv/bin/python", "/p/.venv/bin/exactness", "run", "near_tie"])
    assert _runs_exactness(["python", "-m", "exactness", "run", "all"])
    assert not _runs_exactness(["python", "-m", "pytest", "/work/exactness/tests"])
    assert not _runs_exactness(["/process_api", "--firecracker-init"])
