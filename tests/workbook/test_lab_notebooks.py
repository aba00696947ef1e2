"""A study's notebook as `make lab` serves it: the latest default run's answers shown before any code runs, the
kernel's language_info (else Lab marks the notebook unsaved as soon as the kernel answers), and saving gives the
checkout's file back."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import nbformat
import pytest

from conftest import REPO
from exactness.workbook import lab_notebooks
from exactness.workbook.answers import Answer
from exactness.workbook.manifest import Manifest
from exactness.workbook.project import Project


def _run(outputs: Path, study: str, run_id: str, param_set: str, status: str, started: str, subject: str,
         action: str = "compare `projected_states`", proof: str = "") -> Path:
    folder = outputs / study / run_id
    folder.mkdir(parents=True)
    Manifest(study=study, run_id=run_id, param_set=param_set, params={}, batch="b", status=status,
             started=started, duration_s=1.0).write(folder)
    answer = Answer(subject, "near-tie", action, "1 in 5,700", proof=proof).to_dict()
    (folder / "summary.json").write_text(json.dumps({"answers": [answer]}))
    return folder


def _notebook(name: str = "near_tie.ipynb") -> dict:
    return json.loads((REPO / "notebooks" / name).read_text())


def _shown(notebook: dict) -> str:
    cell = lab_notebooks._placeholder_cell(notebook)
    return "".join(o["data"]["text/html"] for o in cell["outputs"])


@pytest.fixture
def project(tmp_path) -> Project:
    return Project(root=REPO, outputs=tmp_path / "outputs")


def test_the_newest_passed_default_run_is_shown_not_a_newer_smoke_or_failed_one(project):
    _run(project.outputs, "near_tie", "old", "default", "passed", "2026-12-01T00:00:00+00:00", "OldClass")
    _run(project.outputs, "near_tie", "mid", "default", "passed", "2026-12-02T00:00:00+00:00", "MidClass")
    _run(project.outputs, "near_tie", "smoke", "smoke", "passed", "2026-12-03T00:00:00+00:00", "SmokeClass")
    _run(project.outputs, "near_tie", "broke", "default", "failed", "2026-12-04T00:00:00+00:00", "FailedClass")
    _run(project.outputs, "ulp_noise", "other", "default", "passed", "2026-12-05T00:00:00+00:00", "OtherStudy")
    shown = _shown(lab_notebooks.served(_notebook(), "near_tie.ipynb", project))
    assert "MidClass" in shown and "latest run on default parameters" in shown
    assert f"{project.outputs}/near_tie/mid/report.html" in shown  # outputs outside the checkout: the whole path
    for absent in ("OldClass", "SmokeClass", "FailedClass", "OtherStudy"):
        assert absent not in shown


def test_the_report_is_named_from_the_checkout_or_whole_where_the_outputs_are_elsewhere(project, tmp_path):
    inside = Project(root=tmp_path / "checkout", outputs=tmp_path / "checkout" / "outputs")
    _run(inside.outputs, "near_tie", "r", "default", "passed", "2026-12-01T00:00:00+00:00", "SomeClass")
    assert "<code>outputs/near_tie/r/report.html</code>" in lab_notebooks.answers_html(inside, "near_tie")
    _run(project.outputs, "near_tie", "r", "default", "passed", "2026-12-01T00:00:00+00:00", "SomeClass")
    assert f"<code>{project.outputs}/near_tie/r/report.html</code>" in lab_notebooks.answers_html(project, "near_tie")


def test_without_a_default_run_the_newest_passed_run_is_shown_with_its_set_named(project):
    _run(project.outputs, "near_tie", "s1", "smoke", "passed", "2026-12-03T00:00:00+00:00", "SmokeClass")
    shown = _shown(lab_notebooks.served(_notebook(), "near_tie.ipynb", project))
    assert "SmokeClass" in shown and "parameter set &#x27;smoke&#x27; (no default run yet)" in shown


def test_without_a_run_the_cell_says_which_command_writes_one(project):
    shown = _shown(lab_notebooks.served(_notebook(), "near_tie.ipynb", project))
    assert "No passed run of near_tie yet" in shown and "exactness run near_tie" in shown


def test_a_run_folders_text_is_shown_escaped_never_as_markup(project):
    """The served cell is marked trusted (Lab would strip the table's style otherwise): no text of the run folder
    may reach it as markup, in any column."""
    planted = "<script>alert(1)</script><img src=x onerror=alert(2)>"
    _run(project.outputs, "near_tie", "r", "default", "passed", "2026-12-01T00:00:00+00:00", planted,
         action=f"compare `{planted}` {planted}", proof=planted)
    served = lab_notebooks.served(_notebook(), "near_tie.ipynb", project)
    shown = _shown(served)
    assert "<script" not in shown and "<img" not in shown
    assert shown.count("&lt;script&gt;alert(1)&lt;/script&gt;") == 4
    assert lab_notebooks._placeholder_cell(served)["metadata"]["trusted"] is True


def test_served_with_the_kernels_language_info_and_a_valid_notebook(project):
    served = lab_notebooks.served(_notebook(), "near_tie.ipynb", project)
    info = served["metadata"]["language_info"]
    assert info == lab_notebooks.kernel_language_info()
    assert {"version", "mimetype", "pygments_lexer"} <= set(info)  # what Lab compares and found missing
    nbformat.validate(nbformat.from_dict(served))


@pytest.mark.parametrize("name", sorted(p.name for p in (REPO / "notebooks").glob("*.ipynb")))
def test_every_notebook_has_the_cell_and_saving_what_was_served_gives_the_checkouts_file_back(project, name):
    _run(project.outputs, Path(name).stem, "r", "default", "passed", "2026-12-01T00:00:00+00:00", "SomeClass")
    checkout = _notebook(name)
    assert checkout["metadata"]["language_info"] == lab_notebooks.CHECKOUT_LANGUAGE_INFO
    served = lab_notebooks.served(copy.deepcopy(checkout), name, project)
    assert "SomeClass" in _shown(served)
    assert lab_notebooks.for_saving(served) == checkout


def test_a_cells_own_output_is_kept_and_saved(project):
    """After Run All, the placeholder cell holds the notebook's own answers: nothing replaces or strips them."""
    ran = _notebook()
    own = {"output_type": "display_data", "metadata": {}, "data": {"text/html": "<p>this run</p>"}}
    lab_notebooks._placeholder_cell(ran)["outputs"] = [own]
    assert _shown(lab_notebooks.served(copy.deepcopy(ran), "near_tie.ipynb", project)) == "<p>this run</p>"
    assert lab_notebooks._placeholder_cell(lab_notebooks.for_saving(copy.deepcopy(ran)))["outputs"] == [own]


def test_a_notebook_below_the_study_notebooks_gets_no_runs_answers(project):
    _run(project.outputs, "near_tie", "r", "default", "passed", "2026-12-01T00:00:00+00:00", "SomeClass")
    served = lab_notebooks.served(_notebook(), "copies/near_tie.ipynb", project)
    assert lab_notebooks._placeholder_cell(served)["outputs"] == []


def test_a_line_an_earlier_run_of_its_batch_settles_opens_under_that_answer_as_in_its_report(project):
    for study, started, seeds, rate in (("near_tie", "2026-12-01T01:00:00+00:00", 40000, "1 in 2,700"),
                                        ("discrete_ops", "2026-12-01T02:00:00+00:00", 2000, "1 in 2,000")):
        folder = _run(project.outputs, study, "r", "default", "passed", started, "UniSpeech")
        answer = Answer("UniSpeech", "near-tie", "compare tie-aware", rate, seeds=seeds).to_dict()
        (folder / "summary.json").write_text(json.dumps({"answers": [answer]}))
    shown = _shown(lab_notebooks.served(_notebook("discrete_ops.ipynb"), "discrete_ops.ipynb", project))
    assert shown.index("1 in 2,700") < shown.index("1 in 2,000") and "2,000 seeds; near_tie decides on 40,000" in shown
    link = os.path.relpath(project.outputs / "near_tie" / "r" / "report.html", REPO / "notebooks") + "#answer-UniSpeech"
    assert f'from <a href="{link}">near_tie</a>, 40,000 seeds' in shown  # from the notebooks' folder
