"""Artifact-supplied text made safe to lay out: control and bidi characters shown as escapes.

HTML escaping (Jinja's autoescape) stops markup, but not layout tricks.
A newline, an ANSI escape or a right-to-left override in an artifact name could scramble a row.
It could scramble a one-line message too.
"""

from __future__ import annotations

import unicodedata

# Cc: C0/C1 controls; Cf: format characters (bidi overrides, zero-width); Zl/Zp: line breaks.
HIDDEN = frozenset({"Cc", "Cf", "Zl", "Zp"})
KEPT_IN_BLOCKS = frozenset({"\n", "\t"})
NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
MAX_BLOCK = 2000


def _escape(char: str) -> str:
    if char in NAMED:
        return NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: object) -> str:
    """One line of text with every control or invisible format character written as an escape."""
    return "".join(_escape(c) if unicodedata.category(c) in HIDDEN else c for c in str(text))


def visible_block(text: object, limit: int = MAX_BLOCK) -> str:
    """Multi-line text, such as a message or a source: newlines and tabs kept, controls escaped."""
    raw = str(text)
    shown = "".join(
        c if c in KEPT_IN_BLOCKS or unicodedata.category(c) not in HIDDEN else _escape(c)
        for c in raw[:limit]
    )
    if len(raw) > limit:
        shown += f"\n… ({len(raw) - limit} more characters in the log)"
    return shown
