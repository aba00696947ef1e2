"""What a reader sees of a result: computed sentences, tables for people and figures with captions.

Tables show a few named columns with 2-3 significant digits and exact counts, no index, and link to the
full table (parquet and CSV); long ones show their first rows and fold the rest away. Figures are shown
as an image with alt text and a caption that says what is plotted and what to take from it.
"""

from __future__ import annotations

import base64
import html
import math
import numbers
import re

import numpy as np
import pandas as pd

from exactness.workbook.wording import plural  # noqa: F401  (the one plural; studies import it from here too)

MAX_COLUMNS = 8
_TEXT = ' class="text"'  # left-aligned: names and words, not numbers
TABLE_STYLE = """
.exactness-table { border-collapse: collapse; font-family: sans-serif; font-size: 0.9em; margin: 4px 0; }
.exactness-table th, .exactness-table td { border-bottom: 1px solid #ddd; padding: 3px 10px; text-align: right; }
.exactness-table th { background: #f5f5f5; }
.exactness-table td.text, .exactness-table th.text { text-align: left; }
.exactness-caption { font-family: sans-serif; font-size: 0.88em; color: #444; margin: 2px 0 12px 0; }
figure.exactness-figure { margin: 8px 0 16px 0; }
figure.exactness-figure img { max-width: 100%; }
"""


def _display_html(text: str) -> None:
    try:
        from IPython.display import HTML, display

        display(HTML(text))
    except ImportError:
        print(text)


def say(text: str) -> None:
    """Show one computed sentence under a table or plot (Markdown in Jupyter, plain text elsewhere)."""
    try:
        from IPython.display import Markdown, display

        display(Markdown(text))
    except ImportError:
        print(text)


def facts_table(facts: dict, key: str = "fact", value: str = "value") -> pd.DataFrame:
    rows = [(k, ", ".join(map(str, v)) if isinstance(v, (list, tuple)) else "" if missing(v) else v)
            for k, v in facts.items()]
    return pd.DataFrame(rows, columns=[key, value]).astype({value: str})


def missing(value) -> bool:
    """None, NaN, pandas' NA and NaT: a value that is not there (lists and arrays are values)."""
    if value is None:
        return True
    if isinstance(value, (list, tuple, dict, str)) or type(value).__name__ == "ndarray":
        return False
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def cell(value, digits: int = 3, plain: bool = False) -> str:
    """One value as a person reads it: exact integers with separators (without where `plain`: a seed is a
    name, not a quantity), floats to `digits` significant digits, yes/no for booleans, lists joined; a
    missing value is an empty cell."""
    if missing(value):
        return ""
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return "yes" if value else "no"
    if isinstance(value, numbers.Integral):
        return f"{int(value)}" if plain else f"{int(value):,}"
    if plain and isinstance(value, numbers.Real) and float(value).is_integer():
        return f"{int(value)}"  # a seed column with a missing value is float
    if isinstance(value, numbers.Real):
        x = float(value)
        if x == 0 or math.isinf(x):
            return "0" if x == 0 else ("∞" if x > 0 else "−∞")
        if 1e-3 <= abs(x) < 1e5:
            decimals = max(0, digits - 1 - math.floor(math.log10(abs(x))))
            return f"{x:,.{decimals}f}"
        return f"{x:.{digits - 1}e}"
    if isinstance(value, (list, tuple)) or type(value).__name__ == "ndarray":
        return ", ".join(cell(v, digits, plain) for v in value)
    return str(value)


# A column that names seeds (one seed, not a count of seeds): its integers print without separators.
_SEED_COLUMN = re.compile(r"(^|[\s_(])seed($|[\s_)])", re.IGNORECASE)


def is_seed_column(name) -> bool:
    return bool(_SEED_COLUMN.search(str(name)))


_CODE = re.compile(r"`([^`]+)`")
_EMPHASIS = re.compile(r"(?<![\w*])\*([^*\s][^*]*?)\*(?![\w*])")


def inline_markdown(text: str) -> str:
    """Text quoted from Markdown (a skip's reason: `topk`, *tied*) as HTML: code and emphasis rendered, the rest
    escaped, so that no backtick or asterisk reaches the page."""
    escaped = html.escape(text)
    return _EMPHASIS.sub(r"<em>\1</em>", _CODE.sub(r"<code>\1</code>", escaped))


def _rows_html(frame: pd.DataFrame, digits: int, plain: list[bool], markdown: list[bool] | None = None) -> str:
    numeric = [pd.api.types.is_numeric_dtype(frame[c]) and not pd.api.types.is_bool_dtype(frame[c])
               for c in frame.columns]
    markdown = markdown or [False] * len(frame.columns)
    rows = []
    for values in frame.itertuples(index=False, name=None):
        cells = "".join(f"<td{'' if num else _TEXT}>"
                        f"{inline_markdown(cell(v, digits, seed)) if md else html.escape(cell(v, digits, seed))}</td>"
                        for v, num, seed, md in zip(values, numeric, plain, markdown, strict=True))
        rows.append(f"<tr>{cells}</tr>")
    return "".join(rows)


