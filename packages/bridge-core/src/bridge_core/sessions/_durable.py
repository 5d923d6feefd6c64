"""A live sandbox's link to its session's saved state: snapshots in, restores out.

The sandbox saves its state after each successful execution, in the background, as ``Snapshot``
frames that follow the ``Result``; the link writes them to the store as they come (never holding
more than one frame in memory) and commits the last good state atomically. Before a session's
next execution, and before its sandbox is stopped to hibernate, the manager waits for
:attr:`DurableLink.settled` so that what is on disk is the state after the last execution.

A fresh sandbox of a durable session gets a ``Restore`` (empty when nothing was saved): loading
happens inside the sandbox, whose answer (``Restored``) says whether the state was usable.

A fork asked for by sandbox code (``runtime.fork_session``) is written into a new session of the
same client by the link's :class:`~._fork.Forks`.
"""

from __future__ import annotations

import logging
import time
import uuid

import anyio
from bridge_protocol import (
    FORK_SNAPSHOT_PREFIX,
    UNCHANGED_SNAPSHOT_PREFIX,
    Restore,
    Restored,
    Snapshot,
    SnapshotCopy,
)

from bridge_core.channel import Channel, ChannelClosed
from bridge_core.sessions._checkpoints import Checkpoints
from bridge_core.sessions._fork import FORK_METHOD, ForkNames, Forks, PendingFork
from bridge_core.sessions._restore_stream import stream_state
from bridge_core.sessions._state_files import MAX_UNSAVED_CHARS
from bridge_core.sessions._state_writer import COPY_STEP, CommittedState, StateWriter
from bridge_core.sessions._store import (
    SavedState,
    SessionStore,
)

__all__ = ["FORK_METHOD", "DurableLink", "ForkNames", "PendingFork", "RestoreOutcome"]

logger = logging.getLogger("bridge_core.sessions")

HELD_STATE = 1024 * 1024
"""A snapshot up to this size is held in memory until its last frame, then written, checked
against the disk budget and renamed in one thread hop (a warm call's state is kilobytes, and the
session's next call waits for it); a larger one is streamed to its temp file as it comes."""
MAX_UNSAVED_SHOWN = 10
"""Unsaved names quoted in one notice (the rest are counted)."""
KEEP_EVERY = 3600.0
"""Seconds between two refreshes of an unchanged saved state's retention clock (at most)."""


