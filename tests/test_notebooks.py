"""Every committed notebook: clean (no outputs), parameterized, and with parameter sets that validate."""

import json

import pytest

from conftest import REPO
from exactness.workbook import catalog, parameters
from exactness.workbook.project import Project

PROJECT = Project.at(REPO)
STUDIES = catalog.discover(PROJECT)


def test_the_project_has_studies():
    assert "environment" in STUDIES


@pytest.mark.parametrize("name", STUDIES)
def test_committed_notebook_has_no_outputs_or_execution_counts(name):
    notebook = json.loads(STUDIES[name].notebook.read_text())
    dirty = [i for i, c in enumerate(notebook["cells"])
             if c["cell_type"] == "code" and (c.get("outputs") or c.get("execution_count"))]
    assert not dirty, f"{name}.ipynb cells {dirty} carry outputs; clear them before committing"


@pytest.mark.parametrize("name", STUDIES)
def test_notebook_uses_the_project_kernel(name):
    notebook = json.loads(STUDIES[name].notebook.read_text())
    assert notebook["metadata"]["kernelspec"]["name"] == "exactness"


@pytest.mark.parametrize("name", STUDIES)
def test_smoke_default_and_paper_sets_exist_and_validate(name):
    study = STUDIES[name]
    assert {"smoke", "default", "paper"} <= set(study.param_sets)
    for param_set in study.param_sets:
        parameters.resolve(study.notebook, [study.param_file(param_set)], [])
