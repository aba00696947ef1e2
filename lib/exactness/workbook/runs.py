"""One run: a fresh run folder, papermill execution, manifest, report. A run folder is written once,
except by `resume`, which finishes a failed or interrupted run in its own folder.

A failing cell keeps everything (the executed notebook shows the error, the manifest says which cell and
what went wrong); Ctrl-C leaves the run marked interrupted. Nothing outside the new folder is touched
except the index, which is rebuilt from all run folders. A resumed run keeps its earlier attempt's
notebook and report under attempts/<n>/ and its sweeps' finished shards, so it computes only what is
missing, with the parameters it started with.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import secrets
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from exactness import compat
from exactness.workbook import index, report
from exactness.workbook.artifacts import RUN_DIR_VARIABLE
from exactness.workbook.catalog import Study
from exactness.workbook.machine import run_facts
from exactness.workbook.manifest import Manifest, process_alive
from exactness.workbook.project import KERNEL_NAME, Project, keep_state_inside
from exactness.workbook.run_progress import RunProgress


class KernelMissingError(RuntimeError):
    pass


class ResumeError(ValueError):
    pass


@dataclass(frozen=True)
class RunResult:
    folder: Path
    manifest: Manifest

    def __bool__(self) -> bool:
        return self.manifest.status == "passed"

    @property
    def reason(self) -> str:
        m = self.manifest
        if m.status == "failed":
            cell = f" in cell [{m.failed_cell}]" if m.failed_cell is not None else ""
            return f"{m.study} failed{cell}: {m.error}"
        return f"{m.study} {m.status}"


def new_run_folder(project: Project, study: str, param_set: str) -> tuple[str, Path]:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    label = "".join(c if c.isalnum() or c in "-_+" else "_" for c in param_set)
    while True:
        run_id = f"{stamp}-{label}-{secrets.token_hex(2)}"
        folder = project.outputs / study / run_id
        try:
            folder.mkdir(parents=True, exist_ok=False)  # never reuse a folder
            return run_id, folder
        except FileExistsError:
            continue


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) during a run: `folder` is the run folder, marked interrupted, or None when the
    run had not created one yet."""

    def __init__(self, folder: Path | None):
        super().__init__(str(folder or ""))
        self.folder = folder


def ensure_kernel() -> None:
    from jupyter_client.kernelspec import KernelSpecManager

    if KERNEL_NAME not in KernelSpecManager().find_kernel_specs():
        raise KernelMissingError(
            f"Jupyter kernel {KERNEL_NAME!r} is not registered; run `make install` "
            f"(or `python -m ipykernel install --sys-prefix --name {KERNEL_NAME}`)"
        )


