"""Text from the sandbox made safe to show: invisible and terminal-controlling characters become
visible escapes, everything else stays as it was.

Sandbox code (or a tool result it prints) can send raw terminal escapes (``\\x1b[2J`` clears a
client's terminal, OSC sequences set its title or write links), right-to-left overrides that
make text read differently from what it is (CVE-2021-42574, "trojan source"), and zero-width or
tag characters that a model reads but a human never sees (hidden instructions). Each of these is
replaced by its Python escape (``\\x1b``, ``\\u202e``, ``\\U000e0041``), which both a model and a
human read as what it is.

Escaped: C0 and C1 controls and DEL except tab and newline; a carriage return unless it ends a
``\\r\\n`` line; Unicode format characters (category Cf: bidi embeddings, overrides and
isolates, zero-width space, word joiner, BOM, soft hyphen, tags, ...); line and paragraph
separators (U+2028, U+2029). Zero-width joiner and non-joiner stay where text needs them: right
after a visible non-ASCII character (emoji sequences, Persian and Indic scripts). Everything else
— letters of every script, emoji, tabs, newlines — is untouched, and so is text that has
nothing to escape (the common case costs one regex scan).

The escapes are not reversible (a printed backslash sequence looks the same): the exact bytes
are in the full-output file when the output was truncated.

``strict`` is the rule for what a user is asked to approve (the bridge's approval question and
every relayed question, :mod:`bridge_core._shown`): there nothing may look like something else,
so every character a reader could not tell apart from a plain space or from nothing is escaped
too — tabs, carriage returns, joiners, every space but U+0020, private-use, unassigned and
surrogate code points, blank letters and variation selectors. This is the product's one
escaper; the audit log's JSON encoding and ``repr`` in error messages are the only others.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["visible", "visible_head", "visible_tail"]

# Code points of categories Cc, Cf, Zl and Zp (Unicode 15.1), minus tab, newline, CR, ZWNJ and
# ZWJ, which have rules of their own. A test checks this list against the running Python's
# unicodedata, so a newer Unicode with new format characters is noticed.
_ALWAYS = (
    "\x00-\x08\x0b-\x0c\x0e-\x1f\x7f-\x9f"
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u180e"
    "\u200b\u200e\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0001\U000e0020-\U000e007f"
)
_JOINERS = "\u200c\u200d"
# One character class finds every candidate (a single scan, fast on the common text with none);
# the rules that look at a neighbour are decided per match.
_CANDIDATES = re.compile(f"[{_ALWAYS}\r{_JOINERS}]")
_SINGLE_LINE = re.compile(f"[{_ALWAYS}\r\n{_JOINERS}]")
_NAMED = {"\r": "\\r", "\n": "\\n", "\t": "\\t"}


def _escaped(char: str) -> str:
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _shown(match: re.Match[str]) -> str:
    char, text, at = match.group(), match.string, match.start()
    if char == "\r":
        # Kept when it ends a CRLF line; a lone one moves a terminal's cursor back over the line.
        return char if text.startswith("\n", at + 1) else "\\r"
    if char in _JOINERS and at > 0:
        # Kept right after a visible non-ASCII character (emoji sequences, Persian, Indic); a
        # joiner after ASCII, another joiner or an escaped character could only hide bits.
        before = text[at - 1]
        if before >= "\x80" and not _CANDIDATES.match(before):
            return char
    return _escaped(char)


_STRICT_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"})
_BLANK_LETTERS = frozenset(
    "\u115f\u1160\u3164\uffa0\u2800\u180e\u034f"  # fillers and blanks that are not "space"
    + "".join(chr(c) for c in range(0xFE00, 0xFE10))  # variation selectors
)


def _strictly_hidden(char: str) -> bool:
    if char == " ":
        return False
    return (
        unicodedata.category(char) in _STRICT_CATEGORIES
        or char in _BLANK_LETTERS
        or 0xE0100 <= ord(char) <= 0xE01EF  # variation selectors supplement
    )


def visible(text: str, *, single_line: bool = False, strict: bool = False) -> str:
    """``text`` with invisible and control characters escaped (see the module docstring).

    ``single_line`` also escapes newlines and carriage returns, for text that must stay on one
    line (a notice or an error line in the bridge's own block). Applying it twice changes
    nothing more: its output has nothing left to escape. ``strict``: the rule for a question a
    user answers (module docstring); newlines stay unless ``single_line``.
    """
    if strict:
        # Each character's rule stands alone here: decided once per distinct character, then
        # applied in one pass (a hostile upstream's megabytes cost milliseconds, not seconds).
        table = {
            ord(char): _escaped(char)
            for char in set(text)
            if _strictly_hidden(char) and (single_line or char != "\n")
        }
        return text.translate(table) if table else text
    if single_line:
        return _SINGLE_LINE.sub(lambda match: _escaped(match.group()), text)
    return _CANDIDATES.sub(_shown, text)


def visible_head(text: str, limit: int, *, single_line: bool = False) -> tuple[str, int]:
    """The visible form of a start of ``text`` that shows in at most ``limit`` characters, and
    how many characters of ``text`` it covers (an escape is never cut in half)."""
    taken = min(len(text), limit)
    while True:
        shown = visible(text[:taken], single_line=single_line)
        if len(shown) <= limit:
            return shown, taken
        # Shrink in proportion to the overflow; strictly, so that it ends (at 0 at worst).
        taken = min(taken - 1, taken * limit // len(shown))


def visible_tail(text: str, limit: int) -> tuple[str, int]:
    """Like :func:`visible_head`, for the end of ``text``."""
    taken = min(len(text), limit)
    while True:
        shown = visible(text[len(text) - taken :])
        if len(shown) <= limit:
            return shown, taken
        taken = min(taken - 1, taken * limit // len(shown))
