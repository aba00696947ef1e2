"""The answers of a run as a change to a checkout's export test (`tests/exporters/test_export.py`), written as a
unified diff that `git apply` (or `patch -p1`) takes from the checkout's root.

Two edits, located in the file's syntax tree and made on its lines (the rest of the file is left as it is):
- **remove the skip**: the class's entries in every scope of `EXPORT_SKIPS` that drops the value comparison;
- **leave outputs out**: the outputs added to the test's `_SELECTED_BY_TOPK` (the outputs its
  `_check_outputs_close` leaves out whenever others remain), each with the proof as its comment, and the class's
  skip removed. A test without that set cannot leave one output out: its skip stays, and a note says so.
The proof of each change heads the patch (text before a diff is ignored by `git apply`).
"""

from __future__ import annotations

import ast
import difflib
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from exactness.models import checkout_index, checkout_rule
from exactness.models.checkout_index import CheckoutError


class Edit(Enum):
    REMOVE_SKIP = "remove the skip"
    LEAVE_OUT = "leave outputs out"


@dataclass(frozen=True)
class Change:
    model: str
    edit: Edit
    reason: str  # the proof, one line
    outputs: tuple[str, ...] = ()


@dataclass
class Patch:
    diff: str  # "" when nothing changes
    applied: str  # the file's text with the changes
    notes: list[str] = field(default_factory=list)  # changes that could not be made, and why
    made: list[Change] = field(default_factory=list)  # the changes the diff makes (the rest are in `notes`)

    def text(self, changes: list[Change]) -> str:
        head = [f"# exactness: {c.model}: {c.edit.value}" + (f" ({', '.join(c.outputs)})" if c.outputs else "")
                + f": {c.reason}" for c in changes] + [f"# not made: {n}" for n in self.notes]
        return "\n".join(head) + ("\n" + self.diff if self.diff else "\n")


def _skip_entries(tree: ast.Module, model: str) -> list[tuple[ast.expr, ast.expr]]:
    """(key, value) nodes of the class's entries in the comparison scopes of EXPORT_SKIPS."""
    found = []
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        if not (isinstance(target, ast.Name) and target.id == "EXPORT_SKIPS" and isinstance(node.value, ast.Dict)):
            continue
        scopes = {k.value: v for k, v in zip(node.value.keys, node.value.values, strict=True)
                  if isinstance(k, ast.Constant) and isinstance(v, ast.Dict)}
        for scope in checkout_index.comparison_scopes({s: {} for s in scopes}):
            entries = scopes[scope]
            found += [(k, v) for k, v in zip(entries.keys, entries.values, strict=True)
                      if isinstance(k, ast.Constant) and k.value == model]
    return found


class _Text:
    """Offsets into a file's text from the syntax tree's (line, UTF-8 byte column) positions."""

    def __init__(self, text: str):
        self.text = text
        self.lines = text.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def offset(self, line: int, column: int) -> int:
        return self.starts[line - 1] + len(self.lines[line - 1].encode("utf-8")[:column].decode("utf-8"))

    def entry_span(self, key: ast.expr, value: ast.expr) -> tuple[int, int]:
        """From the key to the value's end and its comma; the whole line where nothing else is on it."""
        start, end = self.offset(key.lineno, key.col_offset), self.offset(value.end_lineno, value.end_col_offset)
        text = self.text
        while end < len(text) and text[end] in " \t":
            end += 1
        if end < len(text) and text[end] == ",":
            end += 1
        while end < len(text) and text[end] in " \t":
            end += 1
        line_start = text.rfind("\n", 0, start) + 1
        if not text[line_start:start].strip() and (end == len(text) or text[end] == "\n"):
            return line_start, min(end + 1, len(text))
        return start, end


def _selected_set(tree: ast.Module) -> ast.Set | None:
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                getattr(node.targets[0], "id", "") == checkout_rule.SELECTED:
            value = node.value
            if isinstance(value, ast.Call) and value.args:
                value = value.args[0]
            return value if isinstance(value, ast.Set) else None
    return None


def patch(root: Path, changes: list[Change]) -> Patch:
    path = root / checkout_index.EXPORT_TEST
    if not path.is_file():
        raise CheckoutError(f"{path} does not exist: the patch is written against the checkout's export test")
    original = path.read_text(encoding="utf-8")
    tree, text = ast.parse(original, str(path)), _Text(original)
    edits: list[tuple[int, int, str]] = []  # (start, end, replacement) in the original text
    notes = []
    selected = _selected_set(tree)
    listed = {e.value for e in selected.elts if isinstance(e, ast.Constant)} if selected is not None else set()
    added = ""  # the outputs added to the set, after its last element
    made = []
    for change in changes:
        left_out = ""
        if change.edit is Edit.LEAVE_OUT:
            if selected is None or not selected.elts:
                notes.append(f"{change.model}: {path} has no {checkout_rule.SELECTED} to leave "
                             f"{', '.join(change.outputs)} out of its comparison; its skip stays")
                continue
            last = selected.elts[-1]
            indent = " " * len(text.lines[last.lineno - 1].encode("utf-8")[:last.col_offset].decode("utf-8"))
            left_out = "".join(f"\n{indent}# {change.model}: {change.reason}\n{indent}{output!r},"
                               for output in change.outputs if output not in listed)
            added += left_out
            listed |= set(change.outputs)
        entries = _skip_entries(tree, change.model)
        if not entries:
            notes.append(f"{change.model}: no comparison skip of it in {path} to remove")
        edits += [(*text.entry_span(key, value), "") for key, value in entries]
        if entries or left_out:
            made.append(change)
    if added:
        last = selected.elts[-1]
        at = text.offset(last.end_lineno, last.end_col_offset)
        after = original[at:]
        if after.lstrip().startswith(","):  # ours go after the element's own comma
            at += len(after) - len(after.lstrip()) + 1
            edits.append((at, at, added))
        else:
            edits.append((at, at, "," + added))
    applied = original
    for start, end, replacement in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        applied = applied[:start] + replacement + applied[end:]
    relative = str(checkout_index.EXPORT_TEST)
    diff = "".join(difflib.unified_diff(original.splitlines(keepends=True), applied.splitlines(keepends=True),
                                        f"a/{relative}", f"b/{relative}")) if applied != original else ""
    return Patch(diff, applied, notes, made)
