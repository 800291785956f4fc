"""Text from a server or an archive, made safe to show: the one rule for control characters.

A server's error message, a model name or a forged archive's report can carry terminal
escape sequences (``ESC [2J`` clears the screen, ``ESC ]0;...`` retitles the window, a
``\\r`` overwrites the line) and bidirectional overrides (text that reads differently than
it is). ``printable`` shows each such character as an escape (``\\x1b``, ``\\u202e``) instead
of sending it to the terminal or into a report: C0 and C1 controls and DEL, except tabs and
(unless ``lines=False``) newlines, and the Unicode bidi controls. A lowest layer: no imports
of mopt.
"""

from __future__ import annotations

import re

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e"
                      "\u2066-\u2069]")
_CONTROL_OR_NEWLINE = re.compile(f"[\n{_CONTROL.pattern[1:-1]}]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code in (0x0a, 0x0d):
        return "\\n" if code == 0x0a else "\\r"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, *, lines: bool = True) -> str:
    """``text`` with its control characters shown as escapes (see the module docstring);
    ``lines=False`` escapes newlines too (one line of a table or a log)."""
    return (_CONTROL if lines else _CONTROL_OR_NEWLINE).sub(_escape, text)
