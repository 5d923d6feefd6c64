"""``${VAR}`` / ``${VAR:-default}`` expansion of configuration values, against the host env."""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["expand", "prompted_inputs"]

# ``${env:VAR}`` is VS Code's spelling of the same thing. ``${input:...}`` and other VS Code
# variables do not match and stay literal; an entry holding ``${input:...}`` (a value VS Code
# prompts for) is not proxied at all (see parse_entry).
_VARIABLE = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_INPUT = re.compile(r"\$\{input:[^}]*\}")


def prompted_inputs(value: object) -> list[str]:
    """The ``${input:ID}`` references anywhere in an entry (its strings, at any depth), in order.

    VS Code replaces each by what the user types when it starts the server; nothing else can,
    so a server holding one works only when VS Code itself starts it.
    """
    found: list[str] = []
    if isinstance(value, str):
        found += _INPUT.findall(value)
    elif isinstance(value, dict):
        for item in value.values():
            found += prompted_inputs(item)
    elif isinstance(value, list):
        for item in value:
            found += prompted_inputs(item)
    return list(dict.fromkeys(found))


def expand(text: str, environ: Mapping[str, str]) -> tuple[str, list[str]]:
    """Expand variables in ``text``; return the result and the names that were unset.

    Like the shell, ``${VAR:-default}`` uses the default when VAR is unset *or empty*. An unset
    ``${VAR}`` without a default becomes the empty string and is reported to the caller.
    """
    missing: list[str] = []

    def substitute(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        value = environ.get(name)
        if default is not None:
            return value if value else default
        if value is None:
            missing.append(name)
            return ""
        return value

    return _VARIABLE.sub(substitute, text), missing
