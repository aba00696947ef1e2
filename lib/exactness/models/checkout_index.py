"""What a transformers source tree holds, read as text: its model testers' classes and its export test's skips.

Nothing here imports the checkout. The command line checks a run's `models` against a checkout in a fraction of a
second, before anything is created, and the skip audit lists the classes to run from `EXPORT_SKIPS` even when the
export test itself would not import (its file is parsed, its dictionary read as a literal). Importing a tester,
which runs the checkout's code, is `exactness.models.sources`'s job, and only for a class a run names.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from pathlib import Path

COMMON = Path("tests") / "test_modeling_common.py"
MODELS = Path("tests") / "models"
EXPORT_TEST = Path("tests") / "exporters" / "test_export.py"
# The tags of an EXPORT_SKIPS scope that concern this workbook's comparison: ONNX Runtime against eager, in
# either shape mode. A scope whose last tag is "exactness" keeps the export and drops the value comparison; the
# bare "exactness" scope applies to every backend (the export test's `_should_skip_exactness`).
COMPARISON_TAG = "exactness"
OUR_TAGS = frozenset({"onnx", "static", "dynamic"})


class CheckoutError(ValueError):
    """A path that is not a transformers checkout, or a file in it this workbook cannot read; one line."""


@dataclass(frozen=True)
class Skip:
    """One class in one of the export test's comparison scopes, with its reason quoted as the file states it."""

    model: str
    scope: str
    reason: str


def checkout_problem(path: str) -> str | None:
    """Why `path` is not the root of a transformers source tree with model testers, or None."""
    root = Path(path)
    if not root.is_absolute():
        return (f"must be an absolute path (the notebook runs in its run folder, where a relative path means "
                f"something else), got {path!r}")
    if not (root / COMMON).is_file():
        return (f"names {path!r}, which is not a transformers checkout: there is no {COMMON} there (give the "
                "repository's root, the folder holding src/ and tests/)")
    if not (root / MODELS).is_dir():
        return (f"names {path!r}, whose tests/ has no models/ folder of model testers (a source distribution "
                f"carries none: put each tester at {root / MODELS}/<name>/test_modeling_<name>.py)")
    missing = [str(root / folder / "__init__.py") for folder in (Path("tests"), MODELS)
               if not (root / folder / "__init__.py").is_file()]
    if missing:
        return (f"names {path!r}, whose testers' relative imports need {' and '.join(missing)} (a source "
                f"distribution leaves them out): create them empty, e.g. touch {' '.join(missing)}")
    return None


def root_of(path: str) -> Path:
    problem = checkout_problem(path)
    if problem:
        raise CheckoutError(f"transformers_tests {problem}")
    return Path(path).resolve()


@functools.cache
def tester_files(root: Path) -> tuple[Path, ...]:
    """Every model tester, `tests/models/<x>/test_modeling_<x>.py` (and any other `test_modeling_*.py` there)."""
    return tuple(sorted((root / MODELS).glob("*/test_modeling_*.py")))


_ASSIGNMENT = re.compile(r"^\s*all_model_classes\s*(?::[^=\n]*)?=\s*", re.MULTILINE)


def _blocks(text: str) -> list[str]:
    """The right-hand sides of every `all_model_classes = ...` in a file: a parenthesised expression up to its
    closing parenthesis, else the rest of the line."""
    found = []
    for match in _ASSIGNMENT.finditer(text):
        start = match.end()
        if text[start:start + 1] != "(":
            found.append(text[start:text.find("\n", start)])
            continue
        depth = 0
        for end in range(start, len(text)):
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            if depth == 0:
                found.append(text[start:end + 1])
                break
    return found


@functools.cache
def _classes_in(path: Path) -> frozenset[str]:
    text = path.read_text(encoding="utf-8", errors="replace")
    return frozenset(name for block in _blocks(text) for name in re.findall(r"\b[A-Za-z_]\w*\b", block))


def testers_of(root: Path, model: str) -> list[Path]:
    """The tester files whose `all_model_classes` names `model`, the one named after its folder's model first."""
    found = [path for path in tester_files(root) if model in _classes_in(path)]
    lowered = model.lower()

    def named_after(path: Path) -> int:  # the longest folder name the class's name starts with comes first
        folder = path.parent.name.replace("_", "")
        return -len(folder) if lowered.startswith(folder) else 0

    return sorted(found, key=lambda p: (named_after(p), str(p)))


def has_class(root: Path, model: str) -> bool:
    return bool(testers_of(root, model))


@functools.cache
def export_skips(root: Path) -> dict[str, dict[str, str]]:
    """`EXPORT_SKIPS` from the checkout's export test, read as a literal (the file is not run)."""
    path = root / EXPORT_TEST
    if not path.is_file():
        raise CheckoutError(f"{path} does not exist: the skip audit reads EXPORT_SKIPS from the export test")
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    except SyntaxError as error:
        raise CheckoutError(f"{path} does not parse (line {error.lineno}): {error.msg}") from None
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        if isinstance(target, ast.Name) and target.id == "EXPORT_SKIPS" and node.value is not None:
            try:
                skips = ast.literal_eval(node.value)
            except ValueError:
                raise CheckoutError(f"{path}:{node.lineno}: EXPORT_SKIPS is not a literal mapping of scopes to "
                                    "{class: reason}; this workbook reads it without running the file") from None
            if not isinstance(skips, dict) or not all(isinstance(v, dict) for v in skips.values()):
                raise CheckoutError(f"{path}:{node.lineno}: EXPORT_SKIPS is not a mapping of scopes to "
                                    "{class: reason}")
            return skips
    raise CheckoutError(f"{path} has no EXPORT_SKIPS (an older export test?): the skip audit reads its scopes")


def comparison_scopes(skips: dict[str, dict[str, str]]) -> list[str]:
    """The scopes that drop ORT's value comparison: "exactness" and every "<tags>.exactness" whose other tags
    are ONNX or a shape mode ("onnx.exactness", "onnx.static.exactness", ...), in the file's order."""
    chosen = []
    for scope in skips:
        tags = scope.split(".")
        if tags[-1] == COMPARISON_TAG and set(tags[:-1]) <= OUR_TAGS:
            chosen.append(scope)
    return chosen


def comparison_skips(root: Path) -> list[Skip]:
    """Every class in a comparison scope, once (its first scope), in the file's order: the skip audit's classes."""
    skips = export_skips(root)
    found: dict[str, Skip] = {}
    for scope in comparison_scopes(skips):
        for model, reason in skips[scope].items():
            found.setdefault(model, Skip(model, scope, " ".join(str(reason).split())))
    return list(found.values())


def skip_of(root: Path, model: str) -> Skip | None:
    """The class's comparison skip in the checkout, or None (not skipped there, or no readable EXPORT_SKIPS)."""
    try:
        return next((s for s in comparison_skips(root) if s.model == model), None)
    except CheckoutError:
        return None
