"""A notebook's parameters, read from its `parameters` cell, and validation of the values given for them.

The parameters cell is the single source of truth: every name it assigns is a parameter, and the type of
its default (or its annotation) is the type a value must have. Validation happens before anything runs,
so a typo never costs a run folder.
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
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        return _annotation_types(annotation.left) + _annotation_types(annotation.right)
    if isinstance(annotation, ast.Subscript):  # list[int], dict[str, float]: the container is checked
        return _annotation_types(annotation.value)
    name = annotation.id if isinstance(annotation, ast.Name) else getattr(annotation, "value", None)
    name = "None" if name is None else str(name)
    if name not in _TYPE_NAMES:
        raise ParameterError(f"unsupported parameter annotation {ast.unparse(annotation)!r}")
    return (_TYPE_NAMES[name],)


class _Loader(yaml.SafeLoader):
    """YAML 1.1 reads `1e-4` (no dot) as a string; YAML 1.2 and Python read it as a number, and so do we,
    so a threshold written as in the notebooks (`1e-4`) is a float wherever it is given."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def parse_yaml(text: str) -> Any:
    return yaml.load(text, Loader=_Loader)  # noqa: S506 (a SafeLoader subclass)


def parse_override(text: str) -> Any:
    """A `-p NAME VALUE` value parses as YAML, so `-p n_seeds 100` is an int and `-p models [a, b]` a list."""
    return parse_yaml(text)


def load_yaml(path: Path) -> dict[str, Any]:
    try:
        data = parse_yaml(path.read_text()) or {}
    except yaml.YAMLError as error:
        raise ParameterError(f"{path} is not valid YAML: {error}") from error
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
        if name in spec and not spec[name].accepts(value):
            where = f" (from {origin[name]})" if name in origin else ""
            problems.append(
                f"parameter {name!r}{where}: expected {spec[name].type_name}, "
                f"got {type(value).__name__} {value!r}"
            )
    if problems:
        raise ParameterError("; ".join(problems))


def resolve(notebook: Path, files: list[Path], overrides: list[tuple[str, str]]) -> dict[str, Any]:
    """Defaults from the notebook, then each file, then each `-p` override: later ones win. Names and types
    are checked against the notebook, then values against the study's declared ranges and choices."""
    spec = read_parameters(notebook)
    given, origin = {}, {}
    for path in files:
        for name, value in load_yaml(path).items():
            given[name], origin[name] = value, str(path)
    for name, text in overrides:
        given[name], origin[name] = parse_override(text), "-p"
    validate(spec, given, origin)
    values = {**{name: p.default for name, p in spec.items()}, **given}
    study_rules.check(notebook.stem, values, origin)
    return values
