"""What a saved state is on disk: its files and its metadata.

Shared by the store (:mod:`._store`: the directory, the disk budget) and the writer of one state
(:mod:`._state_writer`). The writer reaches its store only through the :class:`StateLedger` it is
given, so neither module imports the other's and each can be read alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from bridge_core.private_files import write_private

__all__ = [
    "MAX_META_BYTES",
    "MAX_UNSAVED_CHARS",
    "MAX_UNSAVED_LISTED",
    "META_SUFFIX",
    "RESET_MEANWHILE",
    "STATE_SUFFIX",
    "Epoch",
    "StateLedger",
    "write_meta",
]

STATE_SUFFIX = ".state"
META_SUFFIX = ".meta"
MAX_UNSAVED_LISTED = 50
MAX_UNSAVED_CHARS = 300
MAX_META_BYTES = 4096
"""Bytes of one state's metadata file (one block of most file systems): unsaved names past it
are counted, not kept."""
RESET_MEANWHILE = "the session was reset (or its client left) while this state was being saved"


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

    def reserve(self, path: Path, size: int) -> str:
        """Count ``size`` more bytes of the state being written for ``path``: "" if they fit
        the disk limits, else which one they would pass."""
        ...

    def release(self, path: Path, size: int) -> None:
        """A state that was not committed no longer holds the ``size`` bytes it reserved."""
        ...

    def install(self, temp: Path, path: Path, size: int, epoch: Epoch | None) -> str:
        """Rename the finished ``temp`` over ``path``: "" or why not (``temp`` removed)."""
        ...

    def install_new(self, temp: Path, path: Path, size: int, epoch: Epoch | None) -> str:
        """Link the finished ``temp`` as ``path`` unless a state is there: "" or why not."""
        ...


def write_meta(base: Path, unsaved: tuple[str, ...], forked_from: str = "") -> None:
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
        encoded = json.dumps(meta).encode()
        # The names are the sandbox's: escaped, 50 of them could take ~90 KB per state.
        if len(encoded) <= MAX_META_BYTES or not names:
            break
        names.pop()
        left_out += 1
    write_private(base.with_suffix(META_SUFFIX), encoded)
