"""JupyterLab as a user meets it: `make lab` started on a free port, a notebook opened in Chromium (Playwright
driving Debian's browser) and run through the Lab UI (Run > Run All Cells).

Checked: the kernel connects on the first load (no reload) and reaches Idle; every code cell ran and the
outputs a reader expects appear, with no error output; a page closed while its kernel was still connecting
(a reload, a closed tab, a screenshot taken too early) leaves no HTTP 500 in the server log; nothing is
written into notebooks/ (no .ipynb_checkpoints, the notebook itself unchanged: Run All marks it dirty, the
test never saves). The server gets Jupyter state of its own (`make lab STATE=...`, a fresh clone's first
start) so that the developer's .state/ is left alone; autosave is off there, as a reader's unsaved run must
not rewrite the notebook behind the test.

Only the environment notebook is run: the near-tie notebook's smoke-sized defaults had run 28 of its 40 cells
after 8 minutes of Run All on the 2-core machine, too long for the suite.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from browser import FLAGS, require_chromium
from conftest import REPO

pytestmark = pytest.mark.slow  # a smoke batch, a browser or a benchmark: the fast tier leaves it out

NOTEBOOKS = REPO / "notebooks"
STAMP = ".venv/.exactness-installed"  # make's install stamp: the suite runs after `make install`
KERNEL_READY_S = 180  # a kernel start takes 10+ s on a loaded 2-core machine
SERVER_READY_S = 120

# What the page shows while the kernel is starting, and once it answers.
KERNEL_STATUS = 'span.jp-StatusBar-TextItem[title^="Change kernel for"]'
IDLE = re.compile(r"^Python \(exactness\) \| Idle$")


def _playwright():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("playwright is missing; `make install` installs the dev extras")
        pytest.skip("playwright is not installed (make install installs it)")
    return sync_playwright


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _server_env() -> dict[str, str]:
    """The caller's environment less what would point the server elsewhere: Jupyter's own variables (the
    Makefile sets them), an outer make's flags, a run folder or project a study run left behind."""
    drop = ("JUPYTER_", "IPYTHON", "MPL", "XDG_", "MAKE", "MFLAGS", "EXACTNESS_")
    return {k: v for k, v in os.environ.items() if not k.startswith(drop)}


class Lab:
    def __init__(self, state: Path, log: Path, flags: str = ""):
        self.state, self.log, self.flags = state, log, flags
        self.port, self.token = _free_port(), secrets.token_hex(16)
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        flags = (f"--ip=127.0.0.1 --port={self.port} --ServerApp.port_retries=0 "
                 f"--IdentityProvider.token={self.token} {self.flags}")
        with self.log.open("wb") as sink:
            self.process = subprocess.Popen(
                ["make", "--no-print-directory", "-s", "-o", STAMP, "lab", f"STATE={self.state}",
                 f"LAB_ARGS={flags}"],
                cwd=REPO, env=_server_env(), stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + SERVER_READY_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"`make lab` exited with {self.process.returncode}:\n{self.log_text()[-3000:]}")
            try:
                urllib.request.urlopen(f"{self.url}/api/status?token={self.token}", timeout=5)
                return
            except OSError:
                time.sleep(0.5)
        pytest.fail(f"JupyterLab did not answer within {SERVER_READY_S} s:\n{self.log_text()[-3000:]}")

    def stop(self) -> None:
        """SIGTERM to make and the server (the server shuts its kernels down), SIGKILL if they linger."""
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def api(self, method: str, path: str):
        request = urllib.request.Request(f"{self.url}{path}", method=method,
                                         headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=60) as response:
            body = response.read()
        return json.loads(body) if body else None

    def shut_down_sessions(self) -> None:
        for session in self.api("GET", "/api/sessions"):
            self.api("DELETE", f"/api/sessions/{session['id']}")

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def server_errors(self) -> list[str]:
        """Every HTTP 500 and uncaught exception the server logged, with the lines that explain it."""
        lines = self.log_text().splitlines()
        return ["\n".join(lines[i:i + 25]) for i, line in enumerate(lines)
                if re.search(r"\] 500 |Uncaught exception", line)]


def _write_settings(config_dir: Path) -> None:
    """Lab settings of the test's own state: no autosave (the run must not rewrite the notebook), no news
    fetch (the machine is offline, and its toast would cover the page)."""
    settings = {"@jupyterlab/docmanager-extension/plugin": {"autosave": False},
                "@jupyterlab/apputils-extension/notification": {"fetchNews": "false"}}
    for name, values in settings.items():
        path = config_dir / "lab" / "user-settings" / f"{name}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))


LATEST_SUBJECT = "Wav2Vec2ConformerForPreTraining"  # the answer of the planted default run the server reads


