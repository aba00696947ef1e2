"""manifest.json: what ran, with which parameters, where, and how it ended."""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import hashlib
import json
import os
import socket
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"
# An interrupted run's error, by what stopped it
INTERRUPTED_BY_USER = "interrupted by the user (Ctrl-C)"
# `exactness run ... | head`: the reader of the output exited. The run is cut short, not wrong.
OUTPUT_CLOSED = "interrupted: its output's reader went away (a pipe closed, as `| head` does)"
STATUSES = ("running", "passed", "failed", "interrupted")


class ManifestError(ValueError):
    """A manifest.json that does not parse into the expected types; names the path and the field."""


class WriteError(OSError):
    """A file that could not be written completely (a full disk, a quota, a read-only mount); names the file.
    The file's earlier version, if any, is left as it was and no temporary file stays behind."""

    def __init__(self, path: Path, error: OSError):
        super().__init__(error.errno, error.strerror or str(error))
        self.path = Path(path)
        self.reason = f"[Errno {error.errno}] {error.strerror}" if error.errno else str(error)

    def __str__(self) -> str:
        return f"could not write {self.path}: {self.reason}"


# What a full or read-only file system says: the errors a write of a complete file can meet.
WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO}


@contextlib.contextmanager
def atomic_output(path: Path) -> Iterator[Path]:
    """A temporary name in `path`'s folder to write to, renamed to `path` only when the block completes: a
    reader never sees half a file, a failed write (a full disk) leaves the earlier file as it was and no
    temporary behind, and two writers never rename each other's temporary away. Any OSError of the block
    becomes a WriteError naming `path`. Every file of a run folder and the index is written through here."""
    path = Path(path)
    try:
        handle, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as error:
        raise WriteError(path, error) from error
    os.close(handle)
    temporary = Path(name)
    try:
        yield temporary
        os.chmod(temporary, 0o644)  # mkstemp makes it 0600; the run folder's files are readable like any other
        os.replace(temporary, path)
    except BaseException as error:
        temporary.unlink(missing_ok=True)
        if isinstance(error, OSError) and not isinstance(error, WriteError):
            raise WriteError(path, error) from error
        raise


def write_atomically(path: Path, data: str | bytes) -> None:
    with atomic_output(path) as temporary:
        _fill(temporary, data.encode() if isinstance(data, str) else data)


def _fill(path: Path, data: bytes) -> None:
    with open(path, "wb") as stream:
        stream.write(data)


# The deepest nesting a manifest, summary or record of this workbook has is a few levels; what reads one
# (the index, `show`, the answers) walks it recursively, so a crafted file nested hundreds deep stops there.
MAX_JSON_DEPTH = 64


def read_json(path: Path) -> Any:
    """A JSON file's value; a ValueError saying what is wrong when it is not UTF-8, not JSON, or nested deeper
    than MAX_JSON_DEPTH (a crafted file must never stop a command with a RecursionError)."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError(f"nested deeper than the {sys.getrecursionlimit():,} levels a JSON parser follows") \
            from None
    if _depth(value) > MAX_JSON_DEPTH:
        raise ValueError(f"nested more than {MAX_JSON_DEPTH} levels deep")
    return value


def _depth(value: Any) -> int:
    """How deeply lists and objects nest in `value`, found without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, level)
            stack += [(child, level + 1) for child in (item.values() if isinstance(item, dict) else item)]
    return deepest


