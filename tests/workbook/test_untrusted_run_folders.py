"""A run folder may come from someone else (shared outputs, a colleague's archive): nothing in it is ever
executed. Resumed parameters go through the same names, types and rules as `-p`; shards load only when
authenticated with the key kept outside the run folder."""

import hashlib
import pathlib
import pickle
import subprocess
import sys

import pytest

from conftest import cli_env
from exactness.workbook import catalog, runs
from exactness.workbook.manifest import Manifest
from exactness.workbook.parameters import ParameterError
from exactness.workbook.project import Project
from exactness.workbook.shards import ShardError, ShardStore


def _failed_run(project_root, params, study="ok") -> pathlib.Path:
    folder = project_root / "outputs" / study / "20260101-000000-smoke-abcd"
    folder.mkdir(parents=True)
    Manifest(study=study, run_id=folder.name, param_set="smoke", params=params, batch="b", status="failed",
             started="2026-01-01T00:00:00+00:00", error="RuntimeError: earlier").write(folder)
    return folder


_OK = {"n_values": 3, "scale": 1.5, "label": "x", "models": ["a"], "scheduler": None}


@pytest.mark.slow
def test_a_parameter_name_planted_in_a_manifest_is_refused_and_never_executed(tiny_project, tmp_path):
    marker = tmp_path / "pwned"
    planted = f"x=__import__('pathlib').Path({str(marker)!r}).touch();y"
    folder = _failed_run(tiny_project, {**_OK, planted: 1})
    result = subprocess.run([sys.executable, "-m", "exactness", "run", "ok", "--resume", str(folder)],
                            capture_output=True, text=True, env=cli_env(tiny_project), timeout=600)
    assert result.returncode == 2, result.stdout + result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "unknown parameter" in result.stderr and str(folder / "manifest.json") in result.stderr
    assert not marker.exists() and "resuming" not in result.stdout
    assert Manifest.read(folder).status == "failed"  # untouched


@pytest.mark.parametrize("params, message", [
    ({**_OK, "n_values": "3; import os"}, "parameter 'n_values' (from {manifest}): expected int, got str"),
    ({**_OK, "scale": [1.5]}, "parameter 'scale' (from {manifest}): expected float, got list [1.5]"),
])
def test_resumed_parameters_go_through_the_same_types_as_p(tiny_project, params, message):
    folder = _failed_run(tiny_project, params)
    project = Project.at(tiny_project)
    with pytest.raises(ParameterError) as error:
        runs.check_resumable(catalog.get(project, "ok"), folder)
    assert message.format(manifest=folder / "manifest.json") in str(error.value)


def test_a_resumed_value_outside_its_studys_rules_is_refused_as_with_p(tmp_path):
    from exactness.workbook import parameters

    project = Project.at(pathlib.Path(__file__).resolve().parents[2], tmp_path / "out")
    study = catalog.get(project, "near_tie")
    good = parameters.resolve(study.notebook, [study.param_file("smoke")], [])
    folder = tmp_path / "out" / "near_tie" / "run"
    folder.mkdir(parents=True)
    Manifest(study="near_tie", run_id="run", param_set="smoke", params={**good, "n_seeds": 0}, batch="b",
             status="failed").write(folder)
    with pytest.raises(Exception, match=rf"n_seeds \(from {folder / 'manifest.json'}\) must be at least 1, got 0"):
        runs.check_resumable(study, folder)


class _Touch:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (pathlib.Path.touch, (pathlib.Path(self.path),))


def test_a_shard_forged_with_a_recomputed_checksum_is_refused_and_never_unpickled(tmp_path):
    marker = tmp_path / "pwned"
    store = ShardStore(tmp_path / "shards", key=b"k" * 32)
    key = store.key("sweep", [0, 1])
    path = store.save(key, [0, 1])
    payload = pickle.dumps(_Touch(marker))
    forged = hashlib.sha256(key.encode() + b"\0" + payload).hexdigest().encode()
    path.write_bytes(forged + payload)  # what anyone who can read shards.py can write
    with pytest.raises(ShardError, match=r"not authenticated by this project's shard key"):
        store.load(key)
    assert not marker.exists()


