"""A random secret kept in one file of this machine (0600), made on first use: what authenticates files that a
run reads back (shards, export-cache entries), so that a file written elsewhere, copied in or crafted is never
trusted. The file lies outside the folders it authenticates: a folder from someone else carries no key its
files pass with."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

SIZE = 32


class SecretError(ValueError):
    """A key file that holds something other than a key; names the file and what to do."""


def read_or_make(path: str | os.PathLike, size: int = SIZE) -> bytes:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        # written whole under a private name, then linked into place: a concurrent process either makes the
        # link or finds the other's complete key, never a half-written one
        temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as stream:
            stream.write(secrets.token_bytes(size))
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass
        finally:
            temporary.unlink()
    secret = path.read_bytes()
    if len(secret) != size:
        raise SecretError(f"key {path} holds {len(secret)} bytes, expected {size}; delete it (what it "
                          "authenticated will then be refused and computed again)")
    return secret
