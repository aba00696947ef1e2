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
import re
import secrets
import shutil
import socket
import stat
import tempfile
import time
from collections.abc import Collection, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from exactness import compat
from exactness.workbook import index, report
from exactness.workbook.artifacts import KERNEL_LOG, RUN_DIR_VARIABLE
from exactness.workbook.catalog import Study
from exactness.workbook.machine import run_facts
from exactness.workbook.manifest import (
    INTERRUPTED_BY_USER,
    OUTPUT_CLOSED,
    WRITE_ERRNOS,
    CodeVersion,
    Manifest,
    WriteError,
    now,
    process_start,
    run_process_alive,
    write_atomically,
)
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
    write_error: WriteError | None = None  # a file of the run folder could not be written: the disk, not the study
    index_error: WriteError | None = None  # the index could not be rebuilt after the run

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
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S")  # UTC, as the manifest's times
    label = "".join(c if c.isalnum() or c in "-_+" else "_" for c in param_set)
    while True:
        run_id = f"{stamp}-{label}-{secrets.token_hex(2)}"
        folder = project.outputs / study / run_id
        try:
            folder.mkdir(parents=True, exist_ok=False)  # never reuse a folder
            return run_id, folder
        except FileExistsError:
            continue
        except OSError as error:  # a full or read-only disk: named, as any other write of a run
            raise WriteError(folder, error) from error


# A few KB kept free in every running run's folder: when the disk fills, deleting it makes room to record
# the run as failed, so a full disk never leaves a run marked "running" (later "died") or "passed".
RESERVE = ".reserve-for-the-manifest"
_RESERVE_BYTES = 64 * 1024


def _reserve(folder: Path) -> None:
    write_atomically(folder / RESERVE, bytes(_RESERVE_BYTES))  # zeros written, not a sparse hole


