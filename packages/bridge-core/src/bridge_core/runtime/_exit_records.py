"""Exit codes of followed containers, as an engine's event stream reports their deaths.

One record for both engines' followers (:mod:`._podman_events`, :mod:`._docker_events`): an
auto-removed container can no longer be inspected, so its exit code is kept from the event; with
the ``State`` an inspect returns while it is still there, :meth:`ExitRecords.sandbox_exit` tells a
sandbox's end the same way for both engines. The
stream is read in a thread (:class:`EventFollower`, one loop for both: reopened with back-off,
replaying from the last event seen); the bridge asks from the event loop, hence the lock.
Bounded: only names the bridge follows are kept, at most :data:`EVENTS_KEPT` (oldest forgotten
first).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio

from bridge_core.runtime.base import SandboxExit

__all__ = ["EVENTS_KEPT", "EventFollower", "ExitRecords"]

logger = logging.getLogger(__name__)

EVENTS_KEPT = 4096
"""Followed names remembered at once (each is a short string and an int)."""
EXIT_RECORD_WAIT = 2.0
"""A removed container's death event can reach the events thread a moment after the removal."""
POLL_INTERVAL = 0.02
"""The events thread records into a dictionary; async readers poll it (no loop to notify)."""
RETRY_FIRST = 0.1
RETRY_MAX = 5.0
"""Back-off between failed reopenings of an event stream (the engine may be restarting)."""
REPLAY_MARGIN = 2
"""Seconds replayed before the last event seen: event times are whole seconds."""


class ExitRecords:
    """Followed container names → their exit code once their death was reported."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._followed: OrderedDict[str, int | None] = OrderedDict()

    def follow(self, name: str) -> None:
        """Record what happens to container ``name`` from now on (call before starting it)."""
        with self._lock:
            self._followed[name] = None
            while len(self._followed) > EVENTS_KEPT:
                self._followed.popitem(last=False)

    def forget(self, name: str) -> None:
        with self._lock:
            self._followed.pop(name, None)

    def following(self, name: str) -> bool:
        with self._lock:
            return name in self._followed

    def exit_code(self, name: str) -> int | None:
        """The exit code of ``name`` once the engine reported its death, else None."""
        with self._lock:
            return self._followed.get(name)

    async def recorded_exit(self, name: str) -> int | None:
        """The exit code of auto-removed container ``name`` once its death event arrives
        (waited for up to :data:`EXIT_RECORD_WAIT`); None if it never does."""
        with anyio.move_on_after(EXIT_RECORD_WAIT):
            while self.following(name):
                if (code := self.exit_code(name)) is not None:
                    return code
                await anyio.sleep(POLL_INTERVAL)
        return None

    async def sandbox_exit(
        self,
        name: str,
        state: Mapping[str, Any] | None,
        oom_killed: Callable[[int | None], Awaitable[bool]],
    ) -> SandboxExit:
        """How container ``name`` is, from the ``State`` its engine's inspect returned (None: no
        such container any more, the exit code then comes from its death event). ``oom_killed``
        is asked, with the exit code, when the engine did not say the kernel killed it."""
        if state is None:
            exit_code = await self.recorded_exit(name)
            if exit_code is None:
                return SandboxExit(running=False, error="container is gone")
            return SandboxExit(False, exit_code, await oom_killed(exit_code))
        running = bool(state.get("Running"))
        exit_code = None if running else state.get("ExitCode")
        oom = bool(state.get("OOMKilled"))
        if not running and not oom:
            oom = await oom_killed(exit_code)
        return SandboxExit(running, exit_code, oom, str(state.get("Error") or ""))

    def _died(self, name: str, code: int) -> None:
        """The event stream reported that ``name`` died with ``code`` (ignored if not followed)."""
        with self._lock:
            if name in self._followed:
                self._followed[name] = code


class EventFollower(ExitRecords):
    """Exit records kept by a thread that follows an engine's event stream from :meth:`start`
    to :meth:`close`, reopening it when it ends (with back-off, replaying what it missed). An
    engine's follower reads its stream into :meth:`_record` and names how a death reads in it:
    the ``Action`` (:attr:`died`) and the attribute with the exit code (:attr:`exit_code_key`)."""

    died = exit_code_key = ""

    def __init__(self, engine: str) -> None:
        super().__init__()
        self._engine = engine
        self._closed = threading.Event()
        self._since = int(time.time()) - REPLAY_MARGIN
        self._thread = threading.Thread(target=self._run, name=f"{engine}-events", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        """Stop reading: the thread ends once :meth:`_interrupt` has cut its blocked read."""
        self._closed.set()
        self._interrupt()

    def _interrupt(self) -> None:
        """Cut a read blocked in the thread (called from another thread)."""
        raise NotImplementedError

    def _read_stream(self) -> bool:
        """Follow the stream until it ends; True when it worked (the back-off starts over)."""
        raise NotImplementedError

    def _run(self) -> None:
        delay = RETRY_FIRST
        while not self._closed.is_set():
            try:
                if self._read_stream():
                    delay = RETRY_FIRST
            except Exception as exc:  # top-level handler of the thread: reopen, never die
                if self._closed.is_set():
                    return
                logger.debug("%s event stream broke (%r); reopening it", self._engine, exc)
            if self._closed.wait(delay):
                return
            delay = min(delay * 2, RETRY_MAX)

    def _record(self, event: object) -> None:
        """One decoded event: its time (epoch seconds) moves the replay point; a death is kept."""
        if not isinstance(event, dict):
            return
        if isinstance(when := event.get("time"), int):
            self._since = max(self._since, when - REPLAY_MARGIN)
        attributes = (event.get("Actor") or {}).get("Attributes") or {}
        code = str(attributes.get(self.exit_code_key, ""))
        if event.get("Action") == self.died and code.lstrip("-").isdigit():
            self._died(str(attributes.get("name", "")), int(code))
