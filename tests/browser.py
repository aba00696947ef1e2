"""Open a page in headless Chromium and report what a person would see: script errors, images and their
sizes, error outputs. The page is copied with a probe script injected, and read back with --dump-dom."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]

_COLLECT_ERRORS = """<script>window.__errors = [];
window.addEventListener('error', function (e) {
  if (e.target === window || !e.target || !e.target.tagName) { __errors.push(String(e.message)); }
}, true);</script>"""
_REPORT = """<script>window.addEventListener('load', function () {
  var images = Array.from(document.images).map(function (i) {
    var box = i.getBoundingClientRect(); return [i.naturalWidth, i.naturalHeight, box.width, box.height]; });
  var errorOutputs = document.querySelectorAll('[data-mime-type="application/vnd.jupyter.stderr"], .output_error');
  var figures = Array.from(document.images).map(function (i) {
    var figure = i.closest('figure'); var caption = figure && figure.querySelector('figcaption');
    return {alt: i.getAttribute('alt') || '', caption: caption ? caption.innerText.trim() : '',
            empty_panels: figure ? figure.getAttribute('data-empty-panels') || '' : '', width: i.naturalWidth}; });
  // What a reader meets first: the kinds of content in document order, ignoring headings and prose.
  var content = Array.from(document.querySelectorAll('section.exactness-answers, section.exactness-findings, ' +
    'table, img, .jp-OutputArea-output pre, .jp-OutputArea-output[data-mime-type="text/plain"]'))
    .filter(function (e) { return !e.closest('section.exactness-answers') || e.matches('section'); });
  var order = content.map(function (e) {
    return e.matches('section.exactness-answers') ? 'answers' :
      e.matches('section.exactness-findings') ? 'findings' : e.tagName.toLowerCase(); });
  var findings = document.querySelector('section.exactness-findings');
  // Leftovers a reader should never meet. Cells that show a missing-value marker:
  var markers = Array.from(document.querySelectorAll('td')).map(function (c) { return c.innerText.trim(); })
    .filter(function (t) { return /^(<NA>|nan|NaN|None|NaT|<NA>, .*)$/.test(t); });
  // Rows of a class table folded away: the classes only the folded part lists (textContent: a closed
  // <details> renders no innerText).
  var hidden = [];
  document.querySelectorAll('details').forEach(function (d) {
    var table = d.querySelector('table'); if (!table) { return; }
    var heads = Array.from(table.querySelectorAll('th')).map(function (h) { return h.textContent.trim(); });
    var at = heads.indexOf('class'); if (at < 0) { return; }
    var shown = new Set(), before = d.previousElementSibling;
    while (before && before.tagName !== 'TABLE') { before = before.previousElementSibling; }
    if (before) {
      before.querySelectorAll('tbody tr').forEach(function (r) { shown.add(r.cells[at].textContent.trim()); }); }
    table.querySelectorAll('tbody tr').forEach(function (r) {
      var name = r.cells[at].textContent.trim();
      if (!shown.has(name) && hidden.indexOf(name) < 0) { hidden.push(name); } });
  });
  // Section headings with nothing under them before the next heading of the same or a higher level.
  var blocks = Array.from(document.querySelectorAll('h1, h2, h3, p, table, img, li, pre, figure, section'));
  var empty = [];
  blocks.forEach(function (b, i) {
    if (!/^H[23]$/.test(b.tagName)) { return; }
    var next = blocks.slice(i + 1).find(function (n) { return !b.contains(n); });
    if (!next || (/^H[1-3]$/.test(next.tagName) && next.tagName <= b.tagName)) { empty.push(b.innerText.trim()); }
  });
  // What the first screen (1400 x 900) shows: the answers block or answer cards, and where each starts.
  var firstScreen = Array.from(document.querySelectorAll('section.exactness-answers, section.exactness-findings, ' +
    '.card, table.classes')).map(function (e) {
      var top = e.getBoundingClientRect().top + window.scrollY;
      return {kind: e.matches('table.classes') ? 'classes' :
                    e.matches('.card') ? (e.querySelector('table') ? 'answer card' : 'card') :
                    e.matches('section.exactness-answers') ? 'answers' : 'findings', top: top}; })
    .filter(function (e) { return e.top < 900; });
  // Text cut off: an element that clips its overflow (an ellipsis, or hidden) and holds more than it shows.
  var cut = Array.from(document.querySelectorAll('body *')).filter(function (e) {
    var style = getComputedStyle(e);
    return (style.textOverflow === 'ellipsis' || style.overflowX === 'hidden') && e.scrollWidth > e.clientWidth + 1
      && e.innerText && e.innerText.trim().length > 0 && !e.closest('pre, code, .jp-InputArea'); })
    .map(function (e) { return e.innerText.trim().slice(0, 120); });
  var probe = document.createElement('pre'); probe.id = '__probe';
  probe.textContent = JSON.stringify({errors: __errors, images: images, error_outputs: errorOutputs.length,
                                      figures: figures, order: order,
                                      findings: findings ? findings.querySelectorAll('li').length : 0,
                                      markers: markers, hidden_classes: hidden, empty_sections: empty,
                                      first_screen: firstScreen, cut_off: cut,
                                      text: document.body.innerText.slice(0, 200000)});
  document.body.appendChild(probe);
});</script>"""


# Leftovers in the text a reader meets, each a pattern and what it means.
LEFTOVERS = {
    "a plural with (s)": r"\w\(s\)",
    "a plural after one": r"(?<![\d.,x-])1 (?:failures|checks|rows|columns|draws|seeds|classes|flips|defects|"
                          r"tensors|frames|samples|runs|replays|candidates)\b",
    "an investigation called a seed": r"\b[Ss]eed 00[02]\b|\b00[02]_[0-9a-f]{16}\b",
    "a seed with thousands separators": r"\bseeds? \d{1,3}(?:,\d{3})+(?! (?:seeds|draws|runs))",
    "a missing-value marker": r"<NA>|\bNaT\b",
    # issue 44: one shape for a rate (1 in N with its interval, none as a bound), nothing internal on a page
    "a rate per 40,000": r"\b(?:per|/) ?40(?:,000|k)\b",
    "a rate as a probability": r"\bbounded below \d|\b(?:rate|flips?|fails?) (?:is )?(?:below|at most) 0\.\d|"
                               r"\(95%: at most|interval 0 to",
    "a zero drawn on a log axis": r"\b0 drawn at|exact ties at 0\.1\b",
    "infinity as a figure": r"∞|\binf\b",
    "a function or field name": r"\b(?:build_path|weights_path|session_path|gathered_graph|folded_fp64)\b|"
                                r"onnx\.exactness|\bby taps\b|dispatch recorder\)",
    "an ONNX initializer's name": r"initializer '\w+'",
    "Markdown shown raw": r"`[^`\n]+`|(?<![\w*])\*[^*\s][^*\n]*\*(?![\w*])",
}
NODE = r"\bnode_[A-Za-z0-9_]+"
NODE_EXPLAINED = r"ONNX node node_\w+ of the exported graph"


def leftovers(text: str) -> dict[str, list[str]]:
    """What of LEFTOVERS the text holds (with 60 characters around each), and node names said without their
    module: an ONNX node is named with the module it sits in ('... in encoder.layer.0 ...') or not at all."""
    found = {}
    for what, pattern in LEFTOVERS.items():
        hits = [text[max(0, m.start() - 60):m.end() + 60] for m in re.finditer(pattern, text)]
        if hits:
            found[what] = hits[:5]
    lines = [line for line in text.splitlines() if re.search(NODE, re.sub(NODE_EXPLAINED, "", line))]
    bare = [line[:160] for line in lines if not re.search(r"[a-z_]\w*\.[a-z_][\w.]*", line)]
    if bare:
        found["a node name without its module"] = bare[:5]
    return found


def require_chromium() -> str:
    if CHROMIUM:
        return CHROMIUM
    if os.environ.get("CI"):
        pytest.fail("chromium is missing; `make test` installs it (apt-get install chromium)")
    pytest.skip("chromium is not installed (make test installs it)")


def inspect_page(page: Path) -> dict:
    browser = require_chromium()
    html = page.read_text()
    html = re.sub(r"(<head[^>]*>)", lambda m: m.group(1) + _COLLECT_ERRORS, html, count=1)
    html = html.replace("</body>", _REPORT + "</body>")
    probe = page.with_name(f".probe-{os.getpid()}-{page.name}")
    probe.write_text(html)
    try:
        with tempfile.TemporaryDirectory() as profile:
            env = {**os.environ, "XDG_CONFIG_HOME": profile, "XDG_CACHE_HOME": profile, "HOME": profile}
            completed = subprocess.run(
                [browser, *FLAGS, f"--user-data-dir={profile}", "--window-size=1400,900", "--virtual-time-budget=5000",
                 "--dump-dom",
                 probe.resolve().as_uri()], capture_output=True, text=True, timeout=120, env=env)
    finally:
        probe.unlink()
    match = re.search(r'<pre id="__probe">(.*?)</pre>', completed.stdout, re.DOTALL)
    assert match, f"the page did not finish loading in chromium: {completed.stderr[-2000:]}"
    import html as html_module

    return json.loads(html_module.unescape(match.group(1)))
