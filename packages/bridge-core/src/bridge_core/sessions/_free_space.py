"""The free space saved states leave on their file system, whatever the disk limit.

The store (:mod:`._store`) checks every state's disk against its limits; this is the last of
them: the file system the states share with the bridge's own files and the user's other programs
keeps :func:`free_space_reserve` bytes free, so that states never fill it. The file system is
asked through ``disk_usage`` (``shutil.disk_usage``, or a test's fake).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

__all__ = [
    "FREE_SPACE_RESERVE",
    "FREE_SPACE_SHARE",
    "free_space_reserve",
    "short_of_space",
    "warn_if_short_of_space",
]

logger = logging.getLogger("bridge_core.sessions")

DiskUsage = Callable[[Path], tuple[int, int, int]]
"""(total, used, free) bytes of the file system holding a path."""

FREE_SPACE_RESERVE = 1024**3
"""Free space saved states leave on the store's file system, at least (or
:data:`FREE_SPACE_SHARE` of it, whichever is more): the bridge's own files share it (its log, 4 x
1 MiB; its sandboxes' channel directories; full outputs, up to 256 MiB), and so do the user's
other programs. States that fill the disk would fail those with I/O errors, and then no sandbox
starts; a state refused for the reserve is a notice that says so."""
FREE_SPACE_SHARE = 0.05
"""Share of the store's file system kept free, when more than :data:`FREE_SPACE_RESERVE`: where
ext4 stops unprivileged writers (its default reserve) and Elasticsearch stops writing (its
flood-stage watermark), the point at which a disk counts as full."""


def free_space_reserve(total: int) -> int:
    """Bytes of a file system of ``total`` bytes that saved states leave free."""
    return max(FREE_SPACE_RESERVE, int(total * FREE_SPACE_SHARE))


def warn_if_short_of_space(disk_usage: DiskUsage, root: Path, committed: int, limit: int) -> None:
    """Say once, at start, when the file system cannot give the store its disk limit
    (``committed``: the disk the store's states take now)."""
    try:
        total, _, free = disk_usage(root)
    except OSError:
        return
    room = committed + free - free_space_reserve(total)
    if room < limit:
        logger.warning(
            "the saved sessions may take %s bytes ([sessions] state_disk in bridge.toml), but the "
            "file system of %s has room for %s while %s bytes are kept free "
            "(FREE_SPACE_RESERVE): states past that are not saved",
            f"{limit:,}",
            root,
            f"{max(room, 0):,}",
            f"{free_space_reserve(total):,}",
        )


def short_of_space(disk_usage: DiskUsage, root: Path, size: int) -> str:
    """Why ``size`` more bytes of disk would eat into the free space the saved states leave
    ("" if they fit, or the file system cannot say): whatever the disk limit, the store
    never takes more than its file system has (:data:`FREE_SPACE_RESERVE`)."""
    try:
        total, _, free = disk_usage(root)
    except OSError:
        return ""
    reserve = free_space_reserve(total)
    if size <= free - reserve:
        return ""
    return (
        f"the disk of the saved sessions has {free:,} bytes free, and the bridge keeps "
        f"{reserve:,} of them free for its logs, its sandboxes and the rest of the system "
        f"(FREE_SPACE_RESERVE: {FREE_SPACE_SHARE:.0%} of the disk, at least "
        f"{FREE_SPACE_RESERVE:,} bytes): free disk space, or reset sessions you no longer need"
    )
