"""Parsers for the value syntaxes settings accept: durations, sizes, booleans, names, lists.

Each parser takes the raw string and returns the value or raises :class:`ValueError` whose
message says what is allowed (the caller prefixes the variable or flag name).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Literal, TypeVar

__all__ = [
    "choice",
    "format_size",
    "parse_bool",
    "parse_duration",
    "parse_module_list",
    "parse_optional_int",
    "parse_path",
    "parse_path_or_off",
    "parse_positive_int",
    "parse_size",
    "parse_store_name",
    "parse_non_negative_int",
    "parse_word_list",
    "parse_name_list",
]

_DURATION = re.compile(r"(?P<num>\d+(?:\.\d+)?)\s*(?P<unit>ms|s|m|h|d)?", re.IGNORECASE)
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_SIZE = re.compile(r"(?P<num>\d+)\s*(?P<unit>[kmg])?(?:i?b)?", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off"})

T = TypeVar("T")


def parse_duration(raw: str) -> float:
    """``30``, ``30s``, ``2m``, ``1h``, ``7d``, ``500ms`` → seconds (> 0)."""
    match = _DURATION.fullmatch(raw.strip())
    if match is None:
        raise ValueError("expected a duration like 30, 30s, 2m or 500ms")
    seconds = float(match["num"]) * _DURATION_UNITS[(match["unit"] or "s").lower()]
    if seconds <= 0:
        raise ValueError("expected a duration greater than zero, like 30s")
    if not math.isfinite(seconds):  # 400 digits make a float infinity
        raise ValueError("expected a duration of at most 10^300 seconds, like 30s")
    return seconds


def parse_size(raw: str) -> int:
    """``512m``, ``2g``, ``64k``, ``1048576`` (bytes) → bytes (> 0)."""
    match = _SIZE.fullmatch(raw.strip())
    if match is None:
        raise ValueError("expected a size like 512m, 2g or 65536 (bytes)")
    size = int(match["num"]) * _SIZE_UNITS[(match["unit"] or "").lower()]
    if size <= 0:
        raise ValueError("expected a size greater than zero, like 512m")
    return size


def format_size(size: int) -> str:
    """The shortest exact ``512m``/``2g``/``65536`` spelling of a byte count."""
    for unit in ("g", "m", "k"):
        factor = _SIZE_UNITS[unit]
        if size % factor == 0:
            return f"{size // factor}{unit}"
    return str(size)


_STORE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def parse_store_name(raw: str) -> str:
    """A directory name of the state dir: letters, digits, ``_ . -``, up to 64 characters."""
    name = raw.strip()
    if _STORE_NAME.fullmatch(name) is None:
        raise ValueError(
            "expected a name of letters, digits, '_', '.' or '-' (at most 64, not starting "
            "with a dot or dash), like claude-desktop"
        )
    return name


def parse_bool(raw: str) -> bool:
    """true/false, 1/0, yes/no, on/off (any case)."""
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError("expected true or false (also 1/0, yes/no)")


def parse_positive_int(raw: str) -> int:
    """An integer ≥ 1."""
    try:
        value = int(raw.strip())
    except ValueError:
        raise ValueError("expected a whole number of at least 1") from None
    if value < 1:
        raise ValueError("expected a whole number of at least 1")
    return value


def parse_non_negative_int(raw: str) -> int:
    """An integer ≥ 0."""
    try:
        value = int(raw.strip())
    except ValueError:
        raise ValueError("expected a whole number of at least 0") from None
    if value < 0:
        raise ValueError("expected a whole number of at least 0")
    return value


def parse_optional_int(raw: str) -> int | None:
    """An integer ≥ 1, or empty/``none`` for no limit."""
    if raw.strip().lower() in ("", "none", "unlimited"):
        return None
    try:
        return parse_positive_int(raw)
    except ValueError:
        raise ValueError("expected a whole number of at least 1, or 'none'") from None


def parse_path(raw: str) -> Path:
    """A filesystem path; ``~`` is expanded."""
    if not raw.strip():
        raise ValueError("expected a file path")
    return Path(raw.strip()).expanduser()


def parse_runtime_url(raw: str) -> str:
    """A podman API URL: ``unix://``, ``tcp://`` or ``ssh://`` (its details are checked when
    the runtime connects, with the fix in the message)."""
    url = raw.strip()
    if not url.startswith(("unix://", "tcp://", "ssh://")):
        raise ValueError(
            "expected unix:///path/to/podman.sock or ssh://user@host/run/podman/podman.sock"
        )
    return url


def parse_path_or_off(raw: str) -> Path | Literal[False]:
    """A filesystem path, or ``off`` (also false/no/none/0) for none at all."""
    if raw.strip().lower() in _FALSE | {"none"}:
        return False
    return parse_path(raw)


def parse_word_list(raw: str) -> tuple[str, ...]:
    """Whitespace-separated values (commas can occur inside a value, e.g. SELinux levels)."""
    return tuple(raw.split())


def parse_name_list(raw: str) -> tuple[str, ...]:
    """Comma- or whitespace-separated names/patterns."""
    return tuple(part for part in re.split(r"[,\s]+", raw.strip()) if part)


def parse_module_list(raw: str) -> tuple[str, ...]:
    """Top-level module names, comma- or whitespace-separated (``numpy,pandas``)."""
    # The protocol package is not loaded before a bridge answers ``initialize`` unless needed.
    from bridge_protocol.hints import MAX_HINT_BYTES, MAX_HINT_MODULES, MODULE_NAME

    names = tuple(dict.fromkeys(parse_name_list(raw)))
    for number, name in enumerate(names, 1):
        if MODULE_NAME.fullmatch(name) is None:
            raise ValueError(
                f"expected top-level module names like numpy,pandas; name {number} of "
                f"{len(names)} is not one (no dots, paths or other signs: numpy, not numpy.linalg)"
            )
    if len(names) > MAX_HINT_MODULES:
        raise ValueError(f"expected at most {MAX_HINT_MODULES} module names, not {len(names)}")
    if (size := sum(len(name) + 1 for name in names)) > MAX_HINT_BYTES:
        # Given to the sandbox as a hint (encode_hint): the names past its limit would be cut.
        raise ValueError(
            f"expected module names of at most {MAX_HINT_BYTES:,} characters in all, counting "
            f"one separator after each, not {size:,}"
        )
    return names


def choice(*allowed: str) -> Callable[[str], str]:
    """A parser accepting exactly one of ``allowed`` (case-insensitive)."""

    def parse(raw: str) -> str:
        value = raw.strip().lower()
        if value not in allowed:
            raise ValueError("expected one of " + ", ".join(allowed))
        return value

    return parse
