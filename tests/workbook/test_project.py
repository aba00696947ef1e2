import os

from exactness.workbook.project import Project, find_root, keep_state_inside


def test_state_variables_point_inside_the_project(tmp_path, monkeypatch):
    for variable in ("JUPYTER_CONFIG_DIR", "IPYTHONDIR", "MPLCONFIGDIR", "XDG_CACHE_HOME"):
        monkeypatch.delenv(variable, raising=False)
    project = Project.at(tmp_path)
    keep_state_inside(project)
    for variable in ("JUPYTER_CONFIG_DIR", "IPYTHONDIR", "MPLCONFIGDIR", "XDG_CACHE_HOME"):
        assert os.environ[variable].startswith(str(tmp_path / ".state"))


def test_root_is_found_from_a_subfolder(tiny_project):
    assert find_root(tiny_project / "notebooks") == tiny_project
