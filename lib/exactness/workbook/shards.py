"""Finished chunks of a sweep kept on disk, one file per chunk, so that an interrupted run resumes.

A shard is named by the sweep's label and the chunk's first and last item and size, so a resumed sweep
finds exactly the chunks it would compute again. A shard appears whole or not at all (written to a
temporary name, then renamed): a process killed while writing leaves nothing half-read. The store lives
inside one run folder, whose parameters never change, so a shard can never belong to other parameters.

A shard is a pickle, and unpickling runs whatever the bytes say. A run folder may come from someone else,
so every shard carries an HMAC of its key and payload under a secret kept outside every run folder (the
project's `.state/shard.key`, 0600): only a shard this project wrote is ever unpickled. Anyone can
recompute a plain checksum; nobody without the key can forge this one.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import pickle
import re
from collections.abc import Sequence
from pathlib import Path

from exactness import local_secret
from exactness.workbook.manifest import write_atomically


class ShardStore:
    def __init__(self, folder: str | os.PathLike, key: bytes | None = None):
        """`key`: the secret that authenticates shards; by default the project's (`project_key()`)."""
        self.folder = Path(folder)
        self._secret = key

    @property
    def secret(self) -> bytes:
        if self._secret is None:
            self._secret = project_key()
        return self._secret

    @staticmethod
    def key(label: str, part: Sequence) -> str:
        return _slug(label) + f"--{_slug(str(part[0]))}-{_slug(str(part[-1]))}-n{len(part)}"

    def _path(self, key: str) -> Path:
        return self.folder / f"{key}.pkl"

    def has(self, key: str) -> bool:
        return self._path(key).exists()

    def load(self, key: str):
        """The chunk's result, after checking that the file is the shard of `key` and that its bytes are
        the ones written: a damaged shard must never feed a resumed run wrong numbers."""
        path = self._path(key)
        try:
            data = path.read_bytes()
            header, payload = data[:_HEADER], data[_HEADER:]
            if not hmac.compare_digest(header, _header(self.secret, key, payload)):
                raise ValueError("it is not authenticated by this project's shard key, or its chunk name does "
                                 "not match (damaged, written by another project or exactness version, or "
                                 "forged); it was not unpickled")
            return pickle.loads(payload)  # noqa: S301 (authenticated above: written by this project)
        except Exception as error:  # a checked payload that still fails to unpickle: a changed class, say
            raise ShardError(f"shard {path} cannot be read ({type(error).__name__}: {error}); "
                             "delete it to compute that chunk again") from error

    def save(self, key: str, result) -> Path:
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self._path(key)
        payload = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
        write_atomically(path, _header(self.secret, key, payload) + payload)
        return path

    def keys(self) -> list[str]:
        return sorted(p.stem for p in self.folder.glob("*.pkl")) if self.folder.exists() else []


_HEADER = 64  # HMAC-SHA256 of the chunk's key and payload, hex
KEY_FILE = "shard.key"
_KEY_BYTES = 32


def _header(secret: bytes, key: str, payload: bytes) -> bytes:
    return hmac.new(secret, key.encode() + b"\0" + payload, hashlib.sha256).hexdigest().encode()


def project_key(state: Path | None = None) -> bytes:
    """The project's shard secret in `state` (default: the project's .state/), made on first use (0600).
    Outside every run folder, so a run folder copied from elsewhere carries no key its shards pass with."""
    if state is None:
        from exactness.workbook.project import Project

        state = Project.at().state
    try:
        return local_secret.read_or_make(Path(state) / KEY_FILE, _KEY_BYTES)
    except local_secret.SecretError as error:
        raise ShardError(f"shard {error}") from None


def _slug(text: str) -> str:
    """Safe as one file name (items may hold '/', as in 'model/mode')."""
    return re.sub(r"[^A-Za-z0-9_.]+", "_", text).strip("_")


class ShardError(RuntimeError):
    pass
