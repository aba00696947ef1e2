"""What a model name in a study's parameters means, decided without importing torch, a checkout or a user's code.

A name is one of:
- a class of the built-in registry (`exactness.models.class_registry`, or a study's own list of names);
- a class in a transformers checkout's model testers, with `transformers_tests` the checkout's root;
- your own builder, `package.module:function` or `/absolute/path/file.py:function`, where `function(seed)`
  returns `(model, inputs)`;
- `skipped` (a study that audits the checkout's skips): every class in its export test's comparison scopes.

The command line checks each name's form here before anything is created; `cross_problems` checks a list of names
against the checkout given beside it. Building a named model is `exactness.models.sources`'s job.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from exactness.models import checkout_index

SKIPPED = "skipped"
# `-p fallback`: what builds a class a given checkout's testers cannot: nothing (the class is one line saying why),
# or the built-in registry
FALLBACKS = ("none", "registry")
_DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


class Kind(Enum):
    REGISTRY = "registry"
    CHECKOUT = "transformers checkout"
    BUILDER = "your builder"
    SKIPPED = "the checkout's comparison skips"


@dataclass(frozen=True)
class BuilderName:
    """`target:function`: `target` a dotted module or an absolute path to a .py file."""

    target: str
    function: str

    @property
    def is_file(self) -> bool:
        return self.target.endswith(".py")


def builder(name: str) -> BuilderName | None:
    """The builder a name names, or None when it has no `:` (a class name)."""
    if ":" not in name:
        return None
    target, _, function = name.rpartition(":")
    return BuilderName(target, function)


def builder_problem(name: str) -> str | None:
    """What is wrong with a builder's name, found without running anything: its form, the file (absolute, there,
    defining the function at its top level) or the module's top-level package (installed or on the path)."""
    spec = builder(name)
    form = "package.module:function or /absolute/path/file.py:function"
    if spec is None or not spec.target or not spec.function.isidentifier():
        return f"names a builder {name!r} not of the form {form}"
    if spec.is_file:
        path = Path(spec.target)
        if not path.is_absolute():
            return (f"names a builder file {spec.target!r} by a relative path: give it absolute (the notebook runs in "
                    f"its run folder), e.g. {str(Path.cwd() / spec.target)}:{spec.function}")
        if not path.is_file():
            return f"names a builder file {spec.target} that does not exist"
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        except SyntaxError as error:
            return f"names a builder file {spec.target} that does not parse (line {error.lineno}: {error.msg})"
        if spec.function not in _top_level_names(tree):
            return f"names {spec.function!r}, which {spec.target} does not define at its top level"
        return None
    if not _DOTTED.fullmatch(spec.target):
        return f"names a builder {name!r} not of the form {form}"
    top = spec.target.split(".")[0]
    if importlib.util.find_spec(top) is None:
        return (f"names a builder module {spec.target!r} whose package {top!r} is not importable here: install it "
                "in the workbook's environment or put its folder on PYTHONPATH")
    return None


def _top_level_names(tree: ast.Module) -> set[str]:
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.ImportFrom, ast.Import)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def kind(name: str, registry: tuple[str, ...], checkout: str = "") -> Kind:
    """Where a name comes from. A class found in the given checkout comes from its tester even when the registry
    has it too: the checkout is the one the user pointed at."""
    if name == SKIPPED:
        return Kind.SKIPPED
    if builder(name) is not None:
        return Kind.BUILDER
    if checkout and not checkout_index.checkout_problem(checkout):
        if checkout_index.has_class(checkout_index.root_of(checkout), name):
            return Kind.CHECKOUT
    return Kind.REGISTRY


