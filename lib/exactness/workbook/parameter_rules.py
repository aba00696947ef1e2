"""Ranges and choices a parameter's value must respect, beyond its type.

The notebook's parameters cell says which names exist and their types; a study's rules (declared in
`exactness.workbook.study_rules`) say which values make sense: a count of seeds is at least one, a threshold is a
positive finite number, a model is one of the registered ones, a list of models has no repeats. They are
checked by the command line before any run folder exists, and by a notebook's first cell when it runs
interactively, so a bad value costs one line, not a failed run.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class AtLeast:
    """A finite number no smaller than `minimum` and, when given, no larger than `maximum`; a whole number
    when `whole` (a seed or a count: 1.5 would be silently truncated further down)."""

    minimum: float
    meaning: str = ""  # what the smallest value means, when it is special (workers 0: one per core)
    maximum: float | None = None
    whole: bool = False
    why_maximum: str = ""

    def problem(self, value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return f"must be a finite number, got {value!r}"
        if self.whole and not isinstance(value, int):
            return f"must be a whole number, got {value!r}"
        if value < self.minimum:
            note = f" ({self.meaning})" if self.meaning else ""
            return f"must be at least {self.minimum:g}{note}, got {value!r}"
        if self.maximum is not None and value > self.maximum:
            note = f" ({self.why_maximum})" if self.why_maximum else ""
            return f"must be at most {self.maximum:g}{note}, got {value!r}"
        return None


@dataclass(frozen=True)
class Positive:
    """A finite number greater than zero (a threshold, a length in seconds)."""

    def problem(self, value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"must be a positive number, got {value!r}"
        if not (math.isfinite(value) and value > 0):
            return f"must be positive and finite, got {value!r}"
        return None


@dataclass(frozen=True)
class OneOf:
    """One of a fixed set of names; the message lists them all, so a typo is fixed from the message."""

    choices: tuple[str, ...]
    noun: str = "value"

    def problem(self, value: Any) -> str | None:
        if value not in self.choices:
            return f"names an unknown {self.noun} {value!r}; choose one of {', '.join(self.choices)}"
        return None


@dataclass(frozen=True)
class Matches:
    """A string matching `pattern` (a scheduler address, say), described in words for the message."""

    pattern: str
    description: str
    max_length: int = 256  # longer text is refused before any pattern or library reads it

    def problem(self, value: Any) -> str | None:
        if isinstance(value, str) and len(value) > self.max_length:
            return f"must be {self.description}, got {len(value):,} characters (at most {self.max_length})"
        if not isinstance(value, str) or not re.fullmatch(self.pattern, value):
            return f"must be {self.description}, got {value!r}"
        return None


@dataclass(frozen=True)
class Switch:
    """true or false, nothing that merely reads as one (1, "yes"): a switch such as `fast_paths`."""

    meaning: str = ""  # what false does

    def problem(self, value: Any) -> str | None:
        if not isinstance(value, bool):
            note = f" (false: {self.meaning})" if self.meaning else ""
            return f"must be true or false{note}, got {value!r}"
        return None


@dataclass(frozen=True)
class RunFolder:
    """Another study's run to read: "" (none), "latest" (the newest passed run of the same outputs), or an
    absolute path to a run folder of `study` whose `tables` are whole. A relative path would be read from the
    notebook's own run folder."""

    study: str = ""
    tables: tuple[str, ...] = ()
    columns: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (table, the columns the study reads from it)

    def problem(self, value: Any) -> str | None:
        if value in ("", "latest"):
            return None
        if not isinstance(value, str) or len(value) > 4096:
            return "must be \"\", \"latest\" or an absolute path to a run folder"
        path = Path(value)
        if not path.is_absolute():
            return f"must be \"\", \"latest\" or an absolute path to a run folder, got {value!r}"
        if not (path / "manifest.json").is_file():
            return f"names {value!r}, which is not a run folder (no manifest.json there)"
        return run_folder_problem(path, self.study, self.tables, dict(self.columns))


