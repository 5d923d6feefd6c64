"""A durable session's forks: a new session of the same client from the state of this one.

A fork (``runtime.fork_session(name)`` in sandbox code) is a ``fork_session`` request naming the
new session and the id of the snapshot the sandbox takes right after sending it; the snapshot's
frames (ids starting with :data:`~bridge_protocol.FORK_SNAPSHOT_PREFIX`, never the session's own
state) are written into the new name of the same client, which must be free, and the request is
answered once they are saved or refused. One fork at a time per sandbox.

The :class:`~._durable.DurableLink` of the forking sandbox owns its :class:`Forks`; the reader
reserves the name (:meth:`Forks.begin`) before the snapshot's frames that follow, and the call
waits for them to be saved (:meth:`Forks.finish`). The name must be free, which only the
manager's table of sessions and the store can tell (:class:`ForkNames`).

A checkpoint (``runtime.checkpoint(label)``, see :mod:`._checkpoints`) is the same kind of
snapshot, written into one of the session's checkpoint slots instead of a new session: it takes
the same one place (one fork or checkpoint at a time per sandbox) and replaces the slot's state.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any, Protocol

import anyio
from bridge_protocol import FORK_SNAPSHOT_PREFIX, ErrorCode, Snapshot, SnapshotCopy

from bridge_core.gateway import CallFailed
from bridge_core.sessions._names import validate_session_name
from bridge_core.sessions._state_writer import StateWriter
from bridge_core.sessions._store import Epoch, SessionStore

__all__ = ["FORK_METHOD", "ForkNames", "Forks", "PendingFork"]

FORK_METHOD = "fork_session"
"""The request sandbox code's ``runtime.fork_session`` sends."""
MAX_SNAPSHOT_ID = 128
"""Characters of a fork's snapshot id (the sandbox client's are about 30)."""


class ForkNames(Protocol):
    """Which names of a client are taken, for forks (the manager's sessions and the store)."""

    forks_pending: dict[tuple[str | None, str], anyio.Event]

    def name_taken(self, client: str | None, name: str) -> bool: ...


class PendingFork:
    """A fork being written: its name is reserved until :meth:`Forks.finish` returns."""

    __slots__ = ("checkpoint", "done", "epoch", "error", "name", "size", "snapshot_id", "writer")

    def __init__(self, snapshot_id: str, name: str, epoch: Epoch, checkpoint: str = "") -> None:
        self.snapshot_id = snapshot_id
        self.name = name
        """The new session's name; for a checkpoint, its slot's name in the store."""
        self.epoch = epoch
        self.checkpoint = checkpoint
        """The label of the checkpoint this snapshot is ("" for a fork)."""
        self.writer: StateWriter | None = None
        self.error = ""
        self.size = 0
        """Bytes of the state once saved."""
        self.done = anyio.Event()


