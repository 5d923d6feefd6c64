"""A live sandbox's link to its session's saved state: snapshots in, restores out.

The sandbox saves its state after each successful execution, in the background, as ``Snapshot``
frames that follow the ``Result``; the link writes them to the store as they come (never holding
more than one frame in memory) and commits the last good state atomically. Before a session's
next execution, and before its sandbox is stopped to hibernate, the manager waits for
:attr:`DurableLink.settled` so that what is on disk is the state after the last execution.

A fresh sandbox of a durable session gets a ``Restore`` (empty when nothing was saved): loading
happens inside the sandbox, whose answer (``Restored``) says whether the state was usable.
"""

from __future__ import annotations

import logging
import time
import uuid

import anyio
from bridge_protocol import Restore, Restored, Snapshot

from bridge_core.channel import Channel, ChannelClosed
from bridge_core.sessions._store import (
    MAX_UNSAVED_CHARS,
    READ_CHUNK,
    SavedState,
    SessionStore,
    StateWriter,
)

__all__ = ["DurableLink", "RestoreOutcome"]

logger = logging.getLogger("bridge_core.sessions")

MAX_UNSAVED_SHOWN = 10
"""Unsaved names quoted in one notice (the rest are counted)."""


class RestoreOutcome:
    __slots__ = ("error", "state")

    def __init__(self, state: SavedState | None, error: str = "") -> None:
        self.state = state
        self.error = error

    def notice(self, name: str) -> str:
        """What the session's call is told ("" when there was nothing to restore)."""
        if self.error:
            return (
                f"the saved state of session {name!r} could not be restored ({self.error}): "
                "it was deleted and this is a fresh session"
            )
        state = self.state
        if state is None:
            return ""
        notice = (
            f"session {name!r} was restored from its state saved at {saved_at(state)} "
            "(after its last successful execution)"
        )
        if state.unsaved:
            notice += f"; these names could not be saved: {describe_unsaved(state.unsaved)}"
        return notice


def describe_unsaved(unsaved: tuple[str, ...]) -> str:
    # The names come from the sandbox: each is cut, as the store cuts what it keeps.
    shown = "; ".join(item[:MAX_UNSAVED_CHARS] for item in unsaved[:MAX_UNSAVED_SHOWN])
    more = len(unsaved) - MAX_UNSAVED_SHOWN
    return shown + (f"; and {more} more" if more > 0 else "")


class DurableLink:
    """Attached by the manager to a sandbox that serves a durable session."""

    def __init__(self, store: SessionStore, client: str | None, name: str) -> None:
        self.store = store
        self.client = client
        self.name = name
        self.settled = anyio.Event()
        self.settled.set()
        """Set while no snapshot is expected or being written."""
        self.notices: list[str] = []
        """For the session's next execution: what the last snapshot could not keep (one notice
        at most: each snapshot's replaces the one before, so forged ones cannot pile up)."""
        self._snapshot_id = ""
        self._writer: StateWriter | None = None
        self._restore: tuple[str, anyio.Event, list[str]] | None = None

    def expect_snapshot(self) -> None:
        """A successful execution just ended: its snapshot frames follow."""
        if self.settled.is_set():
            self.settled = anyio.Event()

    async def on_snapshot(self, message: Snapshot) -> None:
        if message.snapshot_id != self._snapshot_id:
            self._abort()
            self._snapshot_id = message.snapshot_id
            if not message.error:
                self._writer = await anyio.to_thread.run_sync(
                    self.store.writer, self.client, self.name
                )
        writer = self._writer
        if writer is not None and message.data:
            await anyio.to_thread.run_sync(writer.write, message.data)
        if not message.last:
            return
        self._writer = None
        error = message.error
        if writer is not None and not error:
            try:
                error = await anyio.to_thread.run_sync(writer.commit, message.unsaved)
            except OSError as exc:
                writer.abort()
                error = f"the state could not be written: {exc.strerror or exc}"
        self.notices.clear()  # only the newest snapshot's outcome is still true
        if error:
            self.notices.append(
                f"the state of session {self.name!r} after the previous execution could not be "
                f"saved ({error[:500]}): a restart or crash would bring back an older state"
            )
        elif message.unsaved:
            self.notices.append(
                f"session {self.name!r}: these names could not be saved and would not survive a "
                f"restart or crash (everything else is saved): {describe_unsaved(message.unsaved)}"
            )
        self.settled.set()

    def _abort(self) -> None:
        if self._writer is not None:
            self._writer.abort()
            self._writer = None

    def on_restored(self, message: Restored) -> None:
        pending = self._restore
        if pending is not None and pending[0] == message.restore_id:
            pending[2].append(message.error[:1000])
            pending[1].set()

    def end(self) -> None:
        """The sandbox is gone: nothing more arrives (a partial snapshot is dropped)."""
        self._abort()
        self.settled.set()
        if self._restore is not None:
            self._restore[1].set()

    async def restore(self, channel: Channel) -> RestoreOutcome:
        """Send the saved state (or an empty one) and wait for the sandbox's answer.

        The caller bounds the wait; a sandbox that ends meanwhile gives an error.
        """
        state = await anyio.to_thread.run_sync(self.store.saved, self.client, self.name)
        restore_id = uuid.uuid4().hex
        done, answer = anyio.Event(), list[str]()
        self._restore = (restore_id, done, answer)
        try:
            if state is not None:
                if state.size > self.store.settings.max_bytes:
                    return RestoreOutcome(state, "it is larger than MCP_BRIDGE_SESSION_STATE_MAX")
                # Streamed: the bridge holds one frame of it at a time.
                handle = await anyio.to_thread.run_sync(state.path.open, "rb")
                try:
                    while chunk := await anyio.to_thread.run_sync(handle.read, READ_CHUNK):
                        await channel.send(Restore(restore_id, data=chunk))
                finally:
                    handle.close()
                await anyio.to_thread.run_sync(self.store.touch, state)
            await channel.send(Restore(restore_id, last=True))
            await done.wait()
        except (ChannelClosed, OSError) as exc:
            return RestoreOutcome(state, f"the sandbox's channel failed: {exc}")
        finally:
            self._restore = None
        if not answer:
            return RestoreOutcome(state, "the sandbox ended while loading it")
        return RestoreOutcome(state, answer[0])


def saved_at(state: SavedState) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(state.saved_at))
