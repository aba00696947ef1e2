"""manifest.json: what ran, with which parameters, where, and how it ended."""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import tempfile
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"
STATUSES = ("running", "passed", "failed", "interrupted")


class ManifestError(ValueError):
    """A manifest.json that does not parse into the expected types; names the path and the field."""


def write_atomically(path: Path, text: str) -> None:
    """Write then rename, through a temporary file unique to this writer: a reader never sees half a
    file, and two processes writing the same file at once never rename each other's temporary away."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(handle, "w") as stream:
            stream.write(text)
        os.chmod(temporary, 0o644)  # mkstemp makes it 0600; the run folder's files are readable like any other
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


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


# The JSON types each field must have (bool is excluded from numbers explicitly below).
_REQUIRED = ("study", "run_id", "param_set", "params", "batch")
_TYPES = {"study": (str,), "run_id": (str,), "param_set": (str,), "params": (dict,), "batch": (str,),
          "status": (str,), "started": (str,), "duration_s": (int, float, type(None)),
          "failed_cell": (int, type(None)), "error": (str, type(None)), "environment_run": (str, type(None)),
          "machine": (dict,), "attempts": (list,), "pid": (int, type(None)), "host": (str, type(None))}


def _type_problem(data) -> str | None:
    if not isinstance(data, dict):
        return f"the manifest is {type(data).__name__}, not an object"
    missing = [name for name in _REQUIRED if name not in data]
    if missing:
        return f"field(s) {', '.join(missing)} missing"
    for name, types in _TYPES.items():
        if name in data and (not isinstance(data[name], types) or isinstance(data[name], bool)):
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
    host: str | None = None  # where that process runs: a pid means nothing on another machine

    def observed_status(self) -> str:
        """The status as written, except that a "running" run whose process is gone from this machine
        "died" (SIGKILL, power loss: nothing got to write the end). A pid on another host cannot be
        checked, so that run stays "running"."""
        if self.status != "running" or not self.pid or self.host != socket.gethostname():
            return self.status
        return "running" if process_alive(self.pid) else "died"

    def write(self, folder: Path) -> None:
        write_atomically(folder / MANIFEST, json.dumps(asdict(self), indent=2, default=str) + "\n")

    @classmethod
    def read(cls, folder: Path) -> Manifest:
        """The manifest in `folder`; ManifestError (naming the path and the field) when it is not JSON or
        a field has the wrong type, so no caller ever trips over another run's damaged folder."""
        path = folder / MANIFEST
        try:
            data = json.loads(path.read_text())
        except (ValueError, UnicodeDecodeError) as error:  # JSONDecodeError is a ValueError
            raise ManifestError(f"{path} is unreadable: not JSON ({error})") from error
        problem = _type_problem(data)
        if problem:
            raise ManifestError(f"{path} is unreadable: {problem}")
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})
