"""The durable lifecycle of the manager's sessions: restore, settle, hibernate, forget.

A durable session outlives its containers: a fresh sandbox of the session gets its saved state
(:meth:`DurableSessions.restore`), the next execution starts only once the last snapshot is on
disk (:meth:`DurableSessions.settle`), the least recently used idle session hibernates to make
room for another (:meth:`DurableSessions.make_room`), and a reset forgets the saved state. A fork
asked for by sandbox code is written into a new name of the same client (see ``_durable``); the
name must be free, which only the manager's table of sessions and the store can tell.

The manager owns the sessions and their sandboxes; this module owns what happens to their saved
state, through the few callbacks the manager hands it.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Final

import anyio

from bridge_core.sessions._checkpoints import slot_names
from bridge_core.sessions._durable import DurableLink
from bridge_core.sessions._hibernation import next_to_hibernate
from bridge_core.sessions._sandbox import LiveSandbox
from bridge_core.sessions._session import Session, unavailable
from bridge_core.sessions._store import SessionStore
from bridge_core.sessions.types import ExecutionResult, SessionConfig

__all__ = ["RESTART", "DurableSessions"]

logger = logging.getLogger("bridge_core.sessions")

SNAPSHOT_WAIT = 60.0
"""Longest wait for the snapshot of the previous execution before the next one runs or the
sandbox hibernates (a small state takes milliseconds; one of hundreds of MB, seconds)."""
POOL_HINT_STATES = 8
"""Saved states whose hints a one-client bridge's warm pool imports (the most recently used)."""
RESTORE_WAIT = 120.0  # longest a sandbox may take to load a saved state (and the start timeout)

_Key = tuple[str | None, str]


class _Restart:
    """The saved state killed the sandbox that loaded it (it is deleted): start another one."""


RESTART: Final = _Restart()


