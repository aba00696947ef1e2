"""Shared fixtures: a throwaway project with tiny notebooks (one passes, one fails on purpose)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
# The fixture checkout's tests are transformers-style testers for the workbook to import, not tests of this project.
# (Said here, not in a conftest.py of their own: a second module named `conftest` would shadow this one.)
collect_ignore = ["fixtures"]


@pytest.fixture(autouse=True)
def _close_figures() -> Iterator[None]:
    """Every figure a test drew is closed after it: pyplot keeps each open one, and a worker warns past 20."""
    yield
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None:
        pyplot.close("all")


@pytest.fixture
def own_worker_state():
    """This test's own worker state (what a process keeps between chunks), the process's again afterwards."""
    from exactness.runtimes import worker_state

    with worker_state.fresh() as state:
        yield state


def write_notebook(path: Path, parameters: str, *cells: str) -> Path:
    nb = new_notebook()
    nb.metadata["kernelspec"] = {"name": "exactness", "display_name": "Python (exactness)", "language": "python"}
    nb.cells.append(new_markdown_cell("# A tiny study"))
    params = new_code_cell(parameters)
    params.metadata["tags"] = ["parameters"]
    nb.cells.append(params)
    nb.cells += [new_code_cell(c) for c in cells]
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


@pytest.fixture(scope="session")
def short_tmp() -> Iterator[Path]:
    """A short folder of /tmp for this session's projects, removed when the session ends (a run's processes may
    still write into a project a moment after its test)."""
    import shutil
    import tempfile

    top = Path(tempfile.mkdtemp(prefix="exactness-test-"))
    yield top
    shutil.rmtree(top, ignore_errors=True)


@pytest.fixture
def tiny_project(short_tmp: Path, monkeypatch) -> Path:
    """notebooks/{environment,ok,failing}.ipynb with params/<study>/smoke.yaml, outputs/ empty. In a short folder:
    a run puts its kernel's sockets inside the project only where the path fits a socket's (pytest-xdist's tmp_path
    does not), and the tests of that case need it to."""
    import tempfile

    root = Path(tempfile.mkdtemp(dir=short_tmp)) / "project"
    write_notebook(root / "notebooks" / "environment.ipynb", "note = 'env'",
                   "from exactness.workbook.artifacts import RunArtifacts",
                   "RunArtifacts.current('environment').summary(note=note)")
    write_notebook(
        root / "notebooks" / "ok.ipynb",
        "n_values = 3  # how many values\nscale = 1.5\nlabel = 'x'\nmodels: list = ['a']\nscheduler: str | None = None",
        "import pandas as pd\nfrom exactness.workbook.artifacts import RunArtifacts\n"
        "artifacts = RunArtifacts.current('ok')",
        "frame = pd.DataFrame({'value': [scale * i for i in range(n_values)]})\nartifacts.table('values', frame)",
        "artifacts.summary(total=float(frame.value.sum()), label=label)",
    )
    write_notebook(root / "notebooks" / "failing.ipynb", "fail = True",
                   "x = 1", "if fail:\n    raise ValueError('deliberate failure\\nsecond line names the problem')")
    for study in ("environment", "ok", "failing"):
        (root / "params" / study).mkdir(parents=True)
        (root / "params" / study / "smoke.yaml").write_text("{}\n")
        (root / "params" / study / "default.yaml").write_text("{}\n")
    (root / "params" / "ok" / "smoke.yaml").write_text("n_values: 2\n")
    monkeypatch.setenv("EXACTNESS_PROJECT", str(root))
    return root


def cli_env(project: Path | None = None, home: Path | None = None) -> dict[str, str]:
    """Environment for running the `exactness` command as a subprocess, without the caller's tool state."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER_", "IPYTHON", "MPL", "XDG_"))}
    if project is not None:
        env["EXACTNESS_PROJECT"] = str(project)
    if home is not None:
        env["HOME"] = str(home)
    env.pop("EXACTNESS_RUN_DIR", None)
    return env


@pytest.fixture(scope="session")
def smoke_batch(tmp_path_factory):
    """`exactness run all -f smoke` once per test session, as `make run` would run every study (smoke-sized),
    with a HOME of its own: (outputs folder, home). The per-study notebook tests read their runs from it."""
    import subprocess

    outputs, home = tmp_path_factory.mktemp("smoke-outputs"), tmp_path_factory.mktemp("smoke-home")
    result = subprocess.run([sys.executable, "-m", "exactness", "--out", str(outputs), "run", "all", "-f", "smoke"],
                            capture_output=True, text=True, env=cli_env(REPO, home), timeout=1800)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return outputs, home


def smoke_run(batch, study: str) -> Path:
    """The one run folder of `study` in the smoke batch."""
    (folder,) = (batch[0] / study).iterdir()
    return folder


def pytest_collection_modifyitems(config, items):
    # `-n 2 --dist loadgroup` (pyproject's addopts): a module's tests stay on one worker, so its module-scoped
    # fixtures are built once, and every test of the smoke batch shares the one worker that runs the batch
    for item in items:
        group = "smoke_batch" if "smoke_batch" in getattr(item, "fixturenames", ()) else item.module.__name__
        item.add_marker(pytest.mark.xdist_group(group))
