"""An error kept as evidence: one line a table cell or a sentence can hold."""

from __future__ import annotations


def brief(error: BaseException, limit: int = 200) -> str:
    """`TypeName: message`, the message's whitespace collapsed to single spaces and cut at `limit` characters."""
    return f"{type(error).__name__}: {' '.join(str(error).split())[:limit]}"
