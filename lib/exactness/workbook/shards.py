"""Finished chunks of a sweep kept on disk, one file per chunk, so that an interrupted run resumes.

A shard is named by the sweep's label and the chunk's first and last item and size, so a resumed sweep
finds exactly the chunks it would compute again. A shard appears whole or not at all (written to a
temporary name, then renamed): a process killed while writing leaves nothing half-read. The store lives
inside one run folder, whose parameters never change, so a shard can never belong to other parameters.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import re
from collections.abc import Sequence
from pathlib import Path


class ShardStore:
    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)

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
            if header != _header(key, payload):
                raise ValueError("its checksum or chunk name does not match (damaged, or written by another "
                                 "version of exactness)")
            return pickle.loads(payload)
        except Exception as error:  # a checked payload that still fails to unpickle: a changed class, say
            raise ShardError(f"shard {path} cannot be read ({type(error).__name__}: {error}); "
                             "delete it to compute that chunk again") from error

    def save(self, key: str, result) -> Path:
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self._path(key)
        partial = path.with_suffix(f".partial-{os.getpid()}")
        payload = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
        partial.write_bytes(_header(key, payload) + payload)
        os.replace(partial, path)
        return path

    def keys(self) -> list[str]:
        return sorted(p.stem for p in self.folder.glob("*.pkl")) if self.folder.exists() else []


_HEADER = 64  # sha256 of the chunk's key and payload, hex


def _header(key: str, payload: bytes) -> bytes:
    return hashlib.sha256(key.encode() + b"\0" + payload).hexdigest().encode()


def _slug(text: str) -> str:
    """Safe as one file name (items may hold '/', as in 'model/mode')."""
    return re.sub(r"[^A-Za-z0-9_.]+", "_", text).strip("_")


class ShardError(RuntimeError):
    pass
