"""Every study's smoke report, read in a real browser as its reader meets it: findings first, tables and
figures for people, nothing meant for a developer."""


import pytest

from browser import inspect_page, leftovers
from conftest import REPO, smoke_run
from exactness.workbook import catalog
from exactness.workbook.project import Project

pytestmark = pytest.mark.slow  # a smoke batch, a browser or a benchmark: the fast tier leaves it out

STUDIES = list(catalog.discover(Project.at(REPO)))
# What leaks when a raw object is printed instead of presented: a pandas Series or DataFrame repr, a path
# repr, a traceback, a library's warning.
LEAKS = ("dtype:", "rows × ", "PosixPath(", "Name: ", "Traceback", "WARNING")


@pytest.fixture(scope="module")
def pages(smoke_batch):
    return {study: inspect_page(smoke_run(smoke_batch, study) / "report.html") for study in STUDIES}


@pytest.mark.parametrize("study", STUDIES)
def test_the_answers_then_the_findings_are_the_first_things_a_reader_meets(pages, study):
    page = pages[study]
    assert page["order"][:2] == ["answers", "findings"], page["order"][:5]
    assert page["findings"] >= 1
    assert [e["kind"] for e in page["first_screen"]][:1] == ["answers"]  # on the first screen at 1400 x 900


@pytest.mark.parametrize("study", STUDIES)
def test_no_leftover_reaches_the_page(pages, study):
    page = pages[study]
    assert page["markers"] == [], "missing-value markers in table cells"
    assert page["hidden_classes"] == [], "classes only a folded part of a class table shows"
    assert page["empty_sections"] == [], "sections with nothing under them"
    assert page["cut_off"] == [], "text cut off with no way to read the rest"
    assert leftovers(page["text"]) == {}


def test_the_index_opens_with_every_class_judged(smoke_batch):
    page = inspect_page(smoke_batch[0] / "index.html")
    screen = [e["kind"] for e in page["first_screen"]]
    assert screen[:1] == ["classes"], page["first_screen"]  # the classes' answers, then the studies' cards
    assert not page["errors"] and leftovers(page["text"]) == {} and page["cut_off"] == []
    runs = page["text"][page["text"].index("All runs"):]
    assert "[new]" not in runs and "reproduced" not in runs  # no finding repeated below the cards


@pytest.mark.parametrize("study", STUDIES)
def test_nothing_meant_for_a_developer_reaches_the_page(pages, study):
    page = pages[study]
    leaked = [(leak, page["text"][max(0, i - 80):i + 80]) for leak in LEAKS if (i := page["text"].find(leak)) >= 0]
    assert not leaked
    assert not page["errors"] and page["error_outputs"] == 0


@pytest.mark.parametrize("study", STUDIES)
def test_every_figure_has_alt_text_a_caption_and_data_in_every_panel(pages, study):
    figures = pages[study]["figures"]
    assert figures, f"{study}'s report shows no figure"
    for number, figure in enumerate(figures, 1):
        assert figure["width"] > 0, f"figure {number} did not load"
        assert figure["alt"].strip() and figure["caption"].strip(), f"figure {number}: {figure}"
        assert figure["empty_panels"] == "", f"figure {number} ({figure['alt'][:60]}) has empty panels"
