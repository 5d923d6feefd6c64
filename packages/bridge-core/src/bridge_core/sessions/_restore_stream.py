"""Sending a saved state to a sandbox: its file as ``Restore`` frames, one frame held at a time.

Used for a fresh sandbox's restore of its session (:mod:`._durable`) and for a checkpoint brought
back into a running one (:mod:`._checkpoints`).
"""

from __future__ import annotations

import anyio
from bridge_protocol import Restore

from bridge_core.channel import Channel
from bridge_core.sessions._store import READ_CHUNK, SavedState

__all__ = ["FIRST_CHUNK", "stream_state"]

FIRST_CHUNK = 64 * 1024
"""Bytes of the first ``Restore`` frame: the head of a state names the modules the sandbox
imports while the rest arrives, so it goes ahead of the 4 MiB frames (the host never reads it:
only the frame is smaller)."""


async def stream_state(
    channel: Channel, restore_id: str, state: SavedState, *, last: bool = True
) -> None:
    """Send the file of ``state`` as ``Restore`` frames of ``restore_id`` (and the last, empty
    one, unless ``last`` is false). Streamed: the bridge holds one frame of it at a time."""
    handle = await anyio.to_thread.run_sync(state.path.open, "rb")
    try:
        size = FIRST_CHUNK
        while chunk := await anyio.to_thread.run_sync(handle.read, size):
            await channel.send(Restore(restore_id, data=chunk))
            size = READ_CHUNK
    finally:
        handle.close()
    if last:
        await channel.send(Restore(restore_id, last=True))