def test_a_shard_written_under_another_key_is_refused(tmp_path):
    mine, theirs = ShardStore(tmp_path, key=b"a" * 32), ShardStore(tmp_path, key=b"b" * 32)
    key = theirs.key("sweep", [0, 1])
    theirs.save(key, [0, 1])
    with pytest.raises(ShardError, match=r"not authenticated by this project's shard key.*delete it"):
        mine.load(key)
    assert theirs.load(key) == [0, 1]


def test_the_shard_key_lives_in_the_projects_state_outside_any_run_folder(tiny_project):
    store = ShardStore(tiny_project / "outputs" / "ok" / "run" / "shards")
    key = store.key("sweep", [0])
    store.save(key, [0])
    key_file = tiny_project / ".state" / "shard.key"
    assert key_file.is_file() and oct(key_file.stat().st_mode & 0o777) == "0o600"
    assert len(key_file.read_bytes()) == 32 and store.load(key) == [0]
    assert not any(p.name == "shard.key" for p in (tiny_project / "outputs").rglob("*"))


_REPO = pathlib.Path(__file__).resolve().parents[2]
_CHECKOUT = _REPO / "tests" / "fixtures" / "transformers_checkout"


def _discrete_ops_run(out, marker, **changes):
    """A failed discrete_ops run folder whose manifest names `changes` (code to execute) beside the smoke set."""
    from exactness.workbook import parameters

    project = Project.at(_REPO, out)
    study = catalog.get(project, "discrete_ops")
    good = parameters.resolve(study.notebook, [study.param_file("smoke")], [])
    folder = out / "discrete_ops" / "20260101-000000-smoke-abcd"
    folder.mkdir(parents=True)
    Manifest(study="discrete_ops", run_id=folder.name, param_set="smoke", params={**good, **changes}, batch="b",
             status="failed", started="2026-01-01T00:00:00+00:00", error="RuntimeError: earlier").write(folder)
    return project, study, folder


@pytest.mark.parametrize("changes", ["builder", "checkout"])
def test_resuming_a_run_folder_never_executes_the_builders_or_checkout_its_manifest_names(
        tmp_path, monkeypatch, capsys, changes):
    from exactness.workbook import cli

    marker = tmp_path / "pwned"
    evil = tmp_path / "evil.py"
    evil.write_text(f"import pathlib\npathlib.Path({str(marker)!r}).touch()\n\ndef build(seed):\n    return None\n")
    named = ({"models": [f"{evil}:build"]} if changes == "builder" else
             {"models": ["BertForMaskedLM"], "transformers_tests": str(_CHECKOUT)})
    _, _, folder = _discrete_ops_run(tmp_path / "out", marker, **named)
    resumed = []
    monkeypatch.setattr(runs, "resume", lambda *a, **k: resumed.append(a))
    monkeypatch.setattr(runs, "ensure_kernel", lambda: None)
    code = cli.main(["--out", str(tmp_path / "out"), "run", "discrete_ops", "--resume", str(folder)])
    err = capsys.readouterr().err
    assert code == 2 and not resumed and not marker.exists()
    assert len(err.strip().splitlines()) == 1, err
    named_param = "models" if changes == "builder" else "transformers_tests"
    assert str(folder / "manifest.json") in err and f"-p {named_param}" in err
    assert Manifest.read(folder).status == "failed"


def test_a_builder_given_again_on_the_command_line_may_resume(tmp_path):
    evil = tmp_path / "mine.py"
    evil.write_text("def build(seed):\n    return None\n")
    _, study, folder = _discrete_ops_run(tmp_path / "out", None, models=[f"{evil}:build"])
    with pytest.raises(runs.ResumeError, match="names code to execute"):
        runs.check_resumable(study, folder)
    assert runs.check_resumable(study, folder, given={"models"}).params["models"] == [f"{evil}:build"]