class DurableSessions:
    """Saved state of the manager's sessions (a store that is None or not usable: none)."""

    def __init__(
        self,
        store: SessionStore | None,
        config: SessionConfig,
        *,
        sessions: Mapping[_Key, Session],
        ephemeral: Counter[str | None],
        drop: Callable[[Session], None],
        replace: Callable[..., None],
        forget_if_empty: Callable[[Session], None],
    ) -> None:
        self._store = store
        self.config = config
        self._sessions = sessions
        self._ephemeral = ephemeral
        self._drop = drop
        self._replace = replace
        self._forget_if_empty = forget_if_empty
        self.forks_pending: dict[_Key, anyio.Event] = {}
        """Names a fork is being written into, each with an event set once it is saved or
        refused: taken meanwhile, and a session of that name waits for it before restoring."""

    @property
    def enabled(self) -> bool:
        """Whether sessions are saved (they survive restarts, crashes and hibernation)."""
        return self._store is not None and self._store.usable and self.config.persist

    @property
    def refusal(self) -> str:
        """Why sessions are not saved although a store was configured ("" when they are)."""
        return self._store.refusal if self._store is not None else ""

    def why_not_saved(self) -> str:
        """Why this bridge keeps no saved state, for an error that needs one (e.g. a fork)."""
        if not self.config.persist:
            return "MCP_BRIDGE_SESSION_PERSIST is false, so nothing of a session is kept"
        if self._store is None:
            return "this bridge has no session store"
        return self._store.refusal or "the session store is not open"

    def name_taken(self, client: str | None, name: str) -> bool:
        """Whether ``client`` has a session ``name``: open, hibernated or saved."""
        if (client, name) in self._sessions:
            return True
        return self._store is not None and self._store.has_saved(client, name)

    async def hint(self, client: str | None, name: str) -> tuple[str, ...]:
        """The modules the saved state of ``client``'s session ``name`` needs (() if none)."""
        if not self.enabled:
            return ()
        assert self._store is not None
        return await anyio.to_thread.run_sync(self._store.hint, client, name)

    async def pool_hint(self) -> tuple[str, ...]:
        """What the warm pool's sandboxes import as they start: the modules named by the
        settings, then those the most recently used saved sessions of the one client of a stdio
        bridge need, within a hint's limits."""
        from bridge_protocol.hints import encode_hint  # see _state_files.hint_of

        named = self.config.pool_imports
        if not self.enabled or not self.config.pool_preimport:
            saved: tuple[str, ...] = ()
        else:
            assert self._store is not None
            saved = await anyio.to_thread.run_sync(self._store.recent_hints, None, POOL_HINT_STATES)
        return tuple(filter(None, encode_hint([*named, *saved]).decode("ascii").split("\n")))

    def open(self) -> None:
        """Take the store (blocking: run in a thread)."""
        if self._store is not None and self.config.persist:
            self._store.open()

    def close(self) -> None:
        if self._store is not None:
            self._store.close()

    async def restore(
        self, sess: Session, live: LiveSandbox, start_by: float, notices: list[str]
    ) -> ExecutionResult | _Restart | None:
        """Load the session's saved state into its fresh sandbox ``live`` (None: ready)."""
        assert self._store is not None
        link = live.durable = DurableLink(self._store, sess.client, sess.name, forks=self)
        with anyio.move_on_at(min(start_by, anyio.current_time() + RESTORE_WAIT)) as waiting:
            while (forking := self.forks_pending.get((sess.client, sess.name))) is not None:
                await forking.wait()  # what it saved (if anything) is then this session's
            outcome = await link.restore(live.channel)
        if waiting.cancelled_caught:
            self._replace(sess, live, kill=True)
            return unavailable(
                sess.name,
                f"the saved state of session {sess.name!r} did not load within "
                f"{self.config.start_timeout:g} s ([sandbox] start_timeout in bridge.toml); "
                "raise it, or reset the session",
                notices,
            )
        if notice := outcome.notice(sess.name, latest=not sess.stale):
            notices.append(notice)
        sess.stale = False
        if not outcome.error:
            return None
        logger.warning("saved state of session %r refused: %s", sess.name, outcome.error)
        await self.forget(sess.client, sess.name, checkpoints=False)
        link.forgotten()
        if not live.alive:  # loading it killed the sandbox (e.g. out of memory): start afresh
            self._replace(sess, live, kill=True)
            # Its state is deleted now: the next sandbox gets an empty restore (bounded by the
            # start timeout, like any start).
            return RESTART
        return None

    @staticmethod
    async def settle(sess: Session, start_by: float, notices: list[str]) -> None:
        """Wait until the snapshot of ``sess``'s previous execution is on disk (bounded).

        Part of getting a sandbox to run on: bounded by the start timeout too.
        """
        live = sess.live
        if live is None or live.durable is None:
            return
        if not live.durable.settled.is_set():  # waiting on a set event still yields a turn
            with anyio.move_on_at(min(start_by, anyio.current_time() + SNAPSHOT_WAIT)):
                await live.durable.settled.wait()
        notices.extend(live.durable.notices)
        live.durable.notices.clear()
        if not live.durable.settled.is_set():
            # Said now: a crash before it lands restores an older state, which the restore's
            # notice alone would present as the state after the last successful execution.
            notices.append(
                f"the state of session {sess.name!r} after the previous execution is still being "
                "saved: this call runs on; a restart or crash before it is saved would bring back "
                "an older state"
            )

    async def make_room(self, sess: Session) -> None:
        """Hibernate idle sessions whose state is saved until ``sess`` may have a container.

        Raises :class:`SessionLimitExceeded` when every live session is busy or holds work that
        could not be saved (see :func:`next_to_hibernate`).
        """
        while victim := await next_to_hibernate(
            self._sessions.values(), sess, self.config, self._ephemeral, wait=SNAPSHOT_WAIT
        ):
            await self.hibernate(victim, to_make_room=True)

    async def hibernate(self, sess: Session, *, to_make_room: bool = False) -> bool:
        """Stop ``sess``'s container once its last snapshot is saved; its next call restores.

        ``to_make_room``: for another session's start, which must not cost ``sess`` its work, so
        a session whose last state could not be saved (or is not saved in time) keeps its
        container (False is returned; the caller picks another). Otherwise (idle expiry) it
        hibernates all the same, and its next call is told what was lost.
        """
        sess.users += 1
        try:
            async with sess.turn:
                live = sess.live
                if live is None:
                    return True
                if (link := live.durable) is not None:
                    with anyio.move_on_after(SNAPSHOT_WAIT):
                        await link.settled.wait()
                    lost = link.lost if link.settled.is_set() else "it was still being saved"
                    if lost and to_make_room:
                        return False
                    if lost:
                        sess.stale = True  # its restore must not claim the latest state
                        sess.notices.append(
                            f"session {sess.name!r} was idle for more than "
                            f"{self.config.idle_ttl:g} s ([sessions] idle_ttl in bridge.toml), so "
                            "its sandbox was stopped, but its state after its last execution was "
                            f"not saved ({lost}): the work since its last saved state is lost"
                        )
                    else:
                        sess.notices.extend(link.notices)
                    link.notices.clear()
                self._drop(sess)
                logger.info("session %r hibernated", sess.name)
                return True
        finally:
            sess.users -= 1
            self._forget_if_empty(sess)

    async def forget(self, client: str | None, name: str, *, checkpoints: bool = True) -> None:
        """Delete the saved state of ``client``'s session ``name`` (a reset), and its
        checkpoints unless ``checkpoints`` is false (a state that could not be loaded)."""
        if self._store is not None and self._store.usable:
            store = self._store
            names = [name, *(slot_names(name) if checkpoints else ())]

            def delete() -> None:
                for each in names:
                    store.delete(client, each)

            await anyio.to_thread.run_sync(delete)

    async def forget_client(self, client: str | None) -> None:
        """Delete every saved state of ``client`` (it is gone: nobody can address them again)."""
        if self._store is not None and self._store.usable:
            await anyio.to_thread.run_sync(self._store.delete_client, client)