class RestoreOutcome:
    __slots__ = ("error", "state")

    def __init__(self, state: SavedState | None, error: str = "") -> None:
        self.state = state
        self.error = error

    def notice(self, name: str, *, latest: bool = True) -> str:
        """What the session's call is told ("" when there was nothing to restore); ``latest``:
        the saved state is the one after the session's last successful execution."""
        if self.error:
            return (
                f"the saved state of session {name!r} could not be restored ({self.error}): "
                "it was deleted and this is a fresh session"
            )
        state = self.state
        if state is None:
            return ""
        if state.forked_from:
            notice = (
                f"session {name!r} was forked from session {state.forked_from!r} at "
                f"{saved_at(state)}: it starts from that session's state of that moment"
            )
        else:
            notice = f"session {name!r} was restored from its state saved at {saved_at(state)}" + (
                " (after its last successful execution)" if latest else " (an older one)"
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

    def __init__(
        self, store: SessionStore, client: str | None, name: str, *, forks: ForkNames | None = None
    ) -> None:
        self.store = store
        self.client = client
        self.name = name
        self.forks = Forks(store, client, name, forks)
        """Its session's forks, asked for by its code."""
        self.checkpoints = Checkpoints(store, client, name, self.forks)
        """Its session's checkpoints (their snapshots take the forks' one place)."""
        self.epoch = store.epoch(client, name)
        """What this sandbox's states are valid for: none lands after a reset of the session
        (renewed by :meth:`forgotten` when its state is deleted before it ran anything)."""
        self.settled = anyio.Event()
        self.settled.set()
        """Set while no snapshot is expected or being written."""
        self.notices: list[str] = []
        """For the session's next execution: what the last snapshot could not keep (one notice
        at most: each snapshot's replaces the one before, so forged ones cannot pile up)."""
        self.lost = ""
        """Why the state after the session's last execution is not saved ("" when it is, or
        none was expected yet): stopping this sandbox now would lose that execution's work."""
        self._snapshot_id = ""
        self._writer: StateWriter | None = None
        self._held: list[bytes] | None = None
        """The frames of a snapshot still small enough to be held (None: streamed, or none)."""
        self._held_bytes = 0
        self._saved = False
        """Whether the last snapshot that ended was committed (an unchanged one keeps it)."""
        self._meta: tuple[str, ...] | None = None
        """The unsaved names of the metadata this link's last commit wrote (None: not known)."""
        self._kept_at = 0.0
        self._resend = False
        """See :attr:`lost_last`."""
        self._refused = 0
        """Bytes of the last state the disk limits refused (0: none, or failed otherwise)."""
        self._too_large = False
        self._base: tuple[str, CommittedState] | None = None
        """The snapshot whose state this link committed last, and its file: the one a
        ``snapshot_copy`` may copy from (None: no copy is accepted)."""
        self._copy_error = ""
        """Why the snapshot being received cannot be saved, found at one of its copies."""
        self._stop_sent = False
        self.stop_wanted = False
        """The snapshot being received passed the largest state kept: the sandbox should be
        told to stop sending it (the reader sends ``resave`` and clears this)."""
        self._committed: CommittedState | None = None
        self.bytes_sent = 0
        """Bytes of the session's own states this sandbox sent (measured by tests and benches,
        with :attr:`bytes_copied`: what copies saved the channel)."""
        self.bytes_copied = 0
        """Bytes of its states copied from the state committed before (``snapshot_copy``)."""
        self._restore: tuple[str, anyio.Event, list[str]] | None = None

    @property
    def lost_last(self) -> bool:
        """Whether this side failed to save a state the sandbox sent whole, for a reason that
        may pass (I/O; the disk limits, once a state of that size would fit them): the sandbox
        must send its next state whole, never as "unchanged" from that one. A state past the
        largest kept is not asked for again."""
        if not self._resend:
            return False
        # Refused by the disk limits: asking while there is no room would make the sandbox send
        # it whole at every call only to be refused again.
        return not self._refused or self.store.fits(self.client, self.name, self._refused)

    def resave_asked(self) -> None:
        """The sandbox was told (:attr:`lost_last`): its next state comes whole."""
        self._resend = False

    def expect_snapshot(self) -> None:
        """A successful execution just ended: its snapshot frames follow."""
        if self.settled.is_set():
            self.settled = anyio.Event()

    async def on_snapshot(self, message: Snapshot) -> None:
        if message.snapshot_id.startswith(FORK_SNAPSHOT_PREFIX):
            await self.forks.on_snapshot(message)
            return
        if message.snapshot_id.startswith(UNCHANGED_SNAPSHOT_PREFIX):
            await self._on_unchanged(message)
            return
        if message.snapshot_id != self._snapshot_id:
            self._begin(message.snapshot_id, held=not message.error)
        self.bytes_sent += len(message.data)
        if (held := self._held) is not None and message.data:
            held.append(message.data)
            self._held_bytes += len(message.data)
            if self._held_bytes > HELD_STATE:  # too large to hold: streamed from now on
                self._held = None
                self._writer = await anyio.to_thread.run_sync(self._start_writer, held)
        elif (writer := self._writer) is not None and message.data:
            if writer.too_large:  # refused already: the rest costs no thread hop, no write
                writer.offered += len(message.data)
            else:
                await anyio.to_thread.run_sync(writer.write, message.data)
        if self._writer is not None and self._writer.too_large and not self._stop_sent:
            # Past the largest state kept it can only be refused: the sandbox is told to stop
            # making and sending the rest (``resave``), instead of streaming it all here.
            self._stop_sent = self.stop_wanted = True
        if not message.last:
            return
        writer, kept = self._writer, self._held
        self._writer, self._held = None, None
        error = message.error
        if error and writer is not None and writer.too_large:
            error = writer.error  # it ended because it was told to stop: why it was refused
            self._too_large = True
        self._base = None  # from now on, the state on disk is the one this snapshot leaves
        if self._copy_error and not error:
            error, self._resend = self._copy_error, True  # the next comes whole
        if not error and (writer is not None or kept is not None):
            same_meta = self._meta == message.unsaved
            error = await anyio.to_thread.run_sync(
                self._save, writer, kept, message.unsaved, same_meta
            )
            # Failed here: unless it can only fail again, the sandbox sends the next whole.
            self._resend = bool(error) and not self._too_large
            if not error and self._committed is not None:
                self._base = (message.snapshot_id, self._committed)
        elif writer is not None:
            writer.abort()  # the saving child failed after its first frames
        self._saved = not error
        self._meta = None if error else message.unsaved
        self._kept_at = time.monotonic()
        self._settle(error, message.unsaved)

    async def _on_unchanged(self, message: Snapshot) -> None:
        """The state equals the one the sandbox sent last: what was saved of it stays."""
        self._abort()
        self._snapshot_id = ""
        if message.data or not message.last or message.error:
            error = message.error or "an unchanged snapshot must be one frame without data"
            self._saved = False
        elif not self._saved:
            error = "the state it is the same as was not saved either"
        else:
            error = ""
            # A retention shorter than that is refreshed four times per retention: a state in
            # use must not be older than it at the next bridge start (the store's sweep).
            every = min(KEEP_EVERY, self.store.settings.retention / 4)
            if (now := time.monotonic()) - self._kept_at > every:
                self._kept_at = now  # in use: retention counts from now
                if not await anyio.to_thread.run_sync(self.store.keep, self.client, self.name):
                    error = self._gone()
            if not error and message.unsaved != self._meta:
                # The same bytes with another name left out (an open file bound, say): the
                # notice after a restore must name what is missing now.
                error = await anyio.to_thread.run_sync(self._describe, message.unsaved)
        self._settle(error, message.unsaved)

    def _describe(self, unsaved: tuple[str, ...]) -> str:
        """Record ``unsaved`` for the state saved last; "" or why not (blocking: in a thread)."""
        try:
            if not self.store.describe(self.client, self.name, self.epoch, unsaved):
                return self._gone()
        except OSError as exc:
            self._meta = None
            return f"the state's names could not be written: {exc.strerror or exc}"
        self._meta = unsaved
        return ""

    def _gone(self) -> str:
        """The state the sandbox calls unchanged is not in the store (deleted outside the
        bridge): the sandbox is asked for its next state whole; why the save failed."""
        self._saved, self._base = False, None
        self._resend, self._refused = True, 0
        return "the state it is the same as is no longer saved"

    def _settle(self, error: str, unsaved: tuple[str, ...]) -> None:
        """A snapshot ended: say what the next execution should know, and let it run."""
        self.notices.clear()  # only the newest snapshot's outcome is still true
        self.lost = error[:500]
        if error:
            self.notices.append(
                f"the state of session {self.name!r} after the previous execution could not be "
                f"saved ({error[:500]}): a restart or crash would bring back an older state"
            )
        elif unsaved:
            self.notices.append(
                f"session {self.name!r}: these names could not be saved and would not survive a "
                f"restart or crash (everything else is saved): {describe_unsaved(unsaved)}"
            )
        self.settled.set()

    def forgotten(self) -> None:
        """The session's saved state was deleted before this sandbox saved anything (a refused
        restore): what it saves from now on is the session's."""
        self.epoch = self.store.epoch(self.client, self.name)
        self._saved = False  # a state it sent before (forged: too early) is gone: never vouched
        self._resend, self._refused, self._base = True, 0, None
        self._meta = None
        self.lost = ""  # the session starts afresh: nothing it did is unsaved yet

    def _start_writer(self, held: list[bytes]) -> StateWriter:
        writer = self.store.writer(self.client, self.name, self.epoch)
        for chunk in held:
            writer.write(chunk)
        return writer

    def _save(
        self,
        writer: StateWriter | None,
        held: list[bytes] | None,
        unsaved: tuple[str, ...],
        same_meta: bool,
    ) -> str:
        """Write what is held (if anything), commit; "" or why not (blocking: in a thread)."""
        self._too_large, self._refused, self._committed = False, 0, None
        try:
            if writer is None:
                writer = self._start_writer(held or [])
            error = writer.commit(unsaved, same_meta=same_meta)
            self._committed = writer.committed
            # Refused by the disk limits before reaching the largest kept: past it all the same.
            self._too_large = writer.too_large or writer.offered > self.store.settings.max_bytes
            self._refused = writer.offered if writer.over_budget else 0
            return error
        except OSError as exc:
            if writer is not None:
                writer.abort()
            return f"the state could not be written: {exc.strerror or exc}"

    def _begin(self, snapshot_id: str, *, held: bool) -> None:
        """A new snapshot's first frame: whatever is left of the one before is dropped."""
        self._abort()
        self._snapshot_id = snapshot_id
        self._copy_error = ""
        self._stop_sent = False
        if held:
            self._held, self._held_bytes = [], 0

    async def on_snapshot_copy(self, message: SnapshotCopy) -> None:
        """A part of the snapshot being received that the state committed last already holds
        (protocol version 2): copied from that file, after checking it is the one named."""
        if message.snapshot_id.startswith(FORK_SNAPSHOT_PREFIX):
            self.forks.refuse_copy(message)  # a fork's state is sent whole
            return
        # Taken like a ``snapshot`` chunk whether or not one is expected (a snapshot may follow
        # one that outlasted the settle wait: dropping its copies would commit the rest as the
        # state). A copy into a snapshot that ended names no base this link holds.
        if message.snapshot_id != self._snapshot_id:
            self._begin(message.snapshot_id, held=True)
        if self._copy_error:
            return
        base = self._base
        if base is None or message.base != base[0] or message.snapshot_id == base[0]:
            self._copy_error = "it copies from a state the bridge does not hold"
            self._abort()
            return
        if self._writer is None:  # held so far: from now on it is written as it comes
            held, self._held = self._held or [], None
            self._writer = await anyio.to_thread.run_sync(self._start_writer, held)
        self.bytes_copied += message.length
        writer, offset, length = self._writer, message.offset, message.length
        if offset + length > base[1].size:  # refused whole, before any step
            await anyio.to_thread.run_sync(writer.copy, base[1], offset, length)
            return
        while True:  # one worker-thread call per step: none runs for long, each may be cancelled
            step = min(length, COPY_STEP)
            await anyio.to_thread.run_sync(writer.copy, base[1], offset, step)
            offset, length = offset + step, length - step
            if not length or writer.error:
                return

    def _abort(self) -> None:
        self._held = None
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
        if not self.settled.is_set():
            self.lost = "the sandbox ended before its state was saved"
        self.settled.set()
        self.forks.end()
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
                    return RestoreOutcome(
                        state, "it is larger than [sessions] state_max in bridge.toml"
                    )
                await stream_state(channel, restore_id, state, last=False)
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
