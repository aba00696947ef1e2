"""A notebook's parameters, read from its `parameters` cell, and validation of the values given for them.

The parameters cell is the single source of truth: every name it assigns is a parameter, and the type of
its default (or its annotation) is the type a value must have. Validation happens before anything runs,
so a typo never costs a run folder.

Values given with `-p` and in `-f` files parse as YAML 1.2 core, not PyYAML's YAML 1.1: a leading zero is
decimal (`010` is 10, never octal 8), `1:20` is a string (never base 60), only true/false are booleans;
aliases and duplicate keys are refused, each in one line.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
import yaml

from exactness.workbook import study_rules

_TYPE_NAMES = {"int": int, "float": float, "str": str, "bool": bool, "list": list, "dict": dict, "None": type(None)}


class ParameterError(ValueError):
    pass


@dataclass(frozen=True)
class Parameter:
    name: str
    default: Any
    types: tuple[type, ...]  # empty: any value is accepted
    help: str = ""

    def accepts(self, value: Any) -> bool:
        if not self.types:
            return True
        if isinstance(value, bool):  # bool is an int subclass; keep them apart
            return bool in self.types
        if isinstance(value, int) and float in self.types:
            return True
        return isinstance(value, self.types)

    @property
    def type_name(self) -> str:
        return " | ".join(t.__name__ if t is not type(None) else "None" for t in self.types) or "any"


def parameters_cell(notebook: Path) -> str:
    nb = nbformat.read(notebook, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code" and "parameters" in cell.get("metadata", {}).get("tags", []):
            return cell.source
    raise ParameterError(f"{notebook} has no cell tagged 'parameters'")


def read_parameters(notebook: Path) -> dict[str, Parameter]:
    source = parameters_cell(notebook)
    comments = {i + 1: line.split("#", 1)[1].strip() for i, line in enumerate(source.splitlines()) if "#" in line}
    params = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name, value_node, annotation = node.targets[0].id, node.value, None
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            name, value_node, annotation = node.target.id, node.value, node.annotation
        else:
            continue
        default = ast.literal_eval(value_node)
        types = _annotation_types(annotation) if annotation is not None else _default_types(default)
        params[name] = Parameter(name, default, types, comments.get(node.lineno, ""))
    return params


def _default_types(default: Any) -> tuple[type, ...]:
    return () if default is None else (type(default),)


def _annotation_types(annotation: ast.expr) -> tuple[type, ...]:
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        # "list or str": papermill reads an annotation of words (not `list | str`) as the parameter's type
        return tuple(t for part in annotation.value.split(" or ") for t in _annotation_types(ast.parse(
            part.strip(), mode="eval").body))
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        return _annotation_types(annotation.left) + _annotation_types(annotation.right)
    if isinstance(annotation, ast.Subscript):  # list[int], dict[str, float]: the container is checked
        return _annotation_types(annotation.value)
    name = annotation.id if isinstance(annotation, ast.Name) else getattr(annotation, "value", None)
    name = "None" if name is None else str(name)
    if name not in _TYPE_NAMES:
        raise ParameterError(f"unsupported parameter annotation {ast.unparse(annotation)!r}")
    return (_TYPE_NAMES[name],)


_TAG = "tag:yaml.org,2002:"
# YAML 1.1 forms PyYAML reads that YAML 1.2's core schema (and a reader expecting Python) does not: `010` as
# octal 8, `1:20` as base 60 (80), `yes`/`off` as booleans, `1_000`, `2026-01-01` as a date, `<<` merges.
_YAML_1_1_TAGS = {f"{_TAG}{name}" for name in ("bool", "int", "float", "timestamp", "merge", "value")}


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader reading YAML 1.2 core scalars: decimal integers, a leading zero included
    (`-p seed_start 002` is seed 2, never octal), `0x`/`0o` for hex and octal, floats as in Python and YAML
    1.2 (`1e-4` is a number), true/false only. Aliases are refused (a few hundred bytes of nested aliases
    expand to gigabytes), and duplicate keys are collected so that all of them are named."""

    yaml_implicit_resolvers = {
        first: [(tag, pattern) for tag, pattern in resolvers if tag not in _YAML_1_1_TAGS]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def __init__(self, stream):
        super().__init__(stream)
        self.duplicates: list[tuple[Any, int, int]] = []  # key, first line, repeated line (1-based)

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise _Refused(f"YAML aliases are not accepted in parameters (*{event.anchor} at "
                           f"{_position(event.start_mark)}); write the value out")
        return super().compose_node(parent, index)

    def construct_mapping(self, node, deep=False):
        first_lines: dict[Any, int] = {}
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                key, line = self.construct_object(key_node), key_node.start_mark.line + 1
                if key in first_lines:
                    self.duplicates.append((key, first_lines[key], line))
                else:
                    first_lines[key] = line
        return super().construct_mapping(node, deep)

    def construct_yaml_int(self, node):
        text = self.construct_scalar(node)
        try:
            if text[1:2] in ("x", "o") and text[:1] == "0":
                return int(text[2:], 16 if text[1] == "x" else 8)
            return int(text, 10)
        except ValueError:  # an explicit `!!int 1:20`
            raise _Refused(f"{text!r} is not a YAML 1.2 integer (at {_position(node.start_mark)})") from None

    def construct_yaml_float(self, node):
        text = self.construct_scalar(node)
        if ":" in text or "_" in text:  # an explicit `!!float 1:20.5`: base 60 is YAML 1.1 only
            raise _Refused(f"{text!r} is not a YAML 1.2 number (at {_position(node.start_mark)})")
        return super().construct_yaml_float(node)


_Loader.add_constructor(f"{_TAG}int", _Loader.construct_yaml_int)
_Loader.add_constructor(f"{_TAG}float", _Loader.construct_yaml_float)
# int before float: a resolver list is tried in order, and `10` matches both
_Loader.add_implicit_resolver(f"{_TAG}bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
_Loader.add_implicit_resolver(f"{_TAG}int", re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"),
                              list("-+0123456789"))
_Loader.add_implicit_resolver(
    f"{_TAG}float",
    re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
               r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"),
    list("-+0123456789."),
)


class _Refused(yaml.YAMLError):
    """YAML that PyYAML would read but a parameter must not hold; the message is the whole line."""


def _position(mark, single_line: bool = False) -> str:
    return f"column {mark.column + 1}" if single_line else f"line {mark.line + 1}, column {mark.column + 1}"


def _load(text: str) -> Any:
    loader = _Loader(text)
    try:
        value = loader.get_single_data()
    finally:
        loader.dispose()
    if loader.duplicates:
        named = ", ".join(f"{key!r} (lines {first} and {again})" for key, first, again in loader.duplicates)
        raise _Refused(f"duplicate keys {named}; each parameter may be given once")
    return value


def _why(error: yaml.YAMLError, single_line: bool) -> str:
    """PyYAML's reason in one line (its own message spans several and quotes the document)."""
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or next(
        (line.strip() for line in str(error).splitlines() if line.strip()), str(error))
    return problem + (f" at {_position(mark, single_line)}" if mark is not None else "")


def parse_yaml(text: str, source: str = "YAML") -> Any:
    """`text` as YAML 1.2 core; a ParameterError of one line starting with `source` when it is not."""
    try:
        return _load(text)
    except _Refused as refused:
        raise ParameterError(f"{source}: {refused}") from None
    except yaml.YAMLError as error:
        single = "\n" not in text.strip()
        raise ParameterError(f"{source}: {text!r} is not valid YAML: {_why(error, single)}" if single
                             else f"{source} is not valid YAML: {_why(error, single)}") from None


def parse_override(text: str, source: str = "-p") -> Any:
    """A `-p NAME VALUE` value parses as YAML, so `-p n_seeds 100` is an int and `-p models [a, b]` a list."""
    return parse_yaml(text, source)


# The largest parameter file read: the paper sets are about 1 KB. A file of millions of listed seeds would take
# minutes and gigabytes to parse and check before the run starts; a range (seed_start, n_seeds) says it in two.
MAX_FILE_BYTES = 1 << 20


def read_text(path: Path) -> str:
    """A parameter file's text; a ParameterError naming the file when it is too large or not UTF-8."""
    with open(path, "rb") as stream:  # at most one byte past the limit, whatever the file claims to hold
        data = stream.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        size = path.stat().st_size if path.is_file() else 0
        held = f"{size / 1e6:,.1f} MB" if size else f"more than {MAX_FILE_BYTES // 2**20} MB"
        raise ParameterError(f"{path} holds {held}; a parameter file may hold at most {MAX_FILE_BYTES // 2**20} MB "
                             "(for many seeds give seed_start and n_seeds instead of listing them)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[:error.start].count(b"\n") + 1
        raise ParameterError(f"{path} is not UTF-8 text: byte 0x{data[error.start]:02x} on line {line} (byte "
                             f"{error.start}); save it as UTF-8") from None


def load_yaml(path: Path) -> dict[str, Any]:
    text = read_text(path)
    try:
        data = _load(text) or {}
    except _Refused as refused:
        raise ParameterError(f"{path}: {refused}") from None
    except yaml.YAMLError as error:
        raise ParameterError(f"{path} is not valid YAML: {_why(error, single_line=False)}") from None
    if not isinstance(data, dict):
        raise ParameterError(f"{path} must hold a mapping of parameter names to values, not {type(data).__name__}")
    return data


def validate(spec: dict[str, Parameter], values: dict[str, Any], origin: dict[str, str] | None = None) -> None:
    """Raise one ParameterError listing every problem: unknown names, then wrong types."""
    origin = origin or {}
    problems = []
    unknown = [name for name in values if name not in spec]
    if unknown:
        problems.append(
            f"unknown parameter{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
            f"valid parameters: {', '.join(spec)}"
        )
    for name, value in values.items():
        if name in spec and (problem := _not_plain(value)):
            where = f" (from {origin[name]})" if name in origin else ""
            problems.append(f"parameter {name!r}{where}: {problem}; a value is a number, string, true/false, "
                            "null, or a list or mapping of them")
        elif name in spec and not spec[name].accepts(value):
            where = f" (from {origin[name]})" if name in origin else ""
            problems.append(
                f"parameter {name!r}{where}: expected {spec[name].type_name}, "
                f"got {type(value).__name__} {value!r}"
            )
    if problems:
        raise ParameterError("; ".join(problems))


def _not_plain(value: Any) -> str | None:
    """Why `value` is not plain data, or None. papermill writes a value it does not know (bytes, a set, a
    date) as `"{value}"` without escaping: only plain data may reach the injected parameters cell."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return None
    if isinstance(value, list):
        return next((problem for item in value if (problem := _not_plain(item))), None)
    if isinstance(value, dict):
        key = next((k for k in value if not isinstance(k, str)), None)
        if key is not None:
            return f"holds a mapping key {key!r} that is not a string"
        return next((problem for item in value.values() if (problem := _not_plain(item))), None)
    return f"holds a {type(value).__name__} value {value!r}"


def check(notebook: Path, given: dict[str, Any], origin: dict[str, str]) -> dict[str, Any]:
    """`given` checked by name and type against the notebook and by value against the study's rules; the
    notebook's defaults completed by it. Every source of values goes through here (`-f`, `-p`, and a
    resumed run's manifest, which may come from someone else's run folder)."""
    spec = read_parameters(notebook)
    validate(spec, given, origin)
    values = {**{name: p.default for name, p in spec.items()}, **given}
    study_rules.check(notebook.stem, values, origin)
    return values


def resolve(notebook: Path, files: list[Path], overrides: list[tuple[str, str]]) -> dict[str, Any]:
    """Defaults from the notebook, then each file, then each `-p` override: later ones win. Names and types
    are checked against the notebook, then values against the study's declared ranges and choices."""
    given, origin = {}, {}
    for path in files:
        for name, value in load_yaml(path).items():
            given[name], origin[name] = value, str(path)
    for name, text in overrides:
        given[name], origin[name] = parse_override(text, f"-p {name}"), "-p"
    return check(notebook, given, origin)