def now() -> str:
    """The time a manifest records: UTC with its offset (`...+00:00`), so that runs started under different
    time zones (a laptop, a cluster node, `TZ=...`) order by the instant, not by their local clocks."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def instant(text: str) -> dt.datetime:
    """A recorded time as an aware datetime. A time without an offset (written by earlier versions, in the
    writer's local time) is read as this machine's local time: the best guess left. Unparseable or empty:
    the earliest instant, so such runs sort last among the newest-first."""
    try:
        moment = dt.datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return dt.datetime.min.replace(tzinfo=dt.UTC)
    return moment if moment.tzinfo is not None else moment.astimezone()


_LIBRARY = Path(__file__).resolve().parents[1]  # the exactness package


@dataclass(frozen=True)
class CodeVersion:
    """The code a run attempt ran: the project's commit and whether its tree had local changes, and a
    digest of the library's source, which tells two dirty trees apart where the commit cannot."""

    git_commit: str | None
    git_dirty: bool | None
    library_sha256: str | None
    named_code_sha256: str | None = None  # the builders' files and checkout testers the parameters name

    @classmethod
    def current(cls, named_code_sha256: str | None = None) -> CodeVersion:
        """The code this process runs: the checkout holding the package (not the project's notebooks), and the
        digest of the code the run's parameters name (`named_code.digest`)."""
        from exactness.workbook.machine import git_state

        git = git_state(_LIBRARY.parents[1])
        return cls(git["git_commit"], git["git_dirty"], library_digest(), named_code_sha256)

    @classmethod
    def from_json(cls, data: Any, where: str) -> CodeVersion:
        if not isinstance(data, dict):
            raise ManifestError(f"{where} is {type(data).__name__}, not an object")
        types = {"git_commit": str, "git_dirty": bool, "library_sha256": str, "named_code_sha256": str}
        for name, kind in types.items():
            if data.get(name) is not None and not isinstance(data[name], kind):
                raise ManifestError(f"{where}: field {name!r} is {data[name]!r}, expected {kind.__name__} or null")
        return cls(data.get("git_commit"), data.get("git_dirty"), data.get("library_sha256"),
                   data.get("named_code_sha256"))

    def describe(self) -> str:
        commit = f"commit {self.git_commit[:12]}" if self.git_commit else "no git commit"
        dirty = " with local changes" if self.git_dirty else ""
        library = f", library {self.library_sha256[:12]}" if self.library_sha256 else ""
        named = f", your models' code {self.named_code_sha256[:12]}" if self.named_code_sha256 else ""
        return commit + dirty + library + named

    def differs_from(self, other: CodeVersion) -> bool:
        """Whether results of `other` may differ from ours: the code the parameters name (builders, a checkout's
        testers) by its digest; the library by its digest when both have one, else by the commit, and a tree
        with local changes never counts as the same."""
        if self.named_code_sha256 != other.named_code_sha256:
            return True
        if self.library_sha256 and other.library_sha256:
            return self.library_sha256 != other.library_sha256
        return (self.git_commit != other.git_commit or self.git_commit is None
                or bool(self.git_dirty) or bool(other.git_dirty))


def library_digest() -> str:
    """sha256 over the path and bytes of every .py file of the exactness package: what a sweep's chunks ran."""
    digest = hashlib.sha256()
    for path in sorted(_LIBRARY.rglob("*.py")):
        if "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(_LIBRARY)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def process_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True


def process_start(pid: int | None = None) -> float | None:
    """When a process started (seconds since the epoch; this process when None): a pid with its start time
    names one process, where a pid alone may name a later process that reused it."""
    import psutil

    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


_START_TOLERANCE_S = 1.0  # create_time is derived from the boot time and clock ticks


def run_process_alive(pid: int, started: float | None) -> bool:
    """Whether the process that ran a run is still running: the pid alive and, with its recorded start time,
    started then (a reused pid is another process); without one (a manifest of an earlier version), a
    process whose command line runs exactness."""
    import psutil

    if pid == os.getpid():
        return True
    try:
        process = psutil.Process(pid)
        if started is not None:
            return abs(process.create_time() - started) < _START_TOLERANCE_S
        return _runs_exactness(process.cmdline())
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:  # it exists, under another user: cannot tell, so it may be the run
        return True


def _runs_exactness(command: list[str]) -> bool:
    """`exactness ...` or `python -m exactness ...`: what runs a run from the command line."""
    return any(Path(part).name == "exactness" for part in command[:2]) or any(
        flag == "-m" and module == "exactness" for flag, module in zip(command, command[1:], strict=False))


# The JSON types each field must have (bool is excluded from numbers explicitly below).
_REQUIRED = ("study", "run_id", "param_set", "params", "batch")
_TYPES = {"study": (str,), "run_id": (str,), "param_set": (str,), "params": (dict,), "batch": (str,),
          "status": (str,), "started": (str,), "duration_s": (int, float, type(None)),
          "failed_cell": (int, type(None)), "error": (str, type(None)), "environment_run": (str, type(None)),
          "machine": (dict,), "attempts": (list,), "pid": (int, type(None)),
          "pid_started": (int, float, type(None)), "host": (str, type(None)),
          "code": (dict, type(None)), "mixed_code": (bool,)}


def _type_problem(data) -> str | None:
    if not isinstance(data, dict):
        return f"the manifest is {type(data).__name__}, not an object"
    missing = [name for name in _REQUIRED if name not in data]
    if missing:
        return f"field(s) {', '.join(missing)} missing"
    for name, types in _TYPES.items():
        if name in data and (not isinstance(data[name], types) or (isinstance(data[name], bool)
                                                                    and bool not in types)):
            expected = " or ".join("null" if t is type(None) else t.__name__ for t in types)
            return f"field {name!r} is {type(data[name]).__name__} {data[name]!r}, expected {expected}"
    if data.get("status", "running") not in STATUSES:
        return f"field 'status' is {data['status']!r}, expected one of {', '.join(STATUSES)}"
    if data.get("pid") is not None and not 0 < data["pid"] < 2**31:  # a process id, which os.kill can take
        return f"field 'pid' is {data['pid']!r}, not a process id"
    if data.get("started"):
        try:
            dt.datetime.fromisoformat(data["started"])
        except ValueError:
            return f"field 'started' is {data['started']!r}, not an ISO date and time"
    return None


@dataclass
class Manifest:
    study: str
    run_id: str
    param_set: str
    params: dict[str, Any]
    batch: str
    status: str = "running"
    started: str = ""
    duration_s: float | None = None
    failed_cell: int | None = None
    error: str | None = None
    environment_run: str | None = None  # run folder of the batch's environment study, relative to outputs/
    machine: dict[str, Any] = field(default_factory=dict)
    attempts: list[dict[str, Any]] = field(default_factory=list)  # earlier attempts of a resumed run
    pid: int | None = None  # the process running it (a killed run stays "running": resume checks this)
    pid_started: float | None = None  # when that process started: a pid reused by another process is not it
    host: str | None = None  # where that process runs: a pid means nothing on another machine
    code: CodeVersion | None = None  # the code of the latest attempt (each earlier one's is in `attempts`)
    mixed_code: bool = False  # resumed with other code than its shards' (--resume-across-code-change)

    def started_at(self) -> dt.datetime:
        """When the latest attempt started, as an instant: the order of "newest" (index, `show`, "latest")."""
        return instant(self.started)

    def code_of_latest_attempt(self) -> CodeVersion:
        """The code the latest attempt ran; for a manifest written before `code` was recorded, its commit."""
        if self.code is not None:
            return self.code
        return CodeVersion(self.machine.get("git_commit"), self.machine.get("git_dirty"), None)

    def observed_status(self) -> str:
        """The status as written, except that a "running" run whose process is gone from this machine
        "died" (SIGKILL, power loss: nothing got to write the end). A pid on another host cannot be
        checked, so that run stays "running"."""
        if self.status != "running" or not self.pid or self.host != socket.gethostname():
            return self.status
        return "running" if run_process_alive(self.pid, self.pid_started) else "died"

    def write(self, folder: Path) -> None:
        write_atomically(folder / MANIFEST, json.dumps(asdict(self), indent=2, default=str) + "\n")

    @classmethod
    def read(cls, folder: Path) -> Manifest:
        """The manifest in `folder`; ManifestError (naming the path and the field) when it is not JSON or
        a field has the wrong type, so no caller ever trips over another run's damaged folder."""
        path = folder / MANIFEST
        try:
            data = read_json(path)
        except ValueError as error:  # also UnicodeDecodeError  # JSONDecodeError is a ValueError
            raise ManifestError(f"{path} is unreadable: not JSON ({error})") from error
        problem = _type_problem(data)
        if problem:
            raise ManifestError(f"{path} is unreadable: {problem}")
        names = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in names}
        if values.get("code") is not None:
            values["code"] = CodeVersion.from_json(values["code"], f"{path} field 'code'")
        return cls(**values)
