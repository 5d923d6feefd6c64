"""Session names: what callers may use to address a session."""

from __future__ import annotations

import re

__all__ = ["DEFAULT_SESSION", "SESSION_NAME_PATTERN", "validate_session_name"]

DEFAULT_SESSION = "default"
"""The session used when a caller names none."""

SESSION_NAME_PATTERN = r"[A-Za-z0-9_.-]{1,64}"
_SESSION_NAME = re.compile(SESSION_NAME_PATTERN)


def validate_session_name(name: str) -> str:
    """Return ``name`` if it is a valid session name, else raise ValueError naming the pattern.

    Names end up in container names, labels, logs and file names, hence the small alphabet.
    """
    if not isinstance(name, str) or _SESSION_NAME.fullmatch(name) is None:
        raise ValueError(
            f"invalid session name {name!r}: use 1 to 64 characters of {SESSION_NAME_PATTERN[:-6]}"
            f" (pattern {SESSION_NAME_PATTERN})"
        )
    return name
