"""Text from the sandbox made visible: controls, bidi, zero-width and tag characters escaped,
everything else untouched."""

from __future__ import annotations

import sys
import unicodedata

import pytest
from bridge_core._visible import visible, visible_head, visible_tail
from hypothesis import given
from hypothesis import strategies as st

_HIDDEN = {"Cc", "Cf", "Zl", "Zp"}
_KEPT_CONTROLS = {"\t", "\n"}


def _hidden_left(text: str) -> set[str]:
    """Characters of the hidden categories still raw in ``text``, minus the ones kept by rule."""
    left = set()
    for at, char in enumerate(text):
        if unicodedata.category(char) not in _HIDDEN or char in _KEPT_CONTROLS:
            continue
        if char == "\r" and text.startswith("\n", at + 1):
            continue
        if char in "\u200c\u200d" and at > 0 and text[at - 1] >= "\x80":
            continue
        left.add(char)
    return left


def test_every_control_format_and_separator_character_of_this_unicode_is_escaped() -> None:
    hidden = [
        chr(code)
        for code in range(sys.maxunicode + 1)
        if unicodedata.category(chr(code)) in _HIDDEN and chr(code) not in _KEPT_CONTROLS
    ]
    shown = visible("".join(f"a{char}" for char in hidden))
    assert _hidden_left(shown) == set()
    assert shown.count("\\") == len(hidden)  # one escape each


def test_terminal_escapes_and_bidi_overrides_become_python_escapes() -> None:
    assert visible("\x1b[2J\x07") == "\\x1b[2J\\x07"
    assert visible("abc\u202edcba\u2066x\u2069") == "abc\\u202edcba\\u2066x\\u2069"
    assert visible("a\u200bb\ufeff\U000e0041") == "a\\u200bb\\ufeff\\U000e0041"
    assert visible("over\rwrite") == "over\\rwrite"


@pytest.mark.parametrize(
    "text",
    [
        "tabs\tand\nnewlines\r\n",
        "héllo wörld — 日本語, \u03b5\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac, \u05e2\u05d1",
        "family 👨\u200d👩\u200d👧 and flags 🇫🇷",
        "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645",  # Persian: the ZWNJ is spelling
        "",
    ],
)
def test_normal_text_tabs_newlines_and_joined_scripts_are_untouched(text: str) -> None:
    assert visible(text) == text


def test_joiners_that_could_only_hide_bits_are_escaped() -> None:
    assert visible("a\u200db") == "a\\u200db"  # after ASCII
    assert visible("é\u200d\u200d") == "é\u200d\\u200d"  # a run of joiners
    assert visible("\u200c") == "\\u200c"  # at the start


def test_single_line_also_escapes_line_breaks() -> None:
    assert visible("one\ntwo\r\nthree", single_line=True) == "one\\ntwo\\r\\nthree"


@given(st.text())
def test_nothing_hidden_is_left_and_a_second_pass_changes_nothing(text: str) -> None:
    shown = visible(text)
    assert _hidden_left(shown) == set()
    assert visible(shown) == shown


@given(st.text(alphabet=st.sampled_from("ab\x1b\u202e\u200d\r\né")), st.integers(0, 40))
def test_heads_and_tails_fit_their_limit_and_never_cut_an_escape(text: str, limit: int) -> None:
    head, taken = visible_head(text, limit)
    assert len(head) <= limit
    assert head == visible(text[:taken])
    tail, taken = visible_tail(text, limit)
    assert len(tail) <= limit
    assert tail == visible(text[len(text) - taken :])


_STRICT_HIDDEN = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"}


def _strict_reference(text: str, single_line: bool) -> str:
    """The strict rule spelt out one character at a time (no neighbour matters)."""
    out = []
    for char in text:
        hidden = char != " " and (
            unicodedata.category(char) in _STRICT_HIDDEN
            or char in "\u115f\u1160\u3164\uffa0\u2800\u180e\u034f"
            or 0xFE00 <= ord(char) < 0xFE10
            or 0xE0100 <= ord(char) <= 0xE01EF
        )
        if hidden and (single_line or char != "\n"):
            named = {"\r": "\\r", "\n": "\\n", "\t": "\\t"}.get(char)
            code = ord(char)
            width = "x" if code < 0x100 else "u" if code < 0x10000 else "U"
            out.append(named or f"\\{width}{code:0{ {'x': 2, 'u': 4, 'U': 8}[width] }x}")
        else:
            out.append(char)
    return "".join(out)


@given(st.text(), st.booleans())
def test_strict_escaping_is_the_per_character_rule(text: str, single_line: bool) -> None:
    # What a user is asked to approve: every character a reader could not tell from a space or
    # from nothing escaped, each decided by itself; repeats and megabytes alike.
    shown = visible(text * 3, strict=True, single_line=single_line)
    assert shown == _strict_reference(text * 3, single_line)
