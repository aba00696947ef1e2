import pytest

from exactness.workbook import catalog
from exactness.workbook.project import Project


def test_environment_comes_first_then_alphabetical(tiny_project):
    assert list(catalog.discover(Project.at(tiny_project))) == ["environment", "failing", "ok"]


def test_parameter_sets_by_name_or_path(tiny_project, tmp_path):
    study = catalog.get(Project.at(tiny_project), "ok")
    assert study.param_sets == ["default", "smoke"]
    assert study.param_file("smoke").name == "smoke.yaml"
    own = tmp_path / "mine.yaml"
    own.write_text("n_values: 1\n")
    assert study.param_file(str(own)) == own
    with pytest.raises(FileNotFoundError, match=r"one of \['default', 'smoke'\]"):
        study.param_file("paper")


def test_unknown_study_lists_the_known_ones(tiny_project):
    with pytest.raises(catalog.UnknownStudyError, match="studies: environment, failing, ok"):
        catalog.get(Project.at(tiny_project), "near_tie")