def _write_manifest(folder: Path, manifest: Manifest) -> WriteError | None:
    """Write the manifest, using the reserve when the disk is full; the error when even that failed."""
    try:
        manifest.write(folder)
        return None
    except WriteError:
        (folder / RESERVE).unlink(missing_ok=True)
    try:
        manifest.write(folder)
        return None
    except WriteError as error:
        return error


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM, SIGHUP, a closed output pipe) during a run: `folder` is the run folder, marked
    interrupted, or None when the run had not created one yet; `why` says what stopped it."""

    def __init__(self, folder: Path | None, why: str = INTERRUPTED_BY_USER):
        super().__init__(str(folder or ""))
        self.folder, self.why = folder, why


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
        code = CodeVersion.current(named_code_digest(study.name, params))
    except KeyboardInterrupt:
        raise RunInterrupted(None) from None
    run_id, folder = new_run_folder(project, study.name, param_set)
    manifest = Manifest(study=study.name, run_id=run_id, param_set=param_set, params=params, batch=batch,
                        started=now(), environment_run=environment_run, machine=facts, code=code,
                        pid=os.getpid(), pid_started=process_start(), host=socket.gethostname())
    try:
        _reserve(folder)
        manifest.write(folder)  # at once: a folder without a manifest would be invisible to the index and resume
        write_atomically(folder / "params.yaml", yaml.safe_dump(params, sort_keys=False))
    except WriteError:
        shutil.rmtree(folder, ignore_errors=True)  # this run's own folder, made above, holding nothing yet
        raise
    return _execute_into(project, study, folder, manifest, with_code, log_output)


def check_resumable(study: Study, folder: Path, across_code_change: bool = False,
                    given: Collection[str] = ()) -> Manifest:
    """The run's manifest, or a ResumeError (a ParameterError for its parameters) saying why it cannot be
    resumed now, checked before anything is printed or moved. The folder may come from someone else: its
    parameters go through the same names, types and rules as `-p`, since they are injected into the
    notebook as code, and a value naming code to execute (a builder, a checkout's testers) is used only
    when `given` (the parameters given again on the command line) names it."""
    from exactness.workbook import parameters

    manifest = Manifest.read(folder)
    if manifest.study != study.name:
        raise ResumeError(f"{folder} is a run of {manifest.study!r}, not of {study.name!r}")
    if manifest.status == "passed":
        raise ResumeError(f"{folder} passed; there is nothing to resume (start a new run instead)")
    if manifest.status == "running" and manifest.host not in (None, socket.gethostname()):
        raise ResumeError(f"{folder} is running on {manifest.host} (process {manifest.pid}), which this "
                          f"machine cannot check; resume it there, or stop it first")
    if manifest.status == "running" and _alive(manifest.pid, manifest.pid_started):
        raise ResumeError(f"{folder} is still running (process {manifest.pid}); stop it first")
    source = folder / "manifest.json"
    try:
        parameters.check(study.notebook, manifest.params, dict.fromkeys(manifest.params, str(source)))
    except parameters.ParameterError as error:
        raise parameters.ParameterError(f"{source}: {error}") from None
    refuse_named_code(study, folder, manifest, given)
    code_change(folder, manifest, across_code_change)
    return manifest


def refuse_named_code(study: Study, folder: Path, manifest: Manifest, given: Collection[str]) -> None:
    """A ResumeError when the manifest names code to execute that the command line did not name again."""
    from exactness.workbook import study_rules

    named = study_rules.named_code(study.name, manifest.params)  # after the parameter check: the types are right
    unconfirmed = {name: code for name, code in named.items() if name not in given}
    if unconfirmed:
        listed = "; ".join(f"{name} names {', '.join(map(repr, code))}" for name, code in unconfirmed.items())
        again = " ".join(f"-p {name} ..." for name in unconfirmed)
        raise ResumeError(f"{folder / 'manifest.json'} names code to execute ({listed}); nothing read from a run "
                          f"folder is executed: give the same value again to resume with it ({again})")


def named_code_digest(study: str, params: Mapping[str, Any]) -> str | None:
    """The digest of the builders' files and checkout testers that `params` name (None: none named)."""
    from exactness.workbook import named_code, study_rules

    try:
        named = study_rules.named_code(study, params)
    except Exception:  # a value of the wrong type: the parameter check names it
        return None
    return named_code.digest(named)


def has_shards(folder: Path) -> bool:
    return any((folder / "shards").glob("*.pkl"))


def code_change(folder: Path, manifest: Manifest, across_code_change: bool) -> str | None:
    """None when the code now is the code the run's shards were computed with (or there are no shards);
    else a line saying how they differ, or a ResumeError unless `across_code_change`."""
    if not has_shards(folder):
        return None
    then = manifest.code_of_latest_attempt()
    current = CodeVersion.current(named_code_digest(manifest.study, manifest.params))
    if not current.differs_from(then):
        return None
    line = (f"{folder}'s shards were computed by {then.describe()}; the code now is {current.describe()}")
    if not across_code_change:
        raise ResumeError(f"{line}: resuming would mix results of two versions of the code; start a new run, "
                          "or pass --resume-across-code-change to continue and record both")
    return line


def resume(project: Project, study: Study, folder: Path, with_code: bool = False,
           log_output: bool = False, across_code_change: bool = False, given: Collection[str] = ()) -> RunResult:
    """Run a failed or interrupted run again in its own folder with its own parameters; sweeps pick up
    their finished shards. The earlier attempt's notebook and report move to attempts/<n>/, and each
    attempt's code is recorded: shards computed by other code are refused unless `across_code_change`."""
    manifest = check_resumable(study, folder, across_code_change, given)
    changed = code_change(folder, manifest, across_code_change) is not None
    manifest.status = manifest.observed_status()  # a killed attempt is recorded as "died"
    number = len(manifest.attempts) + 1
    keep = folder / "attempts" / str(number)
    _reserve(folder)
    try:
        keep.mkdir(parents=True, exist_ok=False)  # atomic: of two resumes started together, one gets here
    except FileExistsError:
        raise ResumeError(f"{folder} is being resumed by another process (its attempt {number} exists); "
                          "wait for it, or resume again once it has stopped") from None
    for name in (study.notebook.name, _partial(study.notebook.name), "report.html", "summary.json"):
        if (folder / name).exists():
            os.replace(folder / name, keep / name)
    manifest.attempts.append({"status": manifest.status, "started": manifest.started, "duration_s": manifest.duration_s,
                              "failed_cell": manifest.failed_cell, "error": manifest.error, "kept_in": str(
                                  keep.relative_to(folder)), "code": asdict(manifest.code_of_latest_attempt())})
    manifest.status, manifest.failed_cell, manifest.error = "running", None, None
    manifest.started = now()
    manifest.machine = run_facts(project.root)
    manifest.code = CodeVersion.current(named_code_digest(study.name, manifest.params))
    manifest.mixed_code = manifest.mixed_code or changed
    keep_state_inside(project)
    return _execute_into(project, study, folder, manifest, with_code, log_output)


_SOCKET_PATH_LIMIT = 100  # sun_path holds 107 bytes; jupyter_client appends "-<port>" to the prefix
_TMP_PREFIX = "exactness-"


def ipc_prefix(project: Project) -> str:
    """Where a run's kernel puts its unix sockets (and its connection file): a fresh 0700 folder of its own
    in .state/k/, so no other local user can connect to a running study; in /tmp when the project path is
    too long for a socket. `kernel_sockets` removes the folder when the run ends."""
    base = project.state / "k"
    base.mkdir(parents=True, exist_ok=True)
    base.chmod(0o700)
    folder = base / secrets.token_hex(3)
    if len(str(folder / "k")) + len("-65535") > _SOCKET_PATH_LIMIT:
        return str(Path(tempfile.mkdtemp(prefix=_TMP_PREFIX)) / "k")  # mkdtemp makes it 0700
    folder.mkdir(mode=0o700)
    return str(folder / "k")


@contextlib.contextmanager
def kernel_sockets(project: Project) -> Iterator[str]:
    """`ipc_prefix` for one run, its folder removed with everything in it when the run ends (sockets,
    connection file); folders that killed runs left behind are removed first."""
    remove_stale_socket_folders(project.state / "k")
    remove_stale_socket_folders(Path(tempfile.gettempdir()), _TMP_FOLDER)
    prefix = ipc_prefix(project)
    try:
        yield prefix
    finally:
        shutil.rmtree(Path(prefix).parent, ignore_errors=True)


_STALE_AFTER_S = 120.0  # a younger folder may be a run between making it and starting its kernel
_CONNECTION_FILE = "kernel.json"
_STATE_FOLDER = re.compile(r"[0-9a-f]{6}")  # ipc_prefix's names: secrets.token_hex(3)
_TMP_FOLDER = re.compile(re.escape(_TMP_PREFIX) + r"[a-z0-9_]{8}")  # tempfile.mkdtemp's


def remove_stale_socket_folders(base: Path, names: re.Pattern = _STATE_FOLDER) -> list[Path]:
    """Remove the socket folders under `base` that a killed run left: named as `ipc_prefix` names them,
    holding nothing but sockets and a connection file (so never anything else that happens to be called
    so), not touched for a while, and no socket accepting a connection (a live kernel's do). In the
    project's .state/k, stale sockets of earlier versions lying directly in it go too. Returns what went."""
    removed = []
    if not base.is_dir():
        return removed
    for entry in base.iterdir():
        try:
            info = entry.lstat()
        except OSError:
            continue
        if info.st_uid != os.getuid() or time.time() - info.st_mtime < _STALE_AFTER_S:
            continue
        if stat.S_ISDIR(info.st_mode) and names.fullmatch(entry.name) and _only_stale_sockets(entry):
            shutil.rmtree(entry, ignore_errors=True)
        elif stat.S_ISSOCK(info.st_mode) and names is _STATE_FOLDER and not _listening(entry):
            entry.unlink(missing_ok=True)
        else:
            continue
        removed.append(entry)
    return removed


def _only_stale_sockets(folder: Path) -> bool:
    for path in folder.iterdir():
        if path.is_symlink() or not (path.is_socket() or (path.name == _CONNECTION_FILE and path.is_file())):
            return False
        if _listening(path):
            return False
    return True


def _listening(path: Path) -> bool:
    """A unix socket someone accepts connections on (a socket file whose process died refuses them)."""
    if not path.is_socket():
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
            return True
        except OSError:
            return False


def _ipc_kernel_manager(prefix: str, log: Path):
    """A kernel manager class whose kernel listens on unix sockets only: its channels by jupyter_client's
    ipc transport, IOPub's pipe for forked subprocesses (TCP on 127.0.0.1 in ipykernel) through
    `compat.kernel_command_without_tcp`, so no local process can push messages into a run. Its connection
    file lies beside the sockets. nbclient takes the class as `kernel_manager_class` through papermill.

    The kernel's own stdout and stderr (its logger, native libraries, its sweep workers' crashes) go to
    `log` in the run folder instead of the terminal: on Ctrl-C the kernel logs the sockets the client has
    just closed, which the user should not have to read, and a worker's crash belongs with its run."""
    from jupyter_client.manager import AsyncKernelManager
    from traitlets import Unicode

    launch = compat.kernel_launch(AsyncKernelManager)
    members = {"transport": Unicode("ipc"), "ip": Unicode(prefix),
               "connection_file": Unicode(str(Path(prefix).parent / _CONNECTION_FILE))}

    def format_kernel_cmd(self, extra_arguments=None):
        command = AsyncKernelManager.format_kernel_cmd(self, extra_arguments)
        return compat.kernel_command_without_tcp(command, f"ipc://{prefix}-pipe")

    async def launch_logging_to_file(self, kernel_cmd, **kw):
        with open(log, "ab") as sink:  # the kernel holds its own copy of the descriptor
            await launch(self, kernel_cmd, **{**kw, "stdout": sink, "stderr": sink})

    members["format_kernel_cmd"] = format_kernel_cmd
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


def _partial(notebook_name: str) -> str:
    """Where papermill writes the executed notebook while it runs (it rewrites the file after every cell,
    in place): renamed to the notebook's own name when the run ends, so a cut notebook never has that name."""
    return f"{notebook_name}.partial.json"


def _execute_into(project: Project, study: Study, folder: Path, manifest: Manifest, with_code: bool,
                  log_output: bool) -> RunResult:
    import papermill
    from papermill.exceptions import PapermillExecutionError

    from exactness.workbook import cell_output

    params = manifest.params
    manifest.pid, manifest.pid_started, manifest.host = os.getpid(), process_start(), socket.gethostname()
    unwritten = _write_manifest(folder, manifest)
    if unwritten is not None:
        manifest.status, manifest.error = "failed", str(unwritten)
        return RunResult(folder, manifest, write_error=unwritten)
    executed = folder / study.notebook.name
    partial = folder / _partial(executed.name)
    began = time.monotonic()
    write_error = None
    try:
        # the kernel papermill starts inherits these: the run folder, and the study's own (see catalog)
        with kernel_environment({RUN_DIR_VARIABLE: str(folder), **study.kernel_environment}), \
                kernel_sockets(project) as prefix:
            papermill.execute_notebook(
                str(study.notebook), str(partial), parameters=params, kernel_name=KERNEL_NAME, cwd=str(folder),
                progress_bar=False, log_output=log_output,
                kernel_manager_class=_ipc_kernel_manager(prefix, folder / KERNEL_LOG),
                engine_name=cell_output.ENGINE, overflow=folder / KERNEL_LOG,  # a cell's output capped
                **({} if log_output else RunProgress().engine_arguments()),
            )
        manifest.status = "passed"  # so far: the report must be complete too (_finish)
    except PapermillExecutionError as error:
        manifest.status, manifest.failed_cell = "failed", error.exec_count
        manifest.error = f"{error.ename}: {_last_line(error.evalue)}"
    except KeyboardInterrupt as interruption:
        why = getattr(interruption, "why", INTERRUPTED_BY_USER)
        manifest.status, manifest.error = "interrupted", why
        raise RunInterrupted(folder, why) from None
    except BrokenPipeError:  # the progress lines' reader went away: nothing is wrong with the study
        manifest.status, manifest.error = "interrupted", OUTPUT_CLOSED
        raise RunInterrupted(folder, OUTPUT_CLOSED) from None
    except Exception as error:  # the kernel died, the notebook could not be read or written, ...
        if isinstance(error, OSError) and error.errno in WRITE_ERRNOS:
            # the file the error names (the kernel's socket folder, say), else papermill writing the notebook
            named = Path(os.fsdecode(error.filename)) if error.filename else partial
            write_error = error if isinstance(error, WriteError) else WriteError(
                executed if named == partial else named, error)
            partial.unlink(missing_ok=True)  # cut where the disk filled: not a notebook
            manifest.status, manifest.error = "failed", str(write_error)
        else:
            manifest.status, manifest.error = "failed", _last_line(f"{type(error).__name__}: {error}")
            manifest.failed_cell = running_cell(partial)  # a kernel that died: the cell it died in
    finally:
        manifest.duration_s = round(time.monotonic() - began, 2)
        result = _finish(project, folder, partial, executed, manifest, with_code, write_error)
    return result


def nothing_ran(folder: Path) -> str | None:
    """What a run whose every class did not run says (it answered nothing, so it did not pass); None otherwise."""
    from exactness.workbook import answers

    summary = index.read_summary(folder)
    # a class's line under another pair of sides (eager against eager) runs without the export: it does not count
    found = answers.class_lines(answers.from_summary(summary))
    missing = answers.not_run(found)
    if not found or len(missing) < len(found):
        return None
    noun = answers.Columns.from_summary(summary).subject
    first = " ".join(missing[0].proof.split())[:300]
    if len(found) == 1:
        return f"no {noun} ran: {missing[0].subject}: {first}"
    return f"no {noun} ran: none of the {len(found)} built or exported (the first, {missing[0].subject}: {first})"


def running_cell(notebook: Path) -> int | None:
    """The number of the last cell papermill started in a notebook it was writing (its execution count, else its
    place among the code cells, as the notebook shows it): where a kernel that died was. papermill marks even
    that cell "completed" as it gives up, so its start time is what tells it. None when no cell started."""
    from exactness.workbook.manifest import read_json

    try:
        started, number = None, 0
        for cell in read_json(notebook).get("cells", []):
            if cell.get("cell_type") != "code":
                continue
            number += 1
            if (cell.get("metadata", {}).get("papermill") or {}).get("start_time"):
                count = cell.get("execution_count")
                started = count if isinstance(count, int) and not isinstance(count, bool) else number
    except (OSError, ValueError, AttributeError):
        return None
    return started


def _finish(project: Project, folder: Path, partial: Path, executed: Path, manifest: Manifest, with_code: bool,
            write_error: WriteError | None) -> RunResult:
    """The executed notebook under its name, the report, then the manifest with the final status: "passed"
    only once the report is complete (the tables and summary are, or a cell failed). A file that cannot
    be written fails the run, naming it. Then the index."""
    if partial.exists():
        os.replace(partial, executed)
    if manifest.status == "passed":
        manifest.error = nothing_ran(folder)
        manifest.status = "failed" if manifest.error else "passed"
    if executed.exists():
        problem = _export_report(project, folder, executed, manifest, with_code)
        if isinstance(problem, WriteError):
            write_error = write_error or problem
        if problem is not None and manifest.status == "passed":
            manifest.status, manifest.error = "failed", str(problem)
        elif problem is not None:
            manifest.error = f"{manifest.error or ''} [{problem}]".strip()
    unwritten = _write_manifest(folder, manifest)
    if unwritten is not None:
        write_error = write_error or unwritten
        manifest.error = f"{manifest.error} [{unwritten}: it still reads as before]"
    (folder / RESERVE).unlink(missing_ok=True)
    try:
        index.write(project)
        index_error = None
    except WriteError as error:
        index_error = error
    return RunResult(folder, manifest, write_error, index_error)


def _export_report(project: Project, folder: Path, executed: Path, manifest: Manifest,
                   with_code: bool) -> WriteError | str | None:
    """Write report.html; the WriteError when it could not be written, what went wrong when it could not
    be made."""
    links = {"notebook": executed.name, "parameters": "params.yaml", "manifest": "manifest.json",
             "all runs": os.path.relpath(project.outputs / "index.html", folder)}
    environment = index.run_link(project.outputs, manifest.environment_run)
    if environment is not None:
        links["environment of this batch"] = os.path.relpath(project.outputs / environment / "report.html", folder)
    try:
        report.export(executed, folder / "report.html", manifest, links, with_code=with_code)
    except WriteError as error:
        return error
    except Exception as error:  # a broken report must not hide the run's own status
        return f"report export failed: {type(error).__name__}: {error}"
    return None


def _alive(pid: int | None, started: float | None) -> bool:
    """Another process still runs it (this process resuming its own run does not count)."""
    return bool(pid) and pid != os.getpid() and run_process_alive(pid, started)


def _last_line(text: str) -> str:
    lines = [line for line in str(text).strip().splitlines() if line.strip()]
    return lines[-1] if lines else str(text)