def execute(project: Project, study: Study, params: dict[str, Any], param_set: str, batch: str,
            environment_run: str | None = None, with_code: bool = False, log_output: bool = False) -> RunResult:
    keep_state_inside(project)
    try:
        facts = run_facts(project.root)  # seconds of subprocesses: before the folder, so Ctrl-C leaves nothing
    except KeyboardInterrupt:
        raise RunInterrupted(None) from None
    run_id, folder = new_run_folder(project, study.name, param_set)
    manifest = Manifest(study=study.name, run_id=run_id, param_set=param_set, params=params, batch=batch,
                        started=dt.datetime.now().astimezone().isoformat(timespec="seconds"),
                        environment_run=environment_run, machine=facts)
    manifest.write(folder)  # at once: a folder without a manifest would be invisible to the index and resume
    (folder / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return _execute_into(project, study, folder, manifest, with_code, log_output)


def check_resumable(study: Study, folder: Path) -> Manifest:
    """The run's manifest, or a ResumeError saying why it cannot be resumed now (checked before anything
    is printed or moved)."""
    manifest = Manifest.read(folder)
    if manifest.study != study.name:
        raise ResumeError(f"{folder} is a run of {manifest.study!r}, not of {study.name!r}")
    if manifest.status == "passed":
        raise ResumeError(f"{folder} passed; there is nothing to resume (start a new run instead)")
    if manifest.status == "running" and manifest.host not in (None, socket.gethostname()):
        raise ResumeError(f"{folder} is running on {manifest.host} (process {manifest.pid}), which this "
                          f"machine cannot check; resume it there, or stop it first")
    if manifest.status == "running" and _alive(manifest.pid):
        raise ResumeError(f"{folder} is still running (process {manifest.pid}); stop it first")
    return manifest


def resume(project: Project, study: Study, folder: Path, with_code: bool = False,
           log_output: bool = False) -> RunResult:
    """Run a failed or interrupted run again in its own folder with its own parameters; sweeps pick up
    their finished shards. The earlier attempt's notebook and report move to attempts/<n>/."""
    manifest = check_resumable(study, folder)
    manifest.status = manifest.observed_status()  # a killed attempt is recorded as "died"
    number = len(manifest.attempts) + 1
    keep = folder / "attempts" / str(number)
    try:
        keep.mkdir(parents=True, exist_ok=False)  # atomic: of two resumes started together, one gets here
    except FileExistsError:
        raise ResumeError(f"{folder} is being resumed by another process (its attempt {number} exists); "
                          "wait for it, or resume again once it has stopped") from None
    for name in (study.notebook.name, "report.html", "summary.json"):
        if (folder / name).exists():
            os.replace(folder / name, keep / name)
    manifest.attempts.append({"status": manifest.status, "started": manifest.started, "duration_s": manifest.duration_s,
                              "failed_cell": manifest.failed_cell, "error": manifest.error, "kept_in": str(
                                  keep.relative_to(folder))})
    manifest.status, manifest.failed_cell, manifest.error = "running", None, None
    manifest.started = dt.datetime.now().astimezone().isoformat(timespec="seconds")
    manifest.machine = run_facts(project.root)
    keep_state_inside(project)
    return _execute_into(project, study, folder, manifest, with_code, log_output)


_SOCKET_PATH_LIMIT = 100  # sun_path holds 107 bytes; jupyter_client appends "-<port>" to the prefix


def ipc_prefix(project: Project) -> str:
    """Where a run's kernel puts its unix sockets: in .state/ (0700), so no other local user can connect
    to a running study; under a fresh 0700 folder in /tmp when the project path is too long for a socket."""
    folder = project.state / "k"
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    prefix = str(folder / secrets.token_hex(3))
    if len(prefix) + len("-65535") > _SOCKET_PATH_LIMIT:
        import tempfile

        prefix = str(Path(tempfile.mkdtemp(prefix="exactness-")) / "k")  # mkdtemp makes it 0700
    return prefix


KERNEL_LOG = "kernel.log"


def _ipc_kernel_manager(prefix: str, log: Path):
    """A kernel manager class whose kernel listens on unix sockets (no TCP, so no "running over TCP
    without encryption" warning); nbclient takes it as `kernel_manager_class` through papermill.

    The kernel's own stdout and stderr (its logger, native libraries, its sweep workers' crashes) go to
    `log` in the run folder instead of the terminal: on Ctrl-C the kernel logs the sockets the client has
    just closed, which the user should not have to read, and a worker's crash belongs with its run."""
    from jupyter_client.manager import AsyncKernelManager
    from traitlets import Unicode

    launch = compat.kernel_launch(AsyncKernelManager)
    members = {"transport": Unicode("ipc"), "ip": Unicode(prefix)}

    async def launch_logging_to_file(self, kernel_cmd, **kw):
        with open(log, "ab") as sink:  # the kernel holds its own copy of the descriptor
            await launch(self, kernel_cmd, **{**kw, "stdout": sink, "stderr": sink})

    if launch is not None:
        members["_async_launch_kernel"] = launch_logging_to_file
    return type("IpcKernelManager", (AsyncKernelManager,), members)


@contextlib.contextmanager
def kernel_environment(variables: dict[str, str]):
    """Environment variables set while a study's kernel starts and runs, each restored (or removed) after."""
    previous = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _execute_into(project: Project, study: Study, folder: Path, manifest: Manifest, with_code: bool,
                  log_output: bool) -> RunResult:
    import papermill
    from papermill.exceptions import PapermillExecutionError

    params = manifest.params
    manifest.pid, manifest.host = os.getpid(), socket.gethostname()
    manifest.write(folder)
    executed = folder / study.notebook.name
    began = time.monotonic()
    try:
        # the kernel papermill starts inherits these: the run folder, and the study's own (see catalog)
        with kernel_environment({RUN_DIR_VARIABLE: str(folder), **study.kernel_environment}):
            papermill.execute_notebook(
                str(study.notebook), str(executed), parameters=params, kernel_name=KERNEL_NAME, cwd=str(folder),
                progress_bar=False, log_output=log_output,
                kernel_manager_class=_ipc_kernel_manager(ipc_prefix(project), folder / KERNEL_LOG),
                **({} if log_output else RunProgress().engine_arguments()),
            )
        manifest.status = "passed"
    except PapermillExecutionError as error:
        manifest.status, manifest.failed_cell = "failed", error.exec_count
        manifest.error = f"{error.ename}: {_last_line(error.evalue)}"
    except KeyboardInterrupt:
        manifest.status, manifest.error = "interrupted", "interrupted by the user (Ctrl-C)"
        raise RunInterrupted(folder) from None
    except Exception as error:  # the kernel died, the notebook could not be read, ...
        manifest.status, manifest.error = "failed", _last_line(f"{type(error).__name__}: {error}")
    finally:
        manifest.duration_s = round(time.monotonic() - began, 2)
        manifest.write(folder)
        _export_report(project, folder, executed, manifest, with_code)
        index.write(project)
    return RunResult(folder, manifest)


def _export_report(project: Project, folder: Path, executed: Path, manifest: Manifest, with_code: bool) -> None:
    if not executed.exists():  # papermill never got to write it
        return
    links = {"notebook": executed.name, "parameters": "params.yaml", "manifest": "manifest.json",
             "all runs": os.path.relpath(project.outputs / "index.html", folder)}
    if manifest.environment_run:
        links["environment of this batch"] = os.path.relpath(
            project.outputs / manifest.environment_run / "report.html", folder)
    try:
        report.export(executed, folder / "report.html", manifest, links, with_code=with_code)
    except Exception as error:  # a broken report must not hide the run's own status
        manifest.error = (manifest.error or "") + f" [report export failed: {type(error).__name__}: {error}]"
        manifest.write(folder)


def _alive(pid: int | None) -> bool:
    """Another process still runs it (this process resuming its own run does not count)."""
    return bool(pid) and pid != os.getpid() and process_alive(pid)


def _last_line(text: str) -> str:
    lines = [line for line in str(text).strip().splitlines() if line.strip()]
    return lines[-1] if lines else str(text)
