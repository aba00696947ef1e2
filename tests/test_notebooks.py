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


def computed_in_text(source: str) -> list[str]:
    """The f-string fields of a cell that compute (call a function, index, do arithmetic or choose a word) rather
    than name a parameter or a value: a number a report shows is computed by the study's word modules, not in a
    cell."""
    import ast

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.JoinedStr):
            for part in node.values:
                computes = isinstance(part, ast.FormattedValue) and isinstance(part.value, (ast.Call, ast.BinOp,
                                                                                             ast.Subscript, ast.IfExp))
                if computes:
                    found.append(ast.unparse(part.value))
    return found


@pytest.mark.parametrize("name", STUDIES)
def test_no_cell_computes_a_number_inside_its_text(name):
    notebook = json.loads(STUDIES[name].notebook.read_text())
    cells = ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code"]
    assert {i: found for i, cell in enumerate(cells) if (found := computed_in_text(cell))} == {}


def test_the_check_finds_a_count_computed_in_a_cells_text():
    cell = ('say(f"{len(checks):,} checks at {threshold:g}")\nname = f"error_{stage}"\nx = f"{a[0]} {a + 1}"\n'
            'y = f"draw{\'s\' if n != 1 else \'\'}"')
    assert sorted(computed_in_text(cell)) == ["'s' if n != 1 else ''", "a + 1", "a[0]", "len(checks)"]
