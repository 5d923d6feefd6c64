"""What the saving child (``_saving_child``) and the thread forwarding its pipe (``_snapshot``)
agree on: the records of the pipe, the frame size and the state the host holds. Apart from both
so that neither imports the other (the child's module is imported only before a fork)."""

from __future__ import annotations

import struct
from typing import NamedTuple

__all__ = ["CHUNK", "MAX_LAYOUT", "HostCopy"]

CHUNK = 4 * 1024 * 1024
"""Bytes per ``Snapshot`` frame (the channel's frame limit is 16 MiB)."""
MAX_LAYOUT = 4096
"""Out-of-band buffers of a state whose place the sandbox remembers (one that did not change is
copied by the host; past this many, the rest are sent again)."""


class HostCopy(NamedTuple):
    """A state the host holds, as the sandbox knows it: its digest (see
    :func:`._saving_child.child`), the snapshot that sent it, and where its out-of-band buffers
    are in it (by their SHA-256 and length: at most :data:`MAX_LAYOUT`), for the next state to
    copy the unchanged ones."""

    digest: bytes
    snapshot_id: str
    layout: dict[tuple[bytes, int], int]


_RECORD = struct.Struct(">cQQ")
"""A record of the saving child's pipe (written by ``_saving_child``, read by the forwarder):
``D`` and a length (then that many bytes of the state; the second number is 0), or ``C``, an
offset and a length (bytes the host copies from the state it holds)."""
_DATA, _COPY = b"D", b"C"