def _planted_outputs(outputs: Path) -> None:
    """One passed default run of near_tie in the test's own outputs folder (the checkout's is left alone)."""
    from exactness.workbook.answers import Answer
    from exactness.workbook.manifest import Manifest

    folder = outputs / "near_tie" / "planted-default"
    folder.mkdir(parents=True)
    Manifest(study="near_tie", run_id="planted-default", param_set="default", params={}, batch="b",
             status="passed", started="2026-12-05T06:00:00+00:00", duration_s=1.0).write(folder)
    answer = Answer(LATEST_SUBJECT, "near-tie", "compare `projected_states`", "1 in 5,700")
    (folder / "summary.json").write_text(json.dumps({"answers": [answer.to_dict()]}))


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    require_chromium()
    _playwright()
    folder = tmp_path_factory.mktemp("lab")
    _planted_outputs(folder / "outputs")
    server = Lab(folder / "state", folder / "server.log", f"--StudyNotebooks.outputs={folder / 'outputs'}")
    _write_settings(server.state / "jupyter" / "config")
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def browser(lab):
    with _playwright()() as playwright, tempfile.TemporaryDirectory(prefix="exactness-chromium-") as profile:
        context = playwright.chromium.launch_persistent_context(
            profile, executable_path=require_chromium(), headless=True,
            args=[f for f in FLAGS if f != "--headless"], viewport={"width": 1400, "height": 900},
            env={**os.environ, "HOME": profile, "XDG_CONFIG_HOME": profile, "XDG_CACHE_HOME": profile})
        try:
            yield context
        finally:
            context.close()


def _tree(notebook: str = "environment.ipynb") -> tuple[set[str], str]:
    """Every path under notebooks/ (hidden ones included), and the hash of the notebook the test opens."""
    paths = {str(p.relative_to(NOTEBOOKS)) for p in NOTEBOOKS.rglob("*")}
    return paths, hashlib.sha256((NOTEBOOKS / notebook).read_bytes()).hexdigest()


def _open(browser, lab: Lab, notebook: str):
    page = browser.new_page()
    page.goto(f"{lab.url}/lab/tree/{notebook}?token={lab.token}")
    return page


def _wait_idle(page, lab: Lab, what: str) -> None:
    from playwright.sync_api import Error

    try:
        page.wait_for_function(
            f"re => {{ const s = document.querySelector({json.dumps(KERNEL_STATUS)}); "
            "return s && new RegExp(re).test(s.textContent.trim()); }",
            arg=IDLE.pattern, timeout=KERNEL_READY_S * 1000, polling=250)
    except Error:
        shown = page.locator(KERNEL_STATUS).all_text_contents()
        pytest.fail(f"{what}: the kernel never reached Idle in {KERNEL_READY_S} s (status bar: {shown}); "
                    f"server errors: {lab.server_errors()}; log tail:\n{lab.log_text()[-2000:]}")


def _run_all(page, lab: Lab, timeout_s: int) -> float:
    """Run > Run All Cells, then wait until every code cell has its execution count and the kernel is Idle."""
    from playwright.sync_api import Error

    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
    began = time.monotonic()
    try:
        page.wait_for_function(
            "re => { const prompts = [...document.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')];"
            f" const s = document.querySelector({json.dumps(KERNEL_STATUS)});"
            " return prompts.length > 0 && prompts.every(p => /^\\[\\d+\\]:$/.test(p.textContent.trim()))"
            " && s && new RegExp(re).test(s.textContent.trim()); }",
            arg=IDLE.pattern, timeout=timeout_s * 1000, polling=500)
    except Error:
        prompts = page.locator(".jp-CodeCell .jp-InputArea-prompt").all_text_contents()
        pytest.fail(f"Run All did not finish in {timeout_s} s; prompts {prompts}; errors {_error_outputs(page)}; "
                    f"server errors: {lab.server_errors()}")
    return time.monotonic() - began


def _error_outputs(page) -> list[str]:
    """The text of every error or stderr output (Lab renders both with the stderr mime type)."""
    return page.locator('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]').all_text_contents()


def _output_text(page) -> str:
    return "\n".join(page.locator(".jp-OutputArea-output").all_text_contents())


def _checkpoints_in_state(lab: Lab, notebook: str) -> list[Path]:
    return list(lab.state.rglob(f"{Path(notebook).stem}-checkpoint.ipynb"))


