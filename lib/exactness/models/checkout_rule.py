"""The export test's value check as a transformers checkout defines it (`_check_outputs_close` in
`tests/exporters/test_export.py`), read from that file.

Two ways, the second where the first cannot be done:
- **called**: the checkout's export test imported (its `tests` package served from the checkout by
  `exactness.models.sources`) and its own `_check_outputs_close` called on two dicts of tensors (`called`);
- **recognised**: the function's source parsed, without running it, and each of its known parts recognised: one
  `torch.testing.assert_close` over the outputs with the 5% allowance (every version), the outputs a top-k picked
  left out whenever others remain (`_SELECTED_BY_TOPK`, read as a literal), half-precision tolerances widened to
  a floor. The result is a `compare.export_rule.Rule`, judged from counts like the built-in replica, and named
  with the file and line it was read from. A part this workbook does not recognise (a newer test zeroing masked
  positions, say) is a `CheckoutError` naming the file, the line and what to do.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from exactness.compare.export_rule import BUILT_IN, Rule
from exactness.models import checkout_index
from exactness.models.checkout_index import CheckoutError

FUNCTION = "_check_outputs_close"
SELECTED = "_SELECTED_BY_TOPK"
KNOWN_PARAMETERS = frozenset({"self", "actual", "expected", "atol", "rtol", "check_device"})


class Form(Enum):
    CALLED = "imported and called"
    RECOGNISED = "read from its source"


@dataclass(frozen=True)
class CheckoutRule:
    rule: Rule
    where: str  # the file and line of the checkout's _check_outputs_close


def _function(tree: ast.Module) -> ast.FunctionDef | None:
    return next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == FUNCTION), None)


def _selected(tree: ast.Module, path: Path) -> frozenset[str]:
    """The module's `_SELECTED_BY_TOPK`: a set literal, bare or inside `frozenset(...)`."""
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else (
            node.target if isinstance(node, ast.AnnAssign) else None)
        if isinstance(target, ast.Name) and target.id == SELECTED and node.value is not None:
            value = node.value
            if isinstance(value, ast.Call) and getattr(value.func, "id", "") == "frozenset" and len(value.args) == 1:
                value = value.args[0]
            try:
                return frozenset(str(name) for name in ast.literal_eval(value))
            except ValueError:
                break
    raise CheckoutError(f"{path}: {FUNCTION} leaves out {SELECTED}, which is not a literal set of output names "
                        "here; this workbook reads it without running the file: write it as frozenset({...})")


def _half_tolerance(function: ast.FunctionDef) -> float | None:
    """The floor of `max(atol, FLOOR)` where the function widens half-precision tolerances, else None."""
    half = any(isinstance(n, ast.Attribute) and n.attr in ("bfloat16", "float16") for n in ast.walk(function))
    floors = [a.value for n in ast.walk(function) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "max"
              for a in n.args if isinstance(a, ast.Constant) and isinstance(a.value, float)]
    return floors[0] if half and floors else None


def _asserts_close_with_allowance(function: ast.FunctionDef) -> bool:
    calls = any(isinstance(n, ast.Attribute) and n.attr == "assert_close" for n in ast.walk(function))
    allowance = any(isinstance(n, ast.Constant) and n.value == 0.05 for n in ast.walk(function))
    return calls and allowance


def read(root: Path) -> CheckoutRule:
    """The checkout's rule, recognised from its export test's source."""
    path = root / checkout_index.EXPORT_TEST
    if not path.is_file():
        raise CheckoutError(f"{path} does not exist: the checkout's rule is read from its export test (copy "
                            "tests/exporters/ from transformers' repository at the checkout's version)")
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    except SyntaxError as error:
        raise CheckoutError(f"{path} does not parse (line {error.lineno}): {error.msg}") from None
    function = _function(tree)
    where = f"{path}:{function.lineno}" if function else str(path)
    if function is None:
        raise CheckoutError(f"{path} defines no {FUNCTION}: an export test without it compares values some other "
                            "way, which this workbook does not replicate; judge by the built-in replica (run "
                            "without -p transformers_tests)")
    extra = [a.arg for a in function.args.args + function.args.kwonlyargs if a.arg not in KNOWN_PARAMETERS]
    if extra or not _asserts_close_with_allowance(function):
        what = (f"it takes {', '.join(extra)} besides the outputs" if extra else
                "it is not one torch.testing.assert_close with the 5% allowance")
        raise CheckoutError(f"{where}: {FUNCTION} is not a form this workbook recognises ({what}); teach "
                            "exactness.models.checkout_rule that part, or judge by the built-in replica (run "
                            "without -p transformers_tests)")
    uses_selected = any(isinstance(n, ast.Name) and n.id == SELECTED for n in ast.walk(function))
    left_out = _selected(tree, path) if uses_selected else frozenset()
    half = _half_tolerance(function)
    parts = ["the first mismatch in sorted order forgiven under 5%"]
    if left_out:
        parts.append(f"{', '.join(sorted(left_out))} left out whenever another output remains")
    if half is not None:
        parts.append(f"half-precision tolerances raised to {half:g}")
    return CheckoutRule(Rule(f"the checkout's {FUNCTION} ({where}, {Form.RECOGNISED.value}): " + "; ".join(parts),
                             left_out, half), where)


def judging(checkout: str = "") -> tuple[Rule, str]:
    """The rule a run's classes are judged by: the checkout's own where it can be read, else the built-in replica
    with the one line that says why (no checkout: the built-in, no problem)."""
    if not checkout:
        return BUILT_IN, ""
    try:
        return read(checkout_index.root_of(checkout)).rule, ""
    except CheckoutError as error:
        return BUILT_IN, str(error)


def called(root: Path) -> Callable[[dict, dict, float, float], bool]:
    """The checkout's own `_check_outputs_close`, imported: `passes(actual, expected, atol, rtol)` is whether it
    returns rather than raising AssertionError. Any other failure is a CheckoutError naming the file."""
    from exactness.models import sources

    sources.activate(root)
    path = root / checkout_index.EXPORT_TEST
    try:
        with sources.installed_transformers_kept():
            module = importlib.import_module("tests.exporters.test_export")
    except Exception as error:  # the checkout's code: its import failure is one line
        raise CheckoutError(f"{path} does not import here ({type(error).__name__}: {str(error)[:200]}); its rule "
                            "can still be read from its source (exactness.models.checkout_rule.read)") from None
    owner = next((v for v in vars(module).values() if isinstance(v, type) and FUNCTION in vars(v)), None)
    if owner is None:
        raise CheckoutError(f"{path} defines no class with {FUNCTION}")
    case = owner.__new__(owner)

    def passes(actual: dict, expected: dict, atol: float, rtol: float) -> bool:
        try:
            getattr(case, FUNCTION)(actual, expected, atol, rtol)
        except AssertionError:
            return False
        return True

    return passes