class Forks:
    """The forks of one durable sandbox's session: one at a time, each into a free name."""

    def __init__(
        self, store: SessionStore, client: str | None, name: str, names: ForkNames | None
    ) -> None:
        self.store = store
        self.client = client
        self.name = name
        self._names = names
        self._fork: PendingFork | None = None

    def begin(self, params: Mapping[str, Any]) -> PendingFork:
        """Reserve the fork's new name (called by the reader, before the snapshot's frames).

        Raises :class:`CallFailed` for a bad or taken name, or a fork already under way.
        """
        untrusted_name, untrusted_id = params.get("name"), params.get("snapshot_id")
        if not isinstance(untrusted_name, str):
            raise CallFailed(ErrorCode.INVALID_ARGUMENTS, "the new session's name must be a str")
        try:
            name = validate_session_name(untrusted_name)
        except ValueError as exc:
            raise CallFailed(ErrorCode.INVALID_ARGUMENTS, str(exc)) from None
        snapshot_id = self._snapshot_id(untrusted_id)
        names = self._names
        assert names is not None, "a durable link of the manager always has its names"
        self._one_at_a_time()
        if names.name_taken(self.client, name) or (self.client, name) in names.forks_pending:
            raise CallFailed(
                ErrorCode.INVALID_ARGUMENTS,
                f"session {name!r} already exists (open, hibernated or saved): a fork never "
                "replaces a session; choose another name, or reset that session first",
            )
        fork = self._fork = PendingFork(snapshot_id, name, self.store.epoch(self.client, name))
        names.forks_pending[(self.client, name)] = anyio.Event()
        return fork

    def begin_checkpoint(self, untrusted_id: object, slot: str, label: str) -> PendingFork:
        """Take the one place for a checkpoint's snapshot into the store's ``slot`` (a valid
        ``label`` chosen by :mod:`._checkpoints`); raises :class:`CallFailed` as :meth:`begin`."""
        snapshot_id = self._snapshot_id(untrusted_id)
        self._one_at_a_time()
        epoch = self.store.epoch(self.client, slot)
        fork = self._fork = PendingFork(snapshot_id, slot, epoch, checkpoint=label)
        return fork

    @staticmethod
    def _snapshot_id(untrusted_id: object) -> str:
        if (
            not isinstance(untrusted_id, str)
            or not untrusted_id.startswith(FORK_SNAPSHOT_PREFIX)
            or len(untrusted_id) > MAX_SNAPSHOT_ID
        ):
            raise CallFailed(ErrorCode.INVALID_ARGUMENTS, "a fork needs its snapshot's id")
        return untrusted_id

    def _one_at_a_time(self) -> None:
        if (fork := self._fork) is not None:
            doing = (
                f"saving checkpoint {fork.checkpoint!r}"
                if fork.checkpoint
                else f"forking into {fork.name!r}"
            )
            raise CallFailed(
                ErrorCode.INVALID_ARGUMENTS,
                f"session {self.name!r} is already {doing}: one fork or checkpoint at a time",
            )

    async def finish(self, fork: PendingFork) -> str:
        """Wait until ``fork`` is saved; return its new name. Releases its reservation."""
        try:
            await fork.done.wait()
        finally:
            self._end(fork)
        if fork.error:
            what = (
                f"checkpoint {fork.checkpoint!r} was not saved"
                if fork.checkpoint
                else f"session {fork.name!r} was not created"
            )
            raise CallFailed(ErrorCode.TOOL_ERROR, f"{what}: {fork.error}")
        return fork.name

    def _end(self, fork: PendingFork) -> None:
        if fork.writer is not None:
            fork.writer.abort()  # not committed: cancelled, or the sandbox ended
            fork.writer = None
        if self._fork is fork:
            self._fork = None
        if self._names is not None and (
            event := self._names.forks_pending.pop((self.client, fork.name), None)
        ):
            event.set()

    async def on_snapshot(self, message: Snapshot) -> None:
        """A frame of a fork's snapshot (its id starts with ``FORK_SNAPSHOT_PREFIX``)."""
        fork = self._fork
        if fork is None or fork.snapshot_id != message.snapshot_id or fork.done.is_set():
            return  # refused, cancelled or over: its frames go nowhere
        if fork.writer is None and not message.error and not fork.error:
            fork.writer = await anyio.to_thread.run_sync(
                self.store.writer, self.client, fork.name, fork.epoch
            )
        writer = fork.writer
        if writer is not None and message.data:
            await anyio.to_thread.run_sync(writer.write, message.data)
        if not message.last:
            return
        fork.writer = None
        error = message.error[:500]
        if writer is not None and not error and fork.checkpoint:
            try:
                error = await anyio.to_thread.run_sync(
                    partial(writer.commit, message.unsaved, checkpoint=fork.checkpoint)
                )
            except OSError as exc:
                writer.abort()
                error = f"the state could not be written: {exc.strerror or exc}"
        elif writer is not None and not error:
            assert self._names is not None
            if self._names.name_taken(self.client, fork.name):
                # A session of that name was opened meanwhile: it is the user's, not the fork's.
                writer.abort()
                error = f"a session named {fork.name!r} was opened while the fork was saved"
            else:
                try:
                    error = await anyio.to_thread.run_sync(
                        writer.commit_new, message.unsaved, self.name
                    )
                except OSError as exc:
                    writer.abort()
                    error = f"the state could not be written: {exc.strerror or exc}"
        elif writer is not None:
            writer.abort()
        fork.error = error or fork.error or ""
        fork.size = 0 if writer is None else writer.size
        fork.done.set()

    def refuse_copy(self, message: SnapshotCopy) -> None:
        """A ``snapshot_copy`` into a fork's snapshot: a fork's state is sent whole, so the
        fork is refused."""
        fork = self._fork
        if fork is not None and fork.snapshot_id == message.snapshot_id and not fork.error:
            fork.error = "a fork's or checkpoint's state must be sent whole"
            if fork.writer is not None:
                fork.writer.abort()
                fork.writer = None

    def end(self) -> None:
        """The sandbox is gone: a fork still being written is refused."""
        if (fork := self._fork) is not None and not fork.done.is_set():
            fork.error = "the sandbox ended before the state was saved"
            fork.done.set()