def test_environment_runs_all_cells_from_the_first_load(lab, browser):
    before = _tree()
    page = _open(browser, lab, "environment.ipynb")
    try:
        _wait_idle(page, lab, "first load of environment.ipynb")
        seconds = _run_all(page, lab, timeout_s=300)
        assert _error_outputs(page) == []
        tables = page.locator(".jp-OutputArea-output table").all_text_contents()
        assert any("torch" in t and "2.13.0" in t for t in tables), f"no versions table among {len(tables)} tables"
        assert "float32" in _output_text(page)
        assert page.locator(".jp-OutputArea-output section.exactness-findings li").count() > 0
    finally:
        page.close()
    assert not lab.server_errors(), "\n\n".join(lab.server_errors())
    assert _tree() == before, "opening or running a notebook changed notebooks/"
    assert _checkpoints_in_state(lab, "environment.ipynb"), "the notebook's checkpoint is not under the state folder"
    print(f"environment: Run All took {seconds:.0f} s")


def test_a_notebook_opens_with_the_latest_default_runs_answers_and_is_not_marked_unsaved(lab, browser):
    """Before any code runs: the answers of the study's latest default run are on the first screen, and the tab
    carries no unsaved marker once the kernel has answered (Lab writes the kernel's language_info into the
    notebook then; a notebook saved with less was marked unsaved at once)."""
    before = _tree("near_tie.ipynb")
    page = browser.new_page()
    # a workspace of its own: the default one would restore this tab into the other tests' pages (and theirs here)
    page.goto(f"{lab.url}/lab/workspaces/answers-on-open/tree/near_tie.ipynb?token={lab.token}")
    try:
        _wait_idle(page, lab, "first load of near_tie.ipynb")
        page.wait_for_timeout(2000)  # the kernel's info is applied to the notebook after its status turns Idle
        tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="near_tie.ipynb")
        assert tab.count() == 1
        assert "jp-mod-dirty" not in (tab.get_attribute("class") or ""), "the notebook is marked unsaved on open"
        shown = page.locator(".jp-OutputArea-output section.exactness-answers")
        assert shown.count() == 1 and LATEST_SUBJECT in shown.inner_text()
        assert "latest run on default parameters" in shown.inner_text()
        assert shown.bounding_box()["y"] < 900, "the answers are not on the first screen"
        assert page.locator(".jp-CodeCell .jp-InputArea-prompt").all_text_contents()[0].strip() == "[ ]:"
    finally:
        page.close()
    assert not lab.server_errors(), "\n\n".join(lab.server_errors())
    assert _tree("near_tie.ipynb") == before, "opening a notebook changed notebooks/"


def test_a_page_closed_while_its_kernel_connects_logs_no_500_and_the_next_load_runs(lab, browser):
    """The reported first load: the page went away (a screenshot taken, a reload) while the kernel was still
    starting, and the server logged a 500 on that kernel connection. The next load must connect and run.
    The kernel is made slow to answer (an IPython startup file in the test's own state) so that the page is
    surely closed while its kernel connection waits, as on a loaded machine."""
    before = _tree()
    lab.shut_down_sessions()  # a fresh kernel for this notebook, as on a first open
    slow = lab.state / "ipython" / "profile_default" / "startup" / "00-slow-start.py"
    slow.parent.mkdir(parents=True, exist_ok=True)
    slow.write_text("import time\ntime.sleep(5)  # written by tests/test_jupyterlab.py\n")
    try:
        early = _open(browser, lab, "environment.ipynb")
        early.locator(KERNEL_STATUS, has_text="Connecting").wait_for(timeout=KERNEL_READY_S * 1000)
        early.close()
        page = _open(browser, lab, "environment.ipynb")
    finally:
        slow.unlink()
    try:
        _wait_idle(page, lab, "the load after a closed one")
        _run_all(page, lab, timeout_s=300)
        assert _error_outputs(page) == []
        assert page.locator(".jp-OutputArea-output section.exactness-findings li").count() > 0
    finally:
        page.close()
    assert not lab.server_errors(), "\n\n".join(lab.server_errors())
    assert _tree() == before, "opening or running a notebook changed notebooks/"


def test_the_servers_token_is_readable_by_its_user_only(tmp_path):
    """The runtime folder holds the token (the server's info file, a browser-open page) and the kernels'
    connection keys: 0700 even where an earlier start left it 0755, and every file in it 0600."""
    runtime = tmp_path / "state" / "jupyter" / "runtime"
    runtime.mkdir(parents=True)
    runtime.chmod(0o755)
    server = Lab(tmp_path / "state", tmp_path / "server.log")
    try:
        server.start()
        files = {p.name: p.stat().st_mode & 0o777 for p in runtime.iterdir() if p.is_file()}
        assert runtime.stat().st_mode & 0o777 == 0o700
        assert any(name.startswith("jpserver-") for name in files), files
        assert {name: oct(mode) for name, mode in files.items() if mode & 0o077} == {}
    finally:
        server.stop()
