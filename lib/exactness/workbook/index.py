"""outputs/index.html: every run, newest first, with status, headline figures and links. No scripts, no
network: it opens straight from disk."""

from __future__ import annotations

import html
import json
import os
from dataclasses import dataclass
from pathlib import Path

from exactness.workbook import findings
from exactness.workbook.manifest import MANIFEST, Manifest, ManifestError, write_atomically
from exactness.workbook.project import Project

HEADLINES_SHOWN = 8
_STYLE = """
body { font-family: sans-serif; margin: 24px; color: #222; }
table { border-collapse: collapse; width: 100%; }
th, td { border-bottom: 1px solid #ddd; padding: 6px 8px; text-align: left; vertical-align: top; }
th { background: #f5f5f5; }
tr.passed td.status { background: #c8e6c9; }
tr.failed td.status { background: #ef9a9a; color: #7f0000; font-weight: bold; }
tr.interrupted td.status { background: #ffe082; }
tr.running td.status { background: #bbdefb; }
tr.died td.status, tr.unreadable td.status { background: #ef9a9a; color: #7f0000; font-weight: bold; }
.card { border: 1px solid #c5cae9; border-radius: 4px; padding: 8px 16px; margin: 0 0 16px 0; background: #fafbff; }
.card h2 { margin: 4px 0; font-size: 1.2em; }
.card .meta { color: #555; font-size: 0.9em; }
.card ol { margin: 6px 0; padding-left: 1.4em; } .card li { margin: 3px 0; }
td.headlines { font-size: 0.9em; }
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
        summary = json.loads(path.read_text()) if path.exists() else {}
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


def _row(entry: RunEntry, outputs: Path) -> str:
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
    duration = f"{m.duration_s:.1f} s" if m.duration_s is not None else ""
    headlines = "<br>".join(html.escape(h) for h in entry.headlines)
    return (
        f'<tr class="{html.escape(m.status)}"><td>{html.escape(m.study)}</td>'
        f"<td><code>{html.escape(m.param_set)}</code></td><td class=\"status\">{status}</td>"
        f"<td>{html.escape(m.started)}</td><td>{duration}</td><td class=\"headlines\">{headlines}</td>"
        f"<td>{' '.join(links)}<br><small><code>{html.escape(m.run_id)}</code></small></td></tr>"
    )


def _links(entry: RunEntry, outputs: Path) -> list[str]:
    relative = html.escape(os.path.relpath(entry.folder, outputs))
    links = [f'<a href="{relative}/report.html">report</a>']
    notebooks = sorted(entry.folder.glob("*.ipynb"))[:1]
    links += [f'<a href="{relative}/{html.escape(nb.name)}">notebook</a>' for nb in notebooks]
    if (entry.folder / "tables").is_dir():
        links.append(f'<a href="{relative}/tables/">tables</a>')
    if entry.manifest.environment_run:
        links.append(f'<a href="{html.escape(entry.manifest.environment_run)}/report.html">environment</a>')
    return links


def _card(entry: RunEntry, outputs: Path) -> str:
    """A study's newest passed run: what it found, in words, with the verdict words."""
    m = entry.manifest
    items = "".join(f"<li>{findings.verdict_badge(f.verdict)}{html.escape(f.claim)}</li>" for f in entry.findings)
    body = f"<ol>{items}</ol>" if items else "<p>No findings recorded by this run.</p>"
    duration = f", {m.duration_s:.0f} s" if m.duration_s is not None else ""
    return (f'<div class="card"><h2>{html.escape(m.study)}</h2>{body}<p class="meta">{html.escape(m.status)}, '
            f"{html.escape(m.started)}{duration}, parameter set <code>{html.escape(m.param_set)}</code> &middot; "
            f"{' &middot; '.join(_links(entry, outputs))}</p></div>")


def render(project: Project) -> str:
    entries = collect(project)
    newest_passed = {}
    for entry in entries:  # newest first
        if entry.manifest.status == "passed" and entry.manifest.study not in newest_passed:
            newest_passed[entry.manifest.study] = entry
    cards = "\n".join(_card(e, project.outputs) for e in newest_passed.values())
    rows = "\n".join(_row(e, project.outputs) for e in entries) or '<tr><td colspan="7">no runs yet</td></tr>'
    return (
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>exactness runs</title>"
        f"<style>{_STYLE}{findings.STYLE}</style></head><body><h1>exactness runs</h1>"
        f"{cards}<h2>All runs</h2>"
        f"<p>{len(entries)} runs, newest first. Each report links the environment run of its batch.</p>"
        "<table><thead><tr><th>study</th><th>parameter set</th><th>status</th><th>started</th>"
        f"<th>duration</th><th>headline figures</th><th>links</th></tr></thead><tbody>\n{rows}\n"
        "</tbody></table></body></html>\n"
    )


def write(project: Project) -> Path:
    project.outputs.mkdir(parents=True, exist_ok=True)
    path = project.outputs / "index.html"
    write_atomically(path, render(project))  # a temporary file per writer: concurrent runs never collide
    return path
