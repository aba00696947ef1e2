"""Text from a run folder made safe to print: a manifest or summary may come from someone else, and a control
character reaching the terminal is a command to it (clear the screen, set the clipboard through OSC 52, retitle
the window, hide the lines that follow). Each is printed as its Python escape instead, visible and inert."""

from __future__ import annotations

import re

# C0 controls but tab, DEL, C1 controls, and the Unicode line and paragraph separators and bidi overrides that
# reorder what a terminal shows
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def safe(text: object) -> str:
    """`text` with every control character written as its escape (`\\x1b`, `\\n`, `\\u202e`)."""
    return _CONTROL.sub(lambda match: match.group().encode("unicode_escape").decode("ascii"), str(text))
