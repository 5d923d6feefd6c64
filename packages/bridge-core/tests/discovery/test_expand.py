"""${VAR} and ${VAR:-default} expansion."""

from __future__ import annotations

import pytest
from bridge_core.discovery import expand

ENV = {"TOKEN": "abc", "EMPTY": ""}


@pytest.mark.parametrize(
    ("text", "expected", "missing"),
    [
        ("Bearer ${TOKEN}", "Bearer abc", []),
        ("${TOKEN}${TOKEN}", "abcabc", []),
        ("${NOPE}", "", ["NOPE"]),
        ("${NOPE:-fallback}", "fallback", []),
        ("${EMPTY:-fallback}", "fallback", []),
        ("${TOKEN:-fallback}", "abc", []),
        ("${EMPTY}", "", []),
        ("${env:TOKEN}", "abc", []),
        ("${input:key}", "${input:key}", []),
        ("$TOKEN and ${", "$TOKEN and ${", []),
        ("${NOPE:-http://x:1/y}", "http://x:1/y", []),
    ],
)
def test_expand_substitutes_host_variables(text: str, expected: str, missing: list[str]) -> None:
    assert expand(text, ENV) == (expected, missing)
