"""The bridge's runs, by id: who may see each (its owner), and the bounds on what they hold —
unfinished runs per client and for the bridge, finished runs kept per client (oldest dropped
first, each for :data:`KEEP_FINISHED` seconds) and the bytes their results hold."""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio
import mcp_types as types
from anyio.abc import TaskGroup
from bridge_core.client_link import Capability
from bridge_core.errors import BridgeError

from mcp_code_execution_mode._runs import Run, RunListener

if TYPE_CHECKING:
    from bridge_core.sessions.types import ExecutionListener, ExecutionResult

__all__ = [
    "KEEP_FINISHED",
    "MAX_KEPT_BYTES",
    "MAX_KEPT_BYTES_PER_CLIENT",
    "MAX_RUNS_PER_CLIENT",
    "RunLimitExceeded",
    "Runs",
    "UnknownRun",
    "shown_keys",
]

MAX_RUNS_PER_CLIENT = 16
"""Unfinished runs one client may have; past it a new call is refused (a model that starts long
runs and never collects them cannot make the bridge hold ever more sandboxes' work)."""
MAX_FINISHED_PER_CLIENT = 32
"""Finished runs kept per client for collection; past it the oldest one is dropped."""
MAX_RUNS = 1024
"""Runs the bridge holds for all its clients (HTTP clients without a token are one client per
MCP session: many of them must not add up without bound); past it the oldest finished ones are
dropped, and with none finished a new call is refused."""
KEEP_FINISHED = 600.0
"""Seconds a finished run's result stays available (the task's ``ttlMs``)."""
MAX_KEPT_BYTES_PER_CLIENT = 64 * 1024 * 1024
"""Bytes of finished results one client's runs hold for collection (a result may carry 32 MiB
of images, held again base64-encoded once sent: 32 kept runs must not hold 2 GiB); past it the
client's oldest finished runs are dropped, its newest one always stays."""
MAX_KEPT_BYTES = 512 * 1024 * 1024
"""Bytes of finished results the bridge holds for all its clients; past it the oldest finished
runs are dropped, whoever they belong to."""


class UnknownRun(BridgeError):
    """No run of this client has that id (it never existed, ended long ago, or is another's)."""


class RunLimitExceeded(BridgeError):
    """The client has :data:`MAX_RUNS_PER_CLIENT` unfinished runs."""


class Runs:
    """Every run of this bridge, by id; see the module docstring."""

    def __init__(self, task_group: TaskGroup) -> None:
        self._tg = task_group
        self._runs: dict[str, Run] = {}

    @classmethod
    @asynccontextmanager
    async def open(cls) -> AsyncIterator[Runs]:
        async with anyio.create_task_group() as tg:
            yield cls(tg)
            tg.cancel_scope.cancel()

    def __len__(self) -> int:
        return len(self._runs)

    def _prune(self, *, starting: bool = True) -> None:
        """Drop finished runs past their time, then the oldest ones past the bounds (a run a
        request is still answering from stays); ``starting``: room for one more run is made."""
        now = time.monotonic()
        finished = [r for r in self._runs.values() if r.finished_at is not None and not r.listener]
        finished.sort(key=lambda r: r.finished_at or 0.0)
        per_owner: dict[str | None, int] = {}
        owner_bytes: dict[str | None, int] = {}
        newest: dict[str | None, Run] = {}
        total_bytes = 0
        for run in finished:
            per_owner[run.owner] = per_owner.get(run.owner, 0) + 1
            owner_bytes[run.owner] = owner_bytes.get(run.owner, 0) + run.kept_bytes
            total_bytes += run.kept_bytes
            newest[run.owner] = run
        excess = len(self._runs) - MAX_RUNS + (1 if starting else 0)
        for run in finished:
            expired = now - (run.finished_at or now) > KEEP_FINISHED
            heavy = (
                owner_bytes[run.owner] > MAX_KEPT_BYTES_PER_CLIENT and newest[run.owner] is not run
            )
            if (
                expired
                or excess > 0
                or per_owner[run.owner] > MAX_FINISHED_PER_CLIENT
                or heavy
                or total_bytes > MAX_KEPT_BYTES
            ):
                self._runs.pop(run.id, None)
                per_owner[run.owner] -= 1
                owner_bytes[run.owner] -= run.kept_bytes
                total_bytes -= run.kept_bytes
                excess -= 1

    def start(
        self,
        owner: str | None,
        capabilities: frozenset[Capability],
        execution: Callable[[ExecutionListener], Awaitable[ExecutionResult | types.CallToolResult]],
    ) -> Run:
        """Start ``execution`` as a new run of ``owner``; raises :class:`RunLimitExceeded`."""
        self._prune()
        if len(self._runs) >= MAX_RUNS:
            raise RunLimitExceeded(
                f"the bridge holds {len(self._runs)} unfinished runs of its clients (the limit "
                f"is {MAX_RUNS}); try again when some have ended"
            )
        live = sum(1 for r in self._runs.values() if r.owner == owner and not r.finished)
        if live >= MAX_RUNS_PER_CLIENT:
            raise RunLimitExceeded(
                f"this client already has {live} runs that have not finished (the limit is "
                f"{MAX_RUNS_PER_CLIENT}); wait for them, or stop one with "
                "run_python(cancel=RUN_ID) or tasks/cancel"
            )
        run = Run(secrets.token_urlsafe(18), owner, capabilities)
        self._runs[run.id] = run
        listener = RunListener(run)
        self._tg.start_soon(self._execute, run, lambda: execution(listener))
        return run

    async def _execute(
        self, run: Run, execution: Callable[[], Awaitable[ExecutionResult | types.CallToolResult]]
    ) -> None:
        await run._execute(execution)
        # Its result is held from now on: the bounds on what finished runs hold apply at once,
        # not at the next start (a client's 16 runs may all end while it starts none).
        self._prune(starting=False)

    def get(self, run_id: object, owner: str | None) -> Run:
        """The run ``run_id`` of ``owner``; raises :class:`UnknownRun` otherwise."""
        run = self._runs.get(run_id) if isinstance(run_id, str) else None
        if run is None or run.owner != owner:
            raise UnknownRun(
                f"unknown run {_shown_id(run_id)}: no run of this client has that id (a "
                f"finished run is kept {KEEP_FINISHED:g} s)"
            )
        return run

    def forget(self, run: Run) -> None:
        """Drop a run whose result its waiter returned, if nobody else can ask for it (a task's
        client and a model that yielded can)."""
        if not (run.as_task or run.yielded):
            self._runs.pop(run.id, None)


def shown_keys(keys: list[str]) -> str:
    """Some of the ``inputResponses`` keys a client sent, for an error (each cut: a key is the
    client's own text, of any length)."""
    return ", ".join(_shown_id(key) for key in keys[:5])


def _shown_id(run_id: object) -> str:
    text = run_id if isinstance(run_id, str) else type(run_id).__name__
    return repr(text[:40] + ("…" if len(text) > 40 else ""))