def _visible(shown: pd.DataFrame, max_rows: int) -> np.ndarray:
    """The rows shown before the fold: the first `max_rows`, except that a table with a "class" column shows the
    first rows of every class it lists (as many each as fit, at least one), so no class is only in the folded part."""
    keep = np.arange(len(shown)) < max_rows
    if keep.all() or "class" not in shown.columns:
        return keep
    rank = shown.groupby("class", sort=False).cumcount().to_numpy()
    keep = rank < max(1, max_rows // shown["class"].nunique())
    for i in np.flatnonzero(~keep)[: max(max_rows - int(keep.sum()), 0)]:  # fill up to max_rows, in order
        keep[i] = True
    return keep


def table_html(frame: pd.DataFrame, columns: dict[str, str] | list[str] | None = None, digits: int = 3,
               caption: str = "", full: str | None = None, max_rows: int = 12, markdown: list[str] = ()) -> str:
    """A table for people: `columns` picks (and, as a dict, renames) at most MAX_COLUMNS columns; rows past
    `max_rows` fold into a <details>; `full` names the complete table under tables/ (parquet and CSV);
    `markdown`: the columns whose text is quoted Markdown (`inline_markdown`)."""
    if columns is None:
        columns = list(frame.columns)
    names = columns if isinstance(columns, dict) else {c: c for c in columns}
    if len(names) > MAX_COLUMNS:
        raise ValueError(f"a table for people shows at most {MAX_COLUMNS} columns, got {len(names)}: {list(names)}"
                         " (the full table is one link away)")
    absent = [c for c in names if c not in frame.columns]
    if absent:
        raise KeyError(f"columns {absent} are not in the table (it has {list(frame.columns)})")
    shown = frame[list(names)].rename(columns=names)
    plain = [is_seed_column(original) or is_seed_column(name) for original, name in names.items()]
    numeric = [pd.api.types.is_numeric_dtype(shown[c]) and not pd.api.types.is_bool_dtype(shown[c])
               for c in shown.columns]
    head = "".join(f"<th{'' if num else _TEXT}>{html.escape(str(c))}</th>"
                   for c, num in zip(shown.columns, numeric, strict=True))
    md = [original in markdown for original in names]
    visible = _visible(shown, max_rows)
    first = _rows_html(shown[visible], digits, plain, md)
    body = f"<table class=\"exactness-table\"><thead><tr>{head}</tr></thead><tbody>{first}</tbody></table>"
    if not visible.all():
        rest = (f"<table class=\"exactness-table\"><thead><tr>{head}</tr></thead>"
                f"<tbody>{_rows_html(shown[~visible], digits, plain, md)}</tbody></table>")
        body += f"<details><summary>{plural(int((~visible).sum()), 'more row')}</summary>{rest}</details>"
    notes = [html.escape(caption)] if caption else []
    if full:
        notes.append(f"Full table ({plural(len(frame), 'row')}, {plural(len(frame.columns), 'column')}): "
                     f"<a href=\"tables/{html.escape(full)}.parquet\">parquet</a>, "
                     f"<a href=\"tables/{html.escape(full)}.csv\">CSV</a>.")
    caption_html = f"<p class=\"exactness-caption\">{' '.join(notes)}</p>" if notes else ""
    return f"<style>{TABLE_STYLE}</style>{body}{caption_html}"


def table(frame: pd.DataFrame, columns: dict[str, str] | list[str] | None = None, digits: int = 3,
          caption: str = "", full: str | None = None, max_rows: int = 12, markdown: list[str] = ()) -> None:
    """Show `table_html(...)` in the notebook."""
    _display_html(table_html(frame, columns, digits, caption, full, max_rows, markdown))


def figure_html(png: bytes, alt: str, caption: str, empty: list[str] | None = None) -> str:
    """`empty`: the panels that show no data (see `empty_panels`), recorded on the figure so that the
    report tests find a blank panel that pixels alone would not reveal (an empty axes still has labels)."""
    if not alt.strip() or not caption.strip():
        raise ValueError("a figure needs alt text and a caption (what is plotted, units, how to read it, takeaway)")
    data = base64.b64encode(png).decode("ascii")
    blank = html.escape("; ".join(empty or []), quote=True)
    return (f"<style>{TABLE_STYLE}</style><figure class=\"exactness-figure\" data-empty-panels=\"{blank}\">"
            f"<img src=\"data:image/png;base64,{data}\" alt=\"{html.escape(alt, quote=True)}\">"
            f"<figcaption class=\"exactness-caption\">{html.escape(caption)}</figcaption></figure>")


def _shows_data(ax) -> bool:
    """Whether an axes draws any data, or a note saying why it has none. Reference lines (axvline,
    axhline: not in data coordinates on both axes) are not data."""
    lines = [line for line in ax.lines if line.get_transform().contains_branch(ax.transData)
             and len(line.get_xdata()) > 0]
    collections = [c for c in ax.collections if len(c.get_offsets()) > 0 or len(c.get_paths()) > 0]
    return bool(lines or collections or ax.patches or ax.images or ax.tables or ax.texts)


def empty_panels(fig) -> list[str]:
    """The visible axes of `fig` that show neither data nor a note, named by title or position."""
    return [ax.get_title() or f"panel {number}" for number, ax in enumerate(fig.axes, 1)
            if ax.get_visible() and ax.axison and not _shows_data(ax)]


def figure(artifacts, name: str, fig, caption: str, alt: str) -> None:
    """Save `fig` as figures/<name>.png, show it with its alt text and caption, and close it (so that the
    inline backend does not show it a second time without them)."""
    import matplotlib.pyplot as plt

    empty = empty_panels(fig)
    path = artifacts.figure(name, fig)
    plt.close(fig)
    _display_html(figure_html(path.read_bytes(), alt, caption, empty))
