"""outputs/index.html: every run, newest first, with status, headline figures and links. No scripts, no
network: it opens straight from disk."""

from __future__ import annotations

import html
import json
import os
from dataclasses import dataclass
from pathlib import Path

from exactness.manifest import MANIFEST, Manifest, ManifestError, write_atomically
from exactness.project import Project

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
td.headlines { font-size: 0.9em; }
code { font-size: 0.9em; }
"""


@dataclass(frozen=True)
class RunEntry:
    folder: Path
    manifest: Manifest
    summary: dict

    @property
    def headlines(self) -> list[str]:
        return [f"{name}: {short(value)}" for name, value in list(self.summary.items())[:HEADLINES_SHOWN]]


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
        summary_path = folder / "summary.json"
        try:
            summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
        except ValueError:
            summary = {"summary.json": "unreadable"}
        entries.append(RunEntry(folder, manifest, summary))
    return sorted(entries, key=lambda e: (e.manifest.started or "", e.manifest.run_id or ""), reverse=True)


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


def render(project: Project) -> str:
    entries = collect(project)
    rows = "\n".join(_row(e, project.outputs) for e in entries) or '<tr><td colspan="7">no runs yet</td></tr>'
    return (
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>exactness runs</title>"
        f"<style>{_STYLE}</style></head><body><h1>exactness runs</h1>"
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
