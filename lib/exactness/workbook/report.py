"""report.html: the executed notebook as a page that opens from disk, offline, code hidden by default."""

from __future__ import annotations

import html
import re
from pathlib import Path

import nbformat
from nbconvert import HTMLExporter

from exactness.workbook.manifest import Manifest, write_atomically

# The lab template links require.js and MathJax from a CDN; offline they fail (silently or not), and a
# report must not depend on the network, so external scripts are removed.
_EXTERNAL_SCRIPT = re.compile(r"<script[^>]*\bsrc=\"https?://[^\"]*\"[^>]*>\s*</script>", re.IGNORECASE)

_BANNER_STYLE = (
    "font-family:sans-serif;padding:10px 16px;margin:0 0 8px 0;border-bottom:1px solid #ccc;"
    "background:{background}"
)
_STATUS_COLOURS = {"passed": "#e8f5e9", "failed": "#ffebee", "interrupted": "#fff8e1", "running": "#e3f2fd"}
# A report is read at a glance: each finding is its claim, then its detail (our figure, the investigation's, why)
# in smaller grey text that wraps; nothing is cut off, since a reader can neither hover on paper nor expand a cut.
_READER_STYLE = """<style>
.exactness-findings li .detail { display: block; white-space: normal; overflow-wrap: anywhere; }
</style>"""


def _drop_stderr(notebook) -> None:
    """Progress bars and warnings go to stderr; they stay in the executed notebook, not in the report."""
    for cell in notebook.cells:
        if cell.cell_type == "code":
            outputs = cell.get("outputs", [])
            cell.outputs = [o for o in outputs if not (o.output_type == "stream" and o.name == "stderr")]


def banner(manifest: Manifest, links: dict[str, str]) -> str:
    parts = [
        f"<b>{html.escape(manifest.study)}</b>",
        f"parameter set <code>{html.escape(manifest.param_set)}</code>",
        f"status <b>{html.escape(manifest.status)}</b>",
        f"run <code>{html.escape(manifest.run_id)}</code>",
    ]
    machine = manifest.machine or {}
    if machine.get("cpu_model"):  # float results depend on the CPU's kernels: every report names its machine
        cores = machine.get("usable_cpus", "?")
        parts.append(f"ran on {html.escape(str(machine['cpu_model']))} ({html.escape(str(cores))} cores)")
    if manifest.error:
        cell = f" in cell [{manifest.failed_cell}]" if manifest.failed_cell is not None else ""
        parts.append(f"error{cell}: <code>{html.escape(manifest.error)}</code>")
    parts += [f'<a href="{html.escape(href)}">{html.escape(text)}</a>' for text, href in links.items()]
    style = _BANNER_STYLE.format(background=_STATUS_COLOURS.get(manifest.status, "#eee"))
    return f'<div class="exactness-banner" style="{style}">' + " &middot; ".join(parts) + "</div>"


def export(notebook_path: Path, destination: Path, manifest: Manifest, links: dict[str, str],
           with_code: bool = False) -> Path:
    notebook = nbformat.read(notebook_path, as_version=4)
    _drop_stderr(notebook)
    exporter = HTMLExporter(template_name="lab", exclude_input=not with_code, exclude_input_prompt=True,
                            exclude_output_prompt=True)
    body, _ = exporter.from_notebook_node(notebook, resources={"metadata": {"name": manifest.study}})
    body = _EXTERNAL_SCRIPT.sub("", body)
    body = body.replace("</body>", _READER_STYLE + "</body>", 1)  # at the end: the page text opens with its content
    body = re.sub(r"(<body[^>]*>)", lambda m: m.group(1) + banner(manifest, links), body, count=1)
    write_atomically(destination, body)  # whole or not at all: a full disk never leaves a cut report
    return destination
