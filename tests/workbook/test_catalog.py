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


def test_a_study_runs_before_those_it_names_chained_and_the_first_studies_stay_first(tiny_project, monkeypatch):
    from exactness.workbook.study_rules import Registration

    project = Project.at(tiny_project)
    for name in ("x", "y", "w"):
        (project.notebooks / f"{name}.ipynb").write_text((project.notebooks / "ok.ipynb").read_text())
    wanted = {"x": ("y",), "y": ("w",), "ok": ("environment",), "environment": ()}
    real = catalog.study_rules.registration
    monkeypatch.setattr(catalog.study_rules, "registration", lambda name: Registration(
        runs_first=real(name).runs_first, runs_before=wanted.get(name, ())))
    # x before y before w, though alphabetically w comes first; a study never moves before the environment
    assert list(catalog.discover(project)) == ["environment", "failing", "ok", "x", "y", "w"]
    wanted["w"] = ("x",)
    with pytest.raises(ValueError, match="circle: w, x, y"):
        catalog.discover(project)
