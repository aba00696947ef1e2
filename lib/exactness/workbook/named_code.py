"""A digest of the code a run's parameters name beside the library: your builders' files and a transformers
checkout's testers. A resume compares it as it compares the library's: editing your model file between two
attempts changes the numbers as much as editing the library does. Found by reading files, never importing them."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from importlib.machinery import PathFinder
from pathlib import Path

from exactness.models import checkout_index, model_names


def _module_files(dotted: str) -> list[Path]:
    """The source of `package.module` found on the path without importing it: every .py file of its top-level
    package (a builder imports its siblings), or the one module's file."""
    spec = PathFinder.find_spec(dotted.split(".")[0])
    if spec is None:
        return []
    if spec.submodule_search_locations:
        return sorted(p for location in spec.submodule_search_locations for p in Path(location).rglob("*.py"))
    return [Path(spec.origin)] if spec.origin and spec.has_location else []


def _checkout_files(root: Path) -> list[Path]:
    """What a checkout's testers run: the shared test modules, the export test, every model tester."""
    tests = root / "tests"
    return sorted({*tests.glob("*.py"), *(tests / "exporters").glob("*.py"), *checkout_index.tester_files(root)})


def files_of(value: str) -> list[Path]:
    if Path(value).is_dir():
        return _checkout_files(Path(value).resolve())
    named = model_names.builder(value)
    if named is None:
        return []
    return [Path(named.target)] if named.is_file else _module_files(named.target)


def digest(named: Mapping[str, Iterable[str]]) -> str | None:
    """sha256 over the path and bytes of every file the named code consists of; None when nothing is named."""
    values = sorted({value for code in named.values() for value in code})
    if not values:
        return None
    hasher = hashlib.sha256()
    for value in values:
        hasher.update(value.encode() + b"\0")
        for path in files_of(value):
            try:
                data = path.read_bytes()
            except OSError:
                data = b"(unreadable)"
            hasher.update(str(path).encode() + b"\0" + data + b"\0")
    return hasher.hexdigest()
