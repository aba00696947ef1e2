"""outputs/index.html: first one table of every class the newest passed runs judged, defects first, each row
linked to its answer in its report; then one card per study with the answer table of its newest passed run (its
findings folded under it), the cause and verdict words explained once, then every run in one line each, newest
first. No scripts, no network: it opens straight from disk."""

from __future__ import annotations

import dataclasses
import html
import os
import urllib.parse
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from exactness.workbook import answers, findings
from exactness.workbook.manifest import MANIFEST, Manifest, ManifestError, read_json, write_atomically
from exactness.workbook.presentation import inline_markdown
from exactness.workbook.project import Project
from exactness.workbook.wording import plural

HEADLINES_SHOWN = 8
_STYLE = """
body { font-family: sans-serif; margin: 16px 24px; color: #222; }
h1 { margin: 4px 0; font-size: 1.5em; } .intro { color: #555; margin: 2px 0 12px 0; }
table.runs { border-collapse: collapse; width: 100%; font-size: 0.9em; }
table.runs th, table.runs td { border-bottom: 1px solid #ddd; padding: 4px 8px; text-align: left; vertical-align: top; }
table.runs th { background: #f5f5f5; }
tr.passed td.status { background: #c8e6c9; }
tr.failed td.status { background: #ef9a9a; color: #7f0000; font-weight: bold; }
tr.interrupted td.status { background: #ffe082; }
tr.running td.status { background: #bbdefb; }
tr.died td.status, tr.unreadable td.status { background: #ef9a9a; color: #7f0000; font-weight: bold; }
.card { border: 1px solid #c5cae9; border-radius: 4px; padding: 4px 12px; margin: 0 0 10px 0; background: #fafbff; }
.card h3 { margin: 4px 0; font-size: 1.1em; }
.card table { border-collapse: collapse; font-size: 0.88em; width: 100%; }
.card th, .card td { border-bottom: 1px solid #e3e3e3; padding: 2px 6px; text-align: left; vertical-align: top; }
.card td.answer-proof { color: #555; font-size: 0.9em; } .card td.answer-subject { font-weight: bold; }
.card .meta { color: #555; font-size: 0.85em; margin: 4px 0; }
.card details { font-size: 0.88em; margin: 4px 0; }
.card .claims { margin: 4px 0; padding-left: 1.4em; } .card .claims li { margin: 2px 0; }
.legend { color: #444; font-size: 0.85em; margin: 8px 0 16px 0; }
table.classes { border-collapse: collapse; width: 100%; font-size: 0.9em; margin: 4px 0 14px 0; }
table.classes th, table.classes td { border-bottom: 1px solid #ddd; padding: 3px 8px; text-align: left;
  vertical-align: top; }
table.classes th { background: #f5f5f5; position: sticky; top: 0; }
table.classes td.class-name { font-weight: bold; white-space: nowrap; }
table.classes tr.same-class td { border-top: none; }
table.classes tr.same-class td.class-name, table.classes tr.same-class td.class-name a { color: #999; }
code { font-size: 0.9em; }
"""


@dataclass(frozen=True)
class RunEntry:
    folder: Path
    manifest: Manifest
    summary: dict

    @property
    def findings(self) -> list[findings.Finding]:
        return findings.from_summary(self.summary)

    @property
    def headlines(self) -> list[str]:
        """The findings with their verdict words; a study without findings shows its headline figures."""
        if self.findings:
            return [f.text() for f in self.findings]
        return [f"{name}: {short(value)}" for name, value in list(self.summary.items())[:HEADLINES_SHOWN]]


UNREADABLE_SUMMARY = {"summary.json": "unreadable"}


def read_summary(folder: Path) -> dict:
    """A run's summary.json; {} when it has none, UNREADABLE_SUMMARY when it is not a JSON object (another
    run's damaged summary must never break the index, `show` or a later run)."""
    path = folder / "summary.json"
    try:
        summary = read_json(path) if path.exists() else {}
    except (ValueError, OSError):  # not JSON, not UTF-8, not readable
        summary = None
    return summary if isinstance(summary, dict) else dict(UNREADABLE_SUMMARY)


def collect(project: Project) -> list[RunEntry]:
    entries = []
    for manifest_path in project.outputs.glob(f"*/*/{MANIFEST}"):
        folder = manifest_path.parent
        try:
            manifest = Manifest.read(folder)
            manifest.status = manifest.observed_status()  # a killed run shows "died", not "running" forever
        except (ManifestError, OSError) as error:  # shown as such (with its path), never breaking the index
            manifest = Manifest(study=folder.parent.name, run_id=folder.name, param_set="?", params={},
                                batch="?", status="unreadable", error=str(error))
        entries.append(RunEntry(folder, manifest, read_summary(folder)))
    # by the instant each run started (times carry their offset): local time strings of two time zones
    # compared as text put an older run first
    return sorted(entries, key=lambda e: (e.manifest.started_at(), e.manifest.run_id or ""), reverse=True)


