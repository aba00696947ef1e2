import os

from exactness.workbook.project import Project, keep_state_inside


def test_state_variables_point_inside_the_project(tmp_path, monkeypatch):
    for variable in ("JUPYTER_CONFIG_DIR", "IPYTHONDIR", "MPLCONFIGDIR", "XDG_CACHE_HOME"):
        monkeypatch.delenv(variable, raising=False)
    project = Project.at(tmp_path)
    keep_state_inside(project)
    for variable in ("JUPYTER_CONFIG_DIR", "IPYTHONDIR", "MPLCONFIGDIR", "XDG_CACHE_HOME"):
        assert os.environ[variable].startswith(str(tmp_path / ".state"))
