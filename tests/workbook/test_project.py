import os

from exactness.workbook.project import Project, keep_state_inside


def test_state_variables_point_inside_the_project(tmp_path, monkeypatch):
    for variable in ("JUPYTER_CONFIG_DIR", "IPYTHONDIR", "MPLCONFIGDIR", "XDG_CACHE_HOME"):
        monkeypatch.delenv(variable, raising=False)
    project = Project.at(tmp_path)
    keep_state_inside(project)
    for variable in ("JUPYTER_CONFIG_DIR", "IPYTHONDIR", "MPLCONFIGDIR", "XDG_CACHE_HOME"):
        assert os.environ[variable].startswith(str(tmp_path / ".state"))


def test_the_jupyter_runtime_folder_is_private_even_when_made_readable_before(tmp_path, monkeypatch):
    monkeypatch.delenv("JUPYTER_RUNTIME_DIR", raising=False)
    runtime = tmp_path / ".state" / "jupyter" / "runtime"
    runtime.mkdir(parents=True)
    runtime.chmod(0o755)
    keep_state_inside(Project.at(tmp_path))
    assert os.environ["JUPYTER_RUNTIME_DIR"] == str(runtime)
    assert runtime.stat().st_mode & 0o777 == 0o700
