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
  var probe = document.createElement('pre'); probe.id = '__probe';
  probe.textContent = JSON.stringify({errors: __errors, images: images, error_outputs: errorOutputs.length,
                                      figures: figures, order: order,
                                      findings: findings ? findings.querySelectorAll('li').length : 0,
                                      text: document.body.innerText.slice(0, 200000)});
  document.body.appendChild(probe);
});</script>"""


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
                [browser, *FLAGS, f"--user-data-dir={profile}", "--virtual-time-budget=5000", "--dump-dom",
                 probe.resolve().as_uri()], capture_output=True, text=True, timeout=120, env=env)
    finally:
        probe.unlink()
    match = re.search(r'<pre id="__probe">(.*?)</pre>', completed.stdout, re.DOTALL)
    assert match, f"the page did not finish loading in chromium: {completed.stderr[-2000:]}"
    import html as html_module

    return json.loads(html_module.unescape(match.group(1)))
