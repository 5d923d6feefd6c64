"""A named session's bookkeeping, and the small pure helpers that build results and notices."""

from __future__ import annotations

import uuid

import anyio
from bridge_protocol import ErrorInfo

from bridge_core.sessions._sandbox import LiveSandbox
from bridge_core.sessions.types import ExecutionResult, Status

__all__ = ["Session", "format_bytes", "unavailable"]

_STATUSES: dict[str, Status] = {
    "ok": "ok",
    "error": "error",
    "interrupted": "interrupted",
    "timeout": "timeout",
}


class Session:
    """One named session: its sandbox (None until first needed or after a reset) and its turn.

    ``turn`` is a semaphore rather than a lock because a cancelled execution hands its turn to a
    background task that finishes the interrupt (another task releases it). anyio semaphores
    wake waiters in FIFO order, which gives "executions run one at a time, in order".
    """

    def __init__(self, name: str, now: float, *, client: str | None = None) -> None:
        self.name = name
        self.client = client
        """Whose session this is (None: the only client of a stdio bridge)."""
        self.live: LiveSandbox | None = None
        # fast_acquire: a free turn is taken without yielding a loop turn first (a call always
        # waits on its sandbox before it gives the turn back, so no caller can starve others).
        self.turn = anyio.Semaphore(1, fast_acquire=True)
        self.users = 0
        """Executions waiting for or holding the turn (an idle-expiry sweep skips the session)."""
        self.last_used = now
        self.notices: list[str] = []
        """Told to the next execution (e.g. the state was lost after a crash)."""
        self.stale = False
        """Its sandbox was stopped while the state after its last execution was not saved: the
        state its next sandbox restores is an older one (and the notice says so)."""
        self.forget_saved = False
        """A reset asked for: the saved state goes before the next sandbox starts."""
        self.grant_scope = uuid.uuid4().hex
        """What "allow for this session" answers are kept under: new with each Session object and
        with each reset, so an answer never outlives the session it was given in."""

    @property
    def busy(self) -> bool:
        return self.users > 0 or self.turn.value == 0


class Turn:
    """Whether the execution that acquired a session's turn still has to release it."""

    __slots__ = ("handed_off",)

    def __init__(self) -> None:
        self.handed_off = False


def status_of(sandbox_status: str) -> Status:
    return _STATUSES.get(sandbox_status, "error")


def unavailable(session: str, message: str, notices: list[str]) -> ExecutionResult:
    """The result of an execution that could not run at all (no runtime, no sandbox, no turn)."""
    return ExecutionResult(
        status="unavailable",
        session=session,
        error=ErrorInfo("SandboxUnavailable", message),
        notices=(*notices, message),
    )


def format_bytes(size: int) -> str:
    """``512m``-style sizes, as users write them in ``MCP_BRIDGE_MEMORY_LIMIT``."""
    for unit, factor in (("g", 1 << 30), ("m", 1 << 20), ("k", 1 << 10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor}{unit}"
    return f"{size}b"
