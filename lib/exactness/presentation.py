"""Small helpers for notebook answers: a sentence rendered as Markdown, a dict shown as a table."""

from __future__ import annotations

import pandas as pd


def say(text: str) -> None:
    """Show one computed sentence under a table or plot (Markdown in Jupyter, plain text elsewhere)."""
    try:
        from IPython.display import Markdown, display

        display(Markdown(text))
    except ImportError:
        print(text)


def facts_table(facts: dict, key: str = "fact", value: str = "value") -> pd.DataFrame:
    rows = [(k, ", ".join(map(str, v)) if isinstance(v, (list, tuple)) else v) for k, v in facts.items()]
    return pd.DataFrame(rows, columns=[key, value]).astype({value: str})