@dataclass(frozen=True)
class EachOf:
    """A list whose items each follow `item`; empty lists and repeated items are refused unless allowed,
    because a study counts per item: a model listed twice would be screened and counted twice."""

    item: AtLeast | Positive | OneOf
    allow_empty: bool = False
    allow_repeats: bool = False
    min_items: int = 1
    needs_one_of: tuple[str, ...] = ()  # at least one item must be one of these (what the study can measure)
    why_needed: str = ""

    # Each rule's problem reads after the parameter's name: "n_seeds must be at least 1, got 0".
    def problem(self, value: Any) -> str | None:
        if not isinstance(value, list):
            return f"must be a list, got {value!r}"
        if not value and not self.allow_empty:
            return "must not be empty"
        if value and len(value) < self.min_items:
            return f"must list at least {self.min_items} items, got {len(value)}"
        problems = [p if isinstance(self.item, OneOf) else f"item {item!r} {p}"
                    for item in value if (p := self.item.problem(item))]
        if self.needs_one_of and value and not set(value) & set(self.needs_one_of) and not problems:
            problems.append(f"must include one of {', '.join(self.needs_one_of)} ({self.why_needed})")
        repeated = _repeated(value, getattr(self.item, "canonical", None))
        if repeated and not self.allow_repeats:
            problems.append(f"lists {', '.join(map(str, repeated))} more than once")
        return "; ".join(problems) or None

    def code(self, value: Any) -> list[str]:
        if not isinstance(value, list) or not hasattr(self.item, "code"):
            return []
        return [named for item in value for named in self.item.code(item)]


Rule = AtLeast | Positive | OneOf | Matches | RunFolder | EachOf | Switch


class StudyParameterError(ValueError):
    """A value of the right type outside its study's declared range or choices."""


def _repeated(values: Iterable[Any], canonical: Callable[[Any], Any] | None = None) -> list[str]:
    """The values listed more than once, in the order of their second listing, each as first listed (and as
    listed again where it was spelled otherwise); linear in the list (a list of millions of seeds must not take
    minutes to check). `canonical`: what makes two spellings the same item (a file's resolved path)."""
    first, repeated = {}, {}
    for value in values:
        key = _key(canonical(value) if canonical else value)
        if key in first:
            again = "" if first[key] == value else f" (again as {value})"
            repeated.setdefault(key, f"{first[key]}{again}")
        else:
            first[key] = value
    return list(repeated.values())


def _key(value: Any) -> Any:
    """A hashable stand-in equal where values are (1 and 1.0 alike); a list or mapping by its repr."""
    try:
        hash(value)
        return value
    except TypeError:
        return (type(value).__name__, repr(value))


def problems(rules: Mapping[str, Rule], values: Mapping[str, Any],
             origin: Mapping[str, str] | None = None) -> list[str]:
    """Every rule broken by `values`, one message each, naming the parameter and where its value came from."""
    origin = origin or {}
    found = []
    for name, rule in rules.items():
        if name in values and (problem := rule.problem(values[name])):
            where = f" (from {origin[name]})" if name in origin else ""
            found.append(f"{name}{where} {problem}")
    return found


def named_code(rules: Mapping[str, Rule], values: Mapping[str, Any]) -> dict[str, list[str]]:
    """The values that name code a run executes (a builder, a checkout's testers), by parameter: a rule says
    so through its `code(value)`."""
    found = {}
    for name, rule in rules.items():
        if name in values and hasattr(rule, "code") and (code := rule.code(values[name])):
            found[name] = code
    return found


def run_folder_problem(path: Path, study: str, tables: tuple[str, ...],
                       columns: Mapping[str, tuple[str, ...]] | None = None) -> str | None:
    """Why a run folder cannot be read as `study`'s run with these tables whole (and holding `columns`), or
    None."""
    from exactness.workbook.manifest import read_json

    try:
        found = read_json(path / "manifest.json").get("study", "")
    except (OSError, ValueError, AttributeError):
        return f"names {str(path)!r}, whose manifest.json does not parse"
    if study and found != study:
        return f"names {str(path)!r}, a run of {found or 'an unknown study'}, not of {study}"
    for table in tables:
        try:
            import pyarrow.parquet as parquet

            names = parquet.read_schema(path / "tables" / f"{table}.parquet").names
        except (OSError, ValueError) as error:
            return f"names {str(path)!r}, whose tables/{table}.parquet cannot be read ({type(error).__name__})"
        missing = [c for c in (columns or {}).get(table, ()) if c not in names]
        if missing:
            return (f"names {str(path)!r}, whose tables/{table}.parquet lacks column(s) {', '.join(missing)} "
                    f"(a run of another version of {study or 'the study'}? give a run that has them)")
    return None
