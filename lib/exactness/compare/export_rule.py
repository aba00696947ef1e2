"""An exact replica of the transformers export test's value check (`_check_outputs_close`).

The whole output dict goes into one `torch.testing.assert_close(actual, expected, atol, rtol)`; torch walks
the keys in sorted order and raises at the first mismatch. The test then forgives that error when the
message's "Mismatched elements: m / n" gives m / n < 5%. A scalar's message has no such line, so a scalar
gets no allowance; and when a forgiven mismatch comes first, the keys after it are never compared.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import torch

_MISMATCHED = re.compile(r"Mismatched elements: (\d+) / (\d+)")
_ITEM = re.compile(r"The failure occurred for item \[(.*?)\]")
ALLOWED_FRACTION = 0.05


@dataclass
class RuleResult:
    passed: bool
    first_mismatch: str | None = None  # the output at which assert_close stopped
    forgiven: bool = False  # the first mismatch was within the 5% allowance
    message: str = ""
    compared: list[str] = field(default_factory=list)  # outputs the rule actually looked at
    never_compared: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return self.passed


def export_test_rule(actual: dict[str, torch.Tensor], expected: dict[str, torch.Tensor],
                     atol: float = 1e-3, rtol: float = 1e-3) -> RuleResult:
    order = sorted(expected)
    try:
        torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol)
    except AssertionError as error:
        message = str(error)
        item = _ITEM.search(message)
        first = item.group(1).strip("'\"") if item else None
        stop = order.index(first) + 1 if first in order else len(order)
        compared, never = order[:stop], order[stop:]
        counts = _MISMATCHED.search(message)
        if counts and int(counts.group(1)) / int(counts.group(2)) < ALLOWED_FRACTION:
            return RuleResult(True, first, True, message, compared, never)
        return RuleResult(False, first, False, message, compared, never)
    return RuleResult(True, None, False, "", order, [])


def names_match(actual: dict, expected: dict) -> bool:
    """What the `onnx.exactness` skip still checks: the same output names on both sides."""
    return set(actual) == set(expected)