@dataclass(frozen=True)
class ModelName:
    """A parameter rule: a registered name, a class name (checked against the checkout by `cross_problems`), a
    builder, or, where `audit` allows it, `skipped`. The message says the three ways to name a model."""

    registry: tuple[str, ...]
    noun: str = "model"
    audit: bool = False
    checkout_classes: bool = True  # a study taking `transformers_tests`: any class name, checked against it later

    def problem(self, value: Any) -> str | None:
        if not isinstance(value, str):
            return f"names a {self.noun} by a {type(value).__name__} {value!r}, not a string"
        if value in self.registry or (self.audit and value == SKIPPED):
            return None
        if builder(value) is not None:
            return builder_problem(value)
        if value.isidentifier() and self.checkout_classes:
            return None
        checkout = " a class of a transformers checkout's testers (with -p transformers_tests PATH)," if \
            self.checkout_classes else ""
        return (f"names no {self.noun} {value!r}: use a registered one ({', '.join(self.registry)}),{checkout} or "
                "your own builder, package.module:function or /absolute/path/file.py:function")

    def canonical(self, value: Any) -> Any:
        """What names the same model twice: a builder file by its resolved path (`sub/../good.py`, a link)."""
        named = builder(value) if isinstance(value, str) else None
        if named is None or not named.is_file:
            return value
        return f"{Path(named.target).resolve()}:{named.function}"

    def code(self, value: Any) -> list[str]:
        """The code a run would execute for this value: a builder's name, else nothing."""
        return [value] if isinstance(value, str) and builder(value) is not None else []


def as_list(models: Any) -> list:
    """`models` as a list: the word `skipped` alone is the list holding it."""
    return [models] if isinstance(models, str) else list(models)


@dataclass(frozen=True)
class CheckoutRoot:
    """A parameter rule: "" (no checkout) or the absolute root of a transformers source tree."""

    def problem(self, value: Any) -> str | None:
        if value == "":
            return None
        if not isinstance(value, str):
            return f"must be a path, got {value!r}"
        return checkout_index.checkout_problem(value)

    def code(self, value: Any) -> list[str]:
        """A checkout's testers are code a run imports."""
        return [value] if isinstance(value, str) and value.strip() else []


def cross_problems(models: list, registry: tuple[str, ...], checkout: str, audit: bool = False) -> list[str]:
    """What the names say about the checkout beside them: a class outside the registry needs a checkout whose
    testers have it; `skipped` needs a checkout whose export test lists comparison skips."""
    problems = []
    usable = bool(checkout) and not checkout_index.checkout_problem(checkout)
    root = checkout_index.root_of(checkout) if usable else None
    for name in models:
        if not isinstance(name, str) or builder(name) is not None or not (name.isidentifier() or name == SKIPPED):
            continue  # the per-name rule's message
        if name == SKIPPED and audit:
            if root is None:
                problems.append("models names skipped, which audits a checkout's export-test skips: give the checkout "
                                "with -p transformers_tests PATH")
                continue
            try:
                if not checkout_index.comparison_skips(root):
                    problems.append(f"models names skipped, but {root / checkout_index.EXPORT_TEST} lists no class in "
                                    "a scope that drops the value comparison (exactness, onnx.exactness, ...)")
            except checkout_index.CheckoutError as error:
                problems.append(f"models names skipped: {error}")
            continue
        if root is not None and checkout_index.has_class(root, name):
            continue
        if name in registry:
            continue
        testers = f"{root / checkout_index.MODELS}/*/test_modeling_*.py" if root is not None else ""
        where = (f"in the registry nor in any all_model_classes of {testers}" if root is not None else
                 f"registered ({', '.join(registry)}), and no transformers checkout is given "
                 "(-p transformers_tests PATH builds any class its testers have)")
        problems.append(f"models names an unknown class {name!r}: not {where}; to add a class to the registry, add a "
                        "Subject (config class and values, input draws in the tester's order, the tester file and "
                        "commit it was read from) to SUBJECTS in lib/exactness/models/class_registry.py")
    return problems


def expand(models: list[str], checkout: str) -> list[str]:
    """The names a run builds: `skipped` replaced by the checkout's comparison-skipped classes (file order), each
    name once."""
    out: list[str] = []
    for name in as_list(models):
        names = ([s.model for s in checkout_index.comparison_skips(checkout_index.root_of(checkout))]
                 if name == SKIPPED else [name])
        out += [n for n in names if n not in out]
    return out
