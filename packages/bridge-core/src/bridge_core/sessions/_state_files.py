"""What a saved state is on disk: its files, its metadata, and the disk it is counted for.

Shared by the store (:mod:`._store`: the directory, the disk budget) and the writer of one state
(:mod:`._state_writer`). The writer reaches its store only through the :class:`StateLedger` it is
given, so neither module imports the other's and each can be read alone. A state's metadata and
module hint are read back (:func:`read_state`, :func:`hint_of`) here too, beside their writing.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from bridge_core.private_files import write_private

__all__ = [
    "DEFAULT_BLOCK",
    "MAX_BLOCK",
    "MAX_META_BYTES",
    "MAX_UNSAVED_CHARS",
    "MAX_UNSAVED_LISTED",
    "META_SUFFIX",
    "RESET_MEANWHILE",
    "STATE_SUFFIX",
    "Epoch",
    "SavedState",
    "StateLedger",
    "block_size",
    "disk_cost",
    "hint_of",
    "read_state",
    "write_meta",
]

STATE_SUFFIX = ".state"
META_SUFFIX = ".meta"
MAX_UNSAVED_LISTED = 50
MAX_UNSAVED_CHARS = 300
MAX_META_BYTES = 4096
"""Bytes of one state's metadata file (one block of most file systems): unsaved names past it
are counted, not kept."""
MAX_ORIGIN_CHARS = 200
"""Characters of a fork's origin read back from its metadata (a session name is far shorter)."""
RESET_MEANWHILE = "the session was reset (or its client left) while this state was being saved"

DEFAULT_BLOCK = 4096
"""Block size assumed where the file system does not say (ext4's, xfs's and tmpfs's)."""
MAX_BLOCK = 64 * 1024
"""Largest block size believed: network file systems report their transfer unit as the
fragment size (CephFS 4 MiB), though a small file does not take that much; 64 KiB is the
largest block of a local file system (xfs, btrfs on 64 KiB pages)."""


def block_size(directory: Path) -> int:
    """The allocation unit of the file system holding ``directory`` (``statvfs().f_frsize``)."""
    try:
        fragment = os.statvfs(directory).f_frsize
    except OSError:
        return DEFAULT_BLOCK
    return min(fragment, MAX_BLOCK) if fragment > 0 else DEFAULT_BLOCK


def disk_cost(size: int, block: int) -> int:
    """Bytes of disk a saved state of ``size`` bytes is counted for: its file and its metadata,
    each rounded up to whole blocks, the metadata at its bound (:data:`MAX_META_BYTES`).

    Known before a byte is written, so the budget is checked before the write and the same
    number is counted while the state is written, once it is committed, when it is deleted, and
    when the store is counted again from the disk (``docs/decisions/0093``)."""
    return _whole_blocks(size, block) + _whole_blocks(MAX_META_BYTES, block)


def _whole_blocks(size: int, block: int) -> int:
    return -(-size // block) * block


@dataclass(frozen=True, slots=True)
class Epoch:
    """A session's deletion counts when a state of it was begun (see ``SessionStore.epoch``)."""

    base: str
    own: int
    owner: int


class StateLedger(Protocol):
    """What a writer of one state needs of its store: where to write, the largest state, and
    the disk budget (``SessionStore`` is the one implementation; the methods block)."""

    @property
    def root(self) -> Path: ...

    @property
    def max_bytes(self) -> int: ...

    def disk_cost(self, size: int) -> int:
        """:func:`disk_cost` on the store's file system."""
        ...

    def reserve(self, path: Path, more: int) -> str:
        """Count ``more`` bytes of disk for the state being written for ``path``: "" if they fit
        the disk limits, else which one they would pass."""
        ...

    def release(self, path: Path, held: int) -> None:
        """A state that was not committed no longer holds the ``held`` bytes it reserved."""
        ...

    def install(self, temp: Path, path: Path, held: int, epoch: Epoch | None) -> str:
        """Rename the finished ``temp`` over ``path``: "" or why not (``temp`` removed)."""
        ...

    def install_new(self, temp: Path, path: Path, held: int, epoch: Epoch | None) -> str:
        """Link the finished ``temp`` as ``path`` unless a state is there: "" or why not."""
        ...


def write_meta(
    base: Path, unsaved: tuple[str, ...], forked_from: str = "", checkpoint: str = ""
) -> None:
    # Written by the host only; a state the session saves itself has no origin any more. When
    # the state was saved is the metadata's mtime (every commit writes or dates it), not the
    # state's: using a state refreshes the state's mtime (retention counts from its last use).
    names = [item[:MAX_UNSAVED_CHARS] for item in unsaved[:MAX_UNSAVED_LISTED]]
    left_out = len(unsaved) - len(names)
    while True:
        listed = [*names, f"and {left_out} more"] if left_out else names
        meta: dict[str, object] = {"unsaved": listed}
        if forked_from:
            meta["forked_from"] = forked_from
        if checkpoint:
            meta["checkpoint"] = checkpoint
        encoded = json.dumps(meta).encode()
        # The names are the sandbox's: escaped, 50 of them could take ~90 KB per state.
        if len(encoded) <= MAX_META_BYTES or not names:
            break
        names.pop()
        left_out += 1
    write_private(base.with_suffix(META_SUFFIX), encoded)


@dataclass(frozen=True, slots=True)
class SavedState:
    """A session's saved state as read back: its file, and what its metadata says."""

    path: Path
    size: int
    saved_at: float
    unsaved: tuple[str, ...]
    forked_from: str = ""
    """The session this state was forked from, until the fork saves a state of its own."""
    checkpoint: str = ""
    """The label of the checkpoint this state is ("" for a session's own state)."""


def read_state(base: Path) -> SavedState | None:
    """The state saved at ``base`` (its file name without suffix), None when there is none."""
    path = base.with_suffix(STATE_SUFFIX)
    try:
        info = path.stat()
    except OSError:
        return None
    unsaved: tuple[str, ...] = ()
    forked_from = checkpoint = ""
    at = info.st_mtime  # a state without metadata (older versions)
    with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
        meta_path = base.with_suffix(META_SUFFIX)
        at = meta_path.stat().st_mtime  # set by every commit (see StateWriter.commit)
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        unsaved = tuple(str(item)[:MAX_UNSAVED_CHARS] for item in meta["unsaved"])
        forked_from = str(meta.get("forked_from") or "")[:MAX_ORIGIN_CHARS]
        checkpoint = str(meta.get("checkpoint") or "")[:MAX_ORIGIN_CHARS]
        if math.isfinite(when := float(meta.get("saved_at", at))):
            at = when  # written into it by earlier versions
    return SavedState(path, info.st_size, at, unsaved[:MAX_UNSAVED_LISTED], forked_from, checkpoint)


# The hint rules live with the state format in bridge_protocol, imported on first use: the
# protocol's codec and message types are not loaded before a bridge answers ``initialize``.


def hint_of(path: Path) -> list[str]:
    """The strict hint at the head of the state at ``path`` ([] when none or unreadable)."""
    from bridge_protocol.hints import HEAD_SIZE, hint_from_head

    try:
        with open(path, "rb") as file:
            head = file.read(HEAD_SIZE)
    except OSError:
        return []
    return hint_from_head(head, strict=True) or []