def short(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict):
        return ", ".join(f"{k} {short(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(short(v) for v in value[:6]) + (" ..." if len(value) > 6 else "")
    return str(value)


# What each verdict word of a finding means, said once on the page.
VERDICT_MEANINGS = {
    "reproduced": "our figure agrees with the investigation's, measured on the same subject and scale",
    "differs": "our figure disagrees with the investigation's; the finding says why, or that it is unexplained",
    "not comparable": "the investigation measured something else (another model, export, scale or threshold), or "
                      "too few seeds to tell: no verdict either way",
    "new": "the investigation measured nothing like it: ours alone",
    "fact": "arithmetic (an IEEE 754 spacing) checked on this machine: it agrees with any figure that states it, so it "
            "reproduces nothing",
}


def _links(entry: RunEntry, outputs: Path) -> list[str]:
    relative = html.escape(os.path.relpath(entry.folder, outputs))
    links = [f'<a href="{relative}/report.html">report</a>']
    notebooks = sorted(entry.folder.glob("*.ipynb"))[:1]
    links += [f'<a href="{relative}/{html.escape(nb.name)}">notebook</a>' for nb in notebooks]
    if (entry.folder / "tables").is_dir():
        links.append(f'<a href="{relative}/tables/">tables</a>')
    environment = run_link(outputs, entry.manifest.environment_run)
    if environment is not None:
        links.append(f'<a href="{html.escape(environment)}/report.html">environment</a>')
    return links


def run_link(outputs: Path, relative: str | None) -> str | None:
    """`relative` (a manifest's `environment_run`) as a link target, or None unless it is a plain relative path
    to a folder under `outputs`: a manifest may come from someone else, and a `javascript:` or `http:` value,
    an absolute path or a `..` would make the page run a script or lead elsewhere."""
    if not relative or not isinstance(relative, str):
        return None
    parts = PurePosixPath(relative).parts
    if (not parts or PurePosixPath(relative).is_absolute() or "\\" in relative
            or any(part in ("..", ".") or ":" in part or not part.isprintable() for part in parts)):
        return None
    if not (outputs / relative).resolve().is_relative_to(outputs.resolve()):  # a link planted in outputs
        return None
    return urllib.parse.quote("/".join(parts))


def _when(manifest: Manifest) -> str:
    """When a run started, to the minute, with its offset from UTC ('2026-12-01 23:59 UTC')."""
    started = manifest.started_at()
    if started.year == 1:  # not a time: shown as written
        return str(manifest.started or "")
    offset = started.utcoffset()
    zone = "" if offset is None else " UTC" if not offset else f" {started.strftime('%z')}"
    return started.strftime("%Y-%m-%d %H:%M") + zone


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def _parameters(entry: RunEntry, outputs: Path) -> str:
    """The parameter set's name, linked to the run's parameters file where it has one."""
    name = f"<code>{html.escape(entry.manifest.param_set)}</code>"
    if (entry.folder / "params.yaml").exists():
        return f'<a href="{html.escape(os.path.relpath(entry.folder, outputs))}/params.yaml">{name}</a>'
    return name


def _row(entry: RunEntry, outputs: Path) -> str:
    """One run in one line: what ran, how it ended, with which parameters, how long, and its links; its findings
    are on its study's card (the newest passed run) or in its report, never repeated here."""
    m = entry.manifest
    relative = os.path.relpath(entry.folder, outputs)
    links = [f'<a href="{html.escape(relative)}/report.html">report</a>']
    notebooks = sorted(entry.folder.glob("*.ipynb"))
    if notebooks:
        links.append(f'<a href="{html.escape(relative)}/{html.escape(notebooks[0].name)}">notebook</a>')
    status = html.escape(m.status)
    if m.error:
        where = f"cell {m.failed_cell}: " if m.failed_cell is not None else ""
        status += f"<br><small>{html.escape(where + m.error)}</small>"
    elif entry.summary == UNREADABLE_SUMMARY:
        status += "<br><small>summary.json: unreadable</small>"
    return (
        f'<tr class="{html.escape(m.status)}"><td>{html.escape(m.study)}</td><td class="status">{status}</td>'
        f"<td>{_parameters(entry, outputs)}</td><td>{html.escape(_when(m))}</td><td>{_duration(m.duration_s)}</td>"
        f"<td>{' '.join(links)} <small><code>{html.escape(m.run_id)}</code></small></td></tr>"
    )


def _headline_list(entry: RunEntry) -> str:
    """A run without answers: its findings' claims, one line each, or its headline figures."""
    if entry.findings:
        items = "".join(f"<li>{findings.verdict_badge(f.verdict)}{html.escape(f.claim)}</li>" for f in entry.findings)
        return f'<ol class="claims">{items}</ol>'
    if entry.summary and entry.summary != UNREADABLE_SUMMARY:
        figures = "".join(f"<li>{html.escape(h)}</li>" for h in entry.headlines)
        return f'<ul class="claims">{figures}</ul>'
    return "<p>No findings recorded by this run.</p>"


def _card(entry: RunEntry, outputs: Path) -> str:
    """A study's newest passed run: its answer table first, its findings folded under it, then how it ran."""
    m = entry.manifest
    found = answers.from_summary(entry.summary)
    report = f'{html.escape(os.path.relpath(entry.folder, outputs))}/report.html'
    if found:
        # a class's line is in the table of every class above: said here by count, never a second time in full
        listed = [a for a in found if in_class_table(entry, a)]
        rest = [a for a in found if not in_class_table(entry, a)]
        counts = {}
        for a in answers.by_cause(listed):
            counts[a.cause] = counts.get(a.cause, 0) + 1
        body = (f'<p class="meta">{len(listed)} class{"es" if len(listed) != 1 else ""} in '
                f'<a href="#classes">the table of every class</a>: '
                + ", ".join(f"{n} {answers.cause_badge(cause)}" for cause, n in counts.items()) + "</p>"
                if listed else "")
        if rest:
            body += answers.table_html(rest, answers.Columns.from_summary(entry.summary), anchors=False)
        if entry.findings:
            body += (f"<details><summary>{plural(len(entry.findings), 'finding')}"
                     f"</summary>{_headline_list(entry)}</details>")
    else:
        body = _headline_list(entry)
    duration = f", {_duration(m.duration_s)}" if m.duration_s is not None else ""
    return (f'<div class="card"><h3><a href="{report}">{html.escape(m.study)}</a></h3>{body}<p class="meta">'
            f"{html.escape(m.status)}, {html.escape(_when(m))}{duration}, parameter set "
            f"<code>{html.escape(m.param_set)}</code> &middot; {' &middot; '.join(_links(entry, outputs))}</p></div>")


def _study_order(project: Project, studies) -> list[str]:
    """The catalog's order, the studies every batch starts with (the environment: context, one line) last;
    a study no longer in the catalog after them."""
    try:
        from exactness.workbook import catalog

        available = catalog.discover(project)
        first = set(catalog.first_studies(available))
        order = [n for n in available if n not in first] + [n for n in available if n in first]
    except (OSError, ValueError):
        order = []
    return [n for n in order if n in studies] + sorted(n for n in studies if n not in order)


def _legend(cards: list[RunEntry]) -> str:
    causes = answers.legend(a.cause for e in cards for a in answers.from_summary(e.summary))
    verdicts = "; ".join(f"{findings.verdict_badge(w)}{html.escape(m)}" for w, m in VERDICT_MEANINGS.items())
    return ('<div class="legend">' + (f"<p><b>Causes.</b> {causes}</p>" if causes else "")
            + f"<p><b>Verdicts of a finding</b> (against the investigation it starts from): {verdicts}</p></div>")


cause_rank = answers.cause_rank


@dataclass(frozen=True)
class ClassLine:
    study: str
    report: str  # the report's path relative to outputs/
    answer: answers.Answer
    settled_by: str = ""  # a line another study's answer settles (`answers.settles`): that study
    settled_on: int | None = None  # the seeds that study's answer rests on


def in_class_table(entry: RunEntry, answer: answers.Answer) -> bool:
    """A model study's line for one class (a class under another pair of sides stays on its study's card)."""
    by_class = answers.Columns.from_summary(entry.summary).subject == "class"
    return by_class and answers.PAIR_SEPARATOR not in answer.subject


def class_lines(cards: list[RunEntry], outputs: Path) -> list[ClassLine]:
    """Every class the shown runs judged (a model study's answers, its class under another pair of sides left to
    its report), sorted by the class's most urgent cause, then by name, so that a class judged by two studies
    has its lines together, the more urgent first; the order is the same on every render."""
    found = []
    for entry in cards:
        report = f"{os.path.relpath(entry.folder, outputs)}/report.html"
        found += [ClassLine(entry.manifest.study, report, a) for a in answers.from_summary(entry.summary)
                  if in_class_table(entry, a)]
    # one answer per class: a line that another settles (`answers.settler`) stays, below the class's answer; the
    # rest rank the class. Settling is a strict order, so every class keeps a line that ranks it.
    every = [answers.Line(x.study, x.report, x.answer) for x in found]

    def settled(line: ClassLine) -> ClassLine:
        best = answers.settler(line.answer, every)
        if best is None:
            return line
        return dataclasses.replace(line, settled_by=best.study, settled_on=best.answer.seeds)

    found = [settled(line) for line in found]
    urgent = {}
    for line in found:
        if not line.settled_by:
            urgent[line.answer.subject] = min(urgent.get(line.answer.subject, len(answers.CAUSE_ORDER)),
                                              cause_rank(line.answer.cause))
    return sorted(found, key=lambda x: (urgent[x.answer.subject], x.answer.subject, bool(x.settled_by),
                                        cause_rank(x.answer.cause), x.study))


def _classes_table(lines: list[ClassLine]) -> str:
    """The index's first table: cause, what to do and both rates of every class, each linked to its answer row."""
    if not lines:
        return ""
    rows, previous = [], None
    for line in lines:
        a = line.answer
        href = html.escape(f"{line.report}#{answers.anchor(a.subject)}", quote=True)
        same = a.subject == previous
        previous = a.subject
        rows.append(f'<tr class="{"same-class" if same else ""}"><td class="class-name">'
                    f'<a href="{href}">{html.escape(a.subject)}</a></td><td>{answers.cause_badge(a.cause)}</td>'
                    f"<td>{inline_markdown(a.action)}</td><td>{html.escape(a.rate)}</td>"
                    f"<td>{html.escape(a.flips)}</td><td><a href=\"{html.escape(line.report)}\">"
                    f"{html.escape(line.study)}</a>"
                    + (f" ({html.escape(answers.settled_words(line.answer, line.settled_by, line.settled_on))})"
                       if line.settled_by else "")
                    + "</td></tr>")
    defects = len({x.answer.subject for x in lines if x.answer.cause == "defect"})
    classes = len({x.answer.subject for x in lines})
    return (f"<h2 id=\"classes\">Every class judged</h2><p class=\"intro\">{plural(classes, 'class', 'classes')}"
            f", {defects} with a defect; sorted by cause, defects first; a class judged "
            "by two studies has a line from each, together, the class's answer first: a decided line over an "
            "undecided one, and of two giving one cause, the one on more seeds. The class links to its answer and "
            "proof in the report."
            "</p><table class=\"classes\"><thead><tr><th>class</th><th>cause</th><th>what to do</th>"
            "<th>export test fails</th><th>a discrete choice flips</th><th>study</th></tr></thead><tbody>"
            + "".join(rows) + "</tbody></table>")


def render(project: Project) -> str:
    entries = collect(project)
    newest_passed = {}
    for entry in entries:  # newest first
        if entry.manifest.status == "passed" and entry.manifest.study not in newest_passed:
            newest_passed[entry.manifest.study] = entry
    shown = [newest_passed[s] for s in _study_order(project, newest_passed)]
    cards = "\n".join(_card(e, project.outputs) for e in shown)
    classes = _classes_table(class_lines(shown, project.outputs))
    rows = "\n".join(_row(e, project.outputs) for e in entries) or '<tr><td colspan="6">no runs yet</td></tr>'
    return (
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>exactness runs</title>"
        f"<style>{_STYLE}{findings.STYLE}{answers.STYLE}</style></head><body><h1>exactness</h1>"
        "<p class=\"intro\">Every class's answer first, then each study's, from its newest passed run; every run "
        "below.</p>"
        f"{classes}{_legend(shown) if shown else ''}{'<h2>Studies</h2>' + cards if cards else ''}<h2>All runs</h2>"
        f"<p>{plural(len(entries), 'run')}, newest first. Each report links the environment "
        "run of its batch.</p>"
        "<table class=\"runs\"><thead><tr><th>study</th><th>status</th><th>parameters</th><th>started</th>"
        f"<th>duration</th><th>links</th></tr></thead><tbody>\n{rows}\n</tbody></table></body></html>\n"
    )


def write(project: Project) -> Path:
    project.outputs.mkdir(parents=True, exist_ok=True)
    path = project.outputs / "index.html"
    write_atomically(path, render(project))  # a temporary file per writer: concurrent runs never collide
    return path
