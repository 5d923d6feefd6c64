"""The protocol version registry, separate from the package version.

A wire change adds a version here and a golden-vector directory (``tests/vectors/vN``); old
vectors keep decoding. Negotiation picks the highest version both peers speak.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["CURRENT_VERSION", "SUPPORTED_VERSIONS", "negotiate"]

SUPPORTED_VERSIONS: tuple[int, ...] = (1,)
CURRENT_VERSION: int = max(SUPPORTED_VERSIONS)


def negotiate(offered: Iterable[int], supported: Iterable[int] = SUPPORTED_VERSIONS) -> int | None:
    """Return the highest version in both ``offered`` and ``supported``, or None if none."""
    common = set(offered) & set(supported)
    return max(common) if common else None
