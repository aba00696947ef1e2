"""A study's notebook as `make lab` serves it: opened, it already shows the answers of the study's latest default
run, and it is not marked unsaved; saved, it goes back to the form the checkout keeps.

- The answers: the saved output of the cell that reserves their place (`answers.placeholder()`) is the answer
  table of the study's newest passed run on its default parameters (else of its newest passed run, its parameter
  set named), read from that run's summary.json: data only, every text escaped by `answers.to_html`; nothing in a
  run folder is imported or executed. "Run All" replaces it with this run's own answers, as in a report.
- Unsaved on open: once the kernel answers, Lab writes the kernel's `language_info` into the notebook, and a
  notebook whose saved `language_info` differs is changed, so marked unsaved before the reader did anything.
  The checkout keeps only `{"name": "python"}` (the kernel's records the interpreter's version, which is the
  machine's), so the served notebook carries the kernel's own: the `exactness` kernel runs ipykernel on the
  interpreter the server runs on (`make lab` starts both from .venv).

`served` and `for_saving` undo each other, so that opening and saving a notebook without a change leaves the
checkout's file as it was.
"""

from __future__ import annotations

import html
from pathlib import PurePosixPath
from typing import Any

from exactness.workbook import answers, index
from exactness.workbook.project import KERNEL_NAME, Project

CHECKOUT_LANGUAGE_INFO = {"name": "python"}
MARK = "exactness_latest_run"  # the served output's metadata key: what `for_saving` takes out again
PLACEHOLDER_CALL = "answers.placeholder()"
DEFAULT_SET = "default"


def kernel_language_info() -> dict[str, Any]:
    """The `language_info` the `exactness` kernel reports in its kernel_info reply (ipykernel's own)."""
    from ipykernel.ipkernel import IPythonKernel

    return dict(IPythonKernel.language_info)


def latest_run(project: Project, study: str) -> index.RunEntry | None:
    """The study's newest passed run on its default parameters; else its newest passed run of any set."""
    passed = [e for e in index.collect(project) if e.manifest.study == study and e.manifest.status == "passed"]
    defaults = [e for e in passed if e.manifest.param_set == DEFAULT_SET]
    return (defaults or passed or [None])[0]


def answers_html(project: Project, study: str) -> str:
    """The latest run's answer table, headed by which run it is and where its report is."""
    entry = latest_run(project, study)
    if entry is None:
        command = f"exactness run {study}"
        return (f"<style>{answers.STYLE}</style><section class=\"exactness-answers\"><h2>Answers</h2><p>No passed "
                f"run of {html.escape(study)} yet: <code>make run</code> (every study) or "
                f"<code>{html.escape(command)}</code> writes one, and this cell shows its answers the next time the "
                "notebook is opened.</p></section>")
    m = entry.manifest
    found = answers.from_summary(entry.summary)
    which = ("default parameters" if m.param_set == DEFAULT_SET else
             f"parameter set {m.param_set!r} (no default run yet)")
    report = entry.folder / "report.html"
    if report.is_relative_to(project.root):  # the checkout's outputs/: said from the checkout, as the README does
        report = PurePosixPath(*report.relative_to(project.root).parts)
    title = f"Answers of the latest run on {which}"
    note = (f"<p class=\"legend\">Run {html.escape(m.run_id)}, started {html.escape(m.started)}; its report: "
            f"<code>{html.escape(str(report))}</code>. This is that run's output, shown on opening; \"Run All\" "
            "replaces it with this notebook's own run (smoke-sized).</p>")
    columns = answers.Columns.from_summary(entry.summary)
    beside = answers.settled_in_batch(found, entry.folder, columns, links_from=project.notebooks)  # as its report
    return answers.to_html(found, title=title, columns=columns, beside=beside) + note


def _placeholder_cell(notebook: dict) -> dict | None:
    for cell in notebook.get("cells", []):
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else source
        if cell.get("cell_type") == "code" and PLACEHOLDER_CALL in source:
            return cell
    return None


def _is_study_notebook(notebook: dict) -> bool:
    kernelspec = notebook.get("metadata", {}).get("kernelspec") or {}
    return kernelspec.get("name") == KERNEL_NAME


def served(notebook: dict, path: str, project: Project) -> dict:
    """`notebook` (the checkout's, as read) as Lab gets it: the kernel's language_info, and the latest run's
    answers as the placeholder cell's output where that cell has none of its own. Changed in place."""
    if not _is_study_notebook(notebook):
        return notebook
    metadata = notebook.setdefault("metadata", {})
    if metadata.get("language_info") == CHECKOUT_LANGUAGE_INFO:
        metadata["language_info"] = kernel_language_info()
    cell = _placeholder_cell(notebook)
    study_notebook = len(PurePosixPath(path.strip("/")).parts) == 1  # notebooks/<study>.ipynb, not a copy below
    if cell is not None and not cell.get("outputs") and study_notebook:
        study = PurePosixPath(path).stem
        cell["outputs"] = [{"output_type": "display_data", "metadata": {MARK: True},
                            "data": {"text/html": answers_html(project, study),
                                     "text/plain": f"The answers of {study}'s latest run (HTML)"}}]
        # Lab sanitizes an untrusted cell's HTML, which drops the table's style; this output is our own markup
        # around escaped text, nothing in it from the run folder unescaped
        cell.setdefault("metadata", {})["trusted"] = True
    return notebook


def for_saving(notebook: dict) -> dict:
    """`notebook` as Lab sends it to be saved, less what `served` added. Changed in place."""
    if not _is_study_notebook(notebook):
        return notebook
    metadata = notebook.get("metadata", {})
    if metadata.get("language_info") == kernel_language_info():
        metadata["language_info"] = dict(CHECKOUT_LANGUAGE_INFO)
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") == "code" and cell.get("outputs"):
            kept = [o for o in cell["outputs"] if not (o.get("metadata") or {}).get(MARK)]
            if len(kept) < len(cell["outputs"]):
                cell["outputs"] = kept
                cell.get("metadata", {}).pop("trusted", None)
    return notebook
