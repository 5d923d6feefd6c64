"""The session manager: the host-side owner of every sandbox.

Every sandbox, reader and background job is a task of the manager's task group, entered by
``async with SessionManager(...)``; request handlers only wait on events. See ``docs/sessions.md``
for the user-facing behaviour (names, pool, limits, idle TTL, timeouts, crashes, output cap).
The table of sessions and its limits are :mod:`._table`'s; saved states, :mod:`._lifecycle`'s.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Coroutine
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import anyio
import anyio.lowlevel
from anyio.abc import TaskGroup

from bridge_core.errors import BridgeError, SandboxStartError, SessionLimitExceeded
from bridge_core.gateway import Gateway
from bridge_core.runtime.base import RuntimeSource
from bridge_core.sessions._execute import ExecutionRunner
from bridge_core.sessions._fleet import SandboxFleet
from bridge_core.sessions._lifecycle import RESTART, DurableSessions
from bridge_core.sessions._names import DEFAULT_SESSION, validate_session_name
from bridge_core.sessions._pool import SandboxPool
from bridge_core.sessions._sandbox import LiveSandbox
from bridge_core.sessions._session import (
    Session,
    Turn,
    ended_while_idle,
    mark_stale,
    take_turn,
    unavailable,
    with_start,
)
from bridge_core.sessions._spill import FullOutputs
from bridge_core.sessions._store import SessionStore
from bridge_core.sessions._table import SessionTable
from bridge_core.sessions.types import (
    ExecutionListener,
    ExecutionResult,
    SessionConfig,
    SessionStats,
)

__all__ = ["SessionManager", "SessionStats"]

logger = logging.getLogger("bridge_core.sessions")

START_ATTEMPTS = 2
"""A sandbox that failed to start (e.g. killed from outside while starting) is replaced once
before the caller gets ``unavailable``; a broken image still fails fast, after two starts."""
_CLIENT_GONE = "the client this session belonged to is gone (its MCP session ended)"


class SessionManager:
    """Named persistent sessions over sandboxes from a runtime backend.

    ``runtime`` is a backend or an async factory called lazily on first need (so a server starts
    instantly without podman); a factory's failure becomes an ``unavailable`` result, and the next
    execution tries again. A backend made by the factory is closed with the manager; a backend
    passed in belongs to the caller. Either may come as a
    :class:`~bridge_core.runtime.base.CheckedRuntime`: sandboxes then start from the image ID
    checked in its store, not by the image's name.
    """

    def __init__(
        self,
        config: SessionConfig,
        *,
        runtime: RuntimeSource,
        gateway: Gateway,
        state_dir: Path,
        store: SessionStore | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self._clock = clock
        self._fleet = SandboxFleet(config, runtime, gateway)
        self._table = SessionTable(config)
        self._saved = DurableSessions(
            store,
            config,
            sessions=self._table.sessions,
            ephemeral=self._table.ephemeral,
            drop=self._drop,
            replace=self._replace,
            forget_if_empty=self._table.forget_if_empty,
        )
        """Where sessions are saved (a store of None: they live and die with their containers)."""
        self._exit_stack: contextlib.AsyncExitStack | None = None
        """Owns the task group: its exit gets the body's exception, never a made-up None."""
        self._tg: TaskGroup | None = None
        self._pool: SandboxPool | None = None
        self._closed = False
        self._expiry = anyio.Event()
        """Set (then replaced) whenever an idle sweep expired a session."""
        self._outputs = FullOutputs(state_dir / "output")
        self._runner = ExecutionRunner(
            config,
            outputs=self._outputs,
            replace=self._replace,
            exit_reason=self._fleet.exit_reason,
            background=self._background,
            durable=lambda: self.durable,
        )

    # --- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        if self._tg is not None or self._closed:
            raise RuntimeError("a SessionManager can be entered only once")
        # Spill files of bridges that died without cleaning up (SIGKILL) go before any new one.
        removed = await anyio.to_thread.run_sync(self._outputs.remove_dead_owners)
        if removed:
            logger.info("removed %d spill(s) of bridges that are gone", removed)
        await anyio.to_thread.run_sync(self._saved.open)
        async with contextlib.AsyncExitStack() as stack:
            stack.callback(self._saved.close)  # a failed start releases the store too
            tg = await stack.enter_async_context(anyio.create_task_group())
            self._tg = tg
            self._fleet.open(tg)
            self._pool = SandboxPool(
                self.config.pool_size, start=self._fleet.start, discard=self._discard, task_group=tg
            )
            if self.config.pool_size:
                self._pool.preimport = await self._saved.pool_hint()
            self._pool.fill()
            if self.config.idle_ttl > 0:
                tg.start_soon(self._reap_idle)
            self._exit_stack = stack.pop_all()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        """Stop every container this manager started: bounded, and even when cancelled."""
        tg, pool, stack = self._tg, self._pool, self._exit_stack
        if tg is None or pool is None or stack is None:
            raise RuntimeError("the session manager was not entered")
        self._closed = True
        self._fleet.closed = True  # from now on, sandboxes are stopped by stop_all() only
        for live in pool.drain():
            live.close()
        tg.cancel_scope.cancel()
        try:
            # The body's exception goes to the task group (and on to the caller) with any error
            # of its tasks: nothing raised inside ``async with`` is lost on the way out.
            return await stack.__aexit__(exc_type, exc, tb)
        finally:
            self._table.sessions.clear()
            await self._fleet.stop_all()
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self._outputs.remove_own)

    # --- public API --------------------------------------------------------------------------

    @property
    def durable(self) -> bool:
        """Whether sessions are saved (they survive restarts, crashes and hibernation)."""
        return self._saved.enabled

    @property
    def store_refusal(self) -> str:
        """Why sessions are not saved although a store was configured ("" when they are)."""
        return self._saved.refusal

    async def execute(
        self,
        code: str,
        *,
        session: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 (the run_python tool's own argument)
        reset: bool = False,
        listener: ExecutionListener | None = None,
        client: str | None = None,
    ) -> ExecutionResult:
        """Run ``code`` in ``client``'s ``session`` (the default session if None); never raises for
        sandbox, runtime or user-code failures, which are results with a status and notices.

        ``client`` names whose sessions these are (None: the only client, as over stdio); each
        client sees only its own sessions. Raises ValueError for a bad session name or timeout,
        and :class:`~bridge_core.errors.SessionLimitExceeded` when a new session would exceed
        ``max_sessions`` or ``max_sessions_per_client``. Cancelling the caller interrupts the
        code and propagates.
        """
        name = validate_session_name(DEFAULT_SESSION if session is None else session)
        limit = self._check_timeout(timeout)
        self._check_open()
        if not self.config.persist:
            return await self._execute_ephemeral(client, name, code, limit, listener)
        sess = self._table.session(
            client, name, self._clock, durable=self.durable, refusal=self.store_refusal
        )
        sess.users += 1
        try:
            if not await take_turn(sess.turn, limit):
                return unavailable(
                    name,
                    f"gave up after waiting {limit:g} s for the previous execution in session "
                    f"{name!r} to finish (executions in one session run one at a time)",
                    [],
                )
            turn = Turn()
            try:
                notices = self._prepare(sess, reset)
                asked = anyio.current_time()
                running = sess.live is not None and sess.live.alive
                live = await self._sandbox_for(sess, notices)
                if isinstance(live, ExecutionResult):
                    return live
                # The code's own time starts now: starting a container is not the code's.
                sent = anyio.current_time()
                result = await self._runner.run(
                    sess, live, code, limit, sent + limit, listener, notices, turn
                )
                return result if running else with_start(result, sent - asked)
            finally:
                if not turn.handed_off:
                    sess.turn.release()
        finally:
            sess.users -= 1
            sess.last_used = self._clock()
            self._table.forget_if_empty(sess)

    async def reset(self, session: str | None = None, *, client: str | None = None) -> None:
        """Give ``client``'s ``session`` a fresh namespace (its sandbox is replaced); waits for
        its turn."""
        name = validate_session_name(DEFAULT_SESSION if session is None else session)
        self._table.expired.pop((client, name), None)
        sess = self._table.sessions.get((client, name))
        if sess is None:
            await self._saved.forget(client, name)
            return
        sess.users += 1
        try:
            async with sess.turn:
                self._drop(sess)
                sess.notices.clear()
                await self._saved.forget(client, name)
        finally:
            sess.users -= 1
            sess.last_used = self._clock()
            self._table.forget_if_empty(sess)

    async def wait_warm(self) -> None:
        """Wait until the warm pool holds ``pool_size`` started sandboxes (callers bound it)."""
        assert self._pool is not None, "not entered"
        await self._pool.wait_ready()

    def session_names(self, client: str | None = None) -> list[str]:
        """Names of ``client``'s open sessions, sorted."""
        return self._table.names(client)

    def holds_sessions(self, client: str | None) -> bool:
        """Whether ``client`` has an open session (its state would be lost with the client)."""
        return self._table.holds(client)

    async def close_client(self, client: str | None) -> list[str]:
        """End every session of ``client`` and stop their sandboxes; return the sessions' names.

        For a client that is gone (its MCP session ended): nobody can address these sessions any
        more. An execution still running in one ends with its sandbox. Returns once the sandboxes
        are stopped (each stop is bounded and never raises).
        """
        closed, sandboxes = [], []
        for key, sess in list(self._table.sessions.items()):
            if key[0] != client:
                continue
            # Out of the table before the first await: nothing can reach these sessions now.
            del self._table.sessions[key]
            self._table.expired.pop(key, None)
            if sess.live is not None:
                sess.live.close()
                sandboxes.append(sess.live)
                sess.live = None
            closed.append(sess.name)
        # Nobody can address them again: their saved states go too (and any hibernated one).
        await self._saved.forget_client(client)
        if sandboxes and not self._closed:  # once closing, the shutdown stops everything
            async with anyio.create_task_group() as stops:
                for live in sandboxes:
                    # Killed, not stopped: nobody waits for a graceful end of code nobody reads.
                    stops.start_soon(self._fleet.stop, live, True)
        return sorted(closed)

    @property
    def stats(self) -> SessionStats:
        pool = self._pool
        return SessionStats(
            sessions=len(self._table.sessions),
            live_sandboxes=len(self._fleet.live),
            sandboxes_started=self._fleet.started,
            pool_ready=pool.ready if pool else 0,
            pool_hits=pool.hits if pool else 0,
            pool_misses=pool.misses if pool else 0,
        )

    def expire_idle(self) -> list[str]:
        """Stop the sandboxes of sessions idle for ``idle_ttl``; return their names.

        Runs periodically in the background; public so that a caller (or a test with its own
        clock) can force a sweep.
        """
        now, ttl = self._clock(), self.config.idle_ttl
        expired = []
        for key, sess in list(self._table.sessions.items()):
            if ttl <= 0 or sess.busy or now - sess.last_used < ttl:
                continue
            name = key[1]
            if self.durable:
                # Hibernates: its container stops once its last snapshot is on disk; its next
                # call restores it.
                if sess.live is not None and self._background(self._saved.hibernate, sess):
                    expired.append(name)
                continue
            del self._table.sessions[key]
            if sess.live is not None:
                self._discard(sess.live)
                self._table.remember_expired(key, now)
            expired.append(name)
        if expired:
            logger.info("sessions %s expired after %g s idle", expired, ttl)
            self._expiry.set()
            self._expiry = anyio.Event()
        return expired

    # --- sessions ----------------------------------------------------------------------------

    def _check_timeout(self, timeout: float | None) -> float:
        if timeout is None:
            return min(self.config.default_timeout, self.config.max_timeout)
        if not timeout > 0 or timeout > self.config.max_timeout:
            raise ValueError(
                f"timeout must be more than 0 and at most {self.config.max_timeout:g} s "
                f"(MCP_BRIDGE_MAX_TIMEOUT), got {timeout!r}"
            )
        return float(timeout)

    def _check_open(self) -> None:
        if self._tg is None or self._closed:
            raise RuntimeError("the session manager is not running (use `async with`)")

    def _prepare(self, sess: Session, reset: bool) -> list[str]:
        if reset:
            self._drop(sess)
            sess.notices.clear()
            sess.forget_saved = True
            sess.grant_scope = uuid.uuid4().hex  # approvals given before the reset end with it
            return [f"session {sess.name!r} was reset as requested: fresh namespace"]
        notices, sess.notices = sess.notices, []
        return notices

    async def _sandbox_for(
        self, sess: Session, notices: list[str]
    ) -> LiveSandbox | ExecutionResult:
        """The session's sandbox, started (or taken from the pool) if it has none: bounded by
        ``start_timeout``, not by the call's timeout (see docs/decisions/0053)."""
        if self._table.closed_by_client(sess):
            return unavailable(sess.name, _CLIENT_GONE, notices)
        start_by = anyio.current_time() + self.config.start_timeout
        live = sess.live
        if live is not None and not live.alive:
            reason = live.failure_reason
            with anyio.move_on_at(start_by):
                reason = await self._fleet.exit_reason(live)
            notices.append(ended_while_idle(sess.name, live, reason, durable=self.durable))
            self._drop(sess)
        if sess.forget_saved:
            sess.forget_saved = False
            await self._saved.forget(sess.client, sess.name)
        if sess.live is None:
            if self.durable:
                try:
                    with anyio.move_on_at(start_by):  # past it, _take says no sandbox in time
                        await self._saved.make_room(sess)
                except SessionLimitExceeded as exc:
                    return unavailable(sess.name, str(exc), notices)
            # A sandbox started for this session imports what its saved state needs at once.
            hint = await self._saved.hint(sess.client, sess.name)
            taken = await self._take(sess.name, start_by, notices, hint)
            if isinstance(taken, ExecutionResult):
                return taken
            if self._table.closed_by_client(sess):  # the client went away while its sandbox started
                self._discard(taken, kill=True)
                return unavailable(sess.name, _CLIENT_GONE, notices)
            sess.live = taken
            if self.durable:
                restored = await self._saved.restore(sess, taken, start_by, notices)
                if restored is RESTART:
                    return await self._sandbox_for(sess, notices)
                if isinstance(restored, ExecutionResult):
                    return restored
        else:
            await self._saved.settle(sess, start_by, notices)
        return sess.live

    async def _take(
        self, name: str, start_by: float, notices: list[str], preimport: tuple[str, ...] = ()
    ) -> LiveSandbox | ExecutionResult:
        assert self._pool is not None
        try:
            with anyio.move_on_at(start_by):
                for attempt in range(1, START_ATTEMPTS + 1):
                    try:
                        live = await self._pool.take(preimport)
                    except SandboxStartError as exc:
                        # The failed start may not even be this caller's: a warm-pool refill
                        # killed from outside hands its error to whoever waits first.
                        if attempt == START_ATTEMPTS or self._pool.closed:
                            raise
                        logger.warning("sandbox start failed, trying once more: %s", exc)
                        continue
                    live.session = name
                    live.not_durable = self._saved.why_not_saved()
                    return live
        except BridgeError as exc:
            return unavailable(name, str(exc), notices)
        return unavailable(
            name,
            f"no sandbox could be started within {self.config.start_timeout:g} s "
            "([sandbox] start_timeout in bridge.toml)",
            notices,
        )

    def _drop(self, sess: Session) -> None:
        if sess.live is not None:
            mark_stale(sess, sess.live)
            self._discard(sess.live)
            sess.live = None

    async def _execute_ephemeral(
        self,
        client: str | None,
        name: str,
        code: str,
        limit: float,
        listener: ExecutionListener | None,
    ) -> ExecutionResult:
        """``persist=false``: a fresh sandbox for this one execution, stopped right after."""
        self._table.check_capacity(client)
        self._table.ephemeral[client] += 1
        try:
            notices: list[str] = []
            asked = anyio.current_time()
            live = await self._take(name, asked + self.config.start_timeout, notices)
            if isinstance(live, ExecutionResult):
                return live
            sent = anyio.current_time()
            sess = Session(name, self._clock(), client=client)
            sess.live = live
            try:
                result = await self._runner.run(
                    sess, live, code, limit, sent + limit, listener, notices, Turn(), ephemeral=True
                )
                return with_start(result, sent - asked)
            finally:
                self._drop(sess)
        finally:
            self._table.ephemeral[client] -= 1
            if not self._table.ephemeral[client]:
                del self._table.ephemeral[client]

    async def _reap_idle(self) -> None:
        interval = min(max(self.config.idle_ttl / 4, 0.05), 30.0)
        while True:
            await anyio.sleep(interval)
            self.expire_idle()

    # --- sandboxes ---------------------------------------------------------------------------

    def _background(self, func: Callable[..., Coroutine[Any, Any, object]], *args: object) -> bool:
        """Run ``func`` in the manager's task group; False if the manager is closing."""
        # An execution can finish while the manager closes: its task group may be gone by then,
        # and the shutdown stops every recorded sandbox anyway.
        if self._tg is None or self._closed:
            return False
        self._tg.start_soon(func, *args)
        return True

    def _discard(self, live: LiveSandbox, *, kill: bool = False) -> None:
        if (shared := live.sandbox.shared_dir) is not None:
            self._outputs.forget(shared)  # its full outputs go with its directory
        self._fleet.discard(live, kill=kill)

    def _replace(self, sess: Session, live: LiveSandbox, *, kill: bool) -> None:
        """Throw away ``sess``'s sandbox ``live``; the next execution gets a fresh one."""
        if sess.live is live:
            mark_stale(sess, live)
            sess.live = None
        self._discard(live, kill=kill)
