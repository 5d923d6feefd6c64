"""A named session's bookkeeping (its turn, its sandbox), and the small pure helpers that build
results and notices."""

from __future__ import annotations

import uuid
from dataclasses import replace

import anyio
import anyio.lowlevel
from bridge_protocol import ErrorInfo

from bridge_core.sessions._sandbox import LiveSandbox
from bridge_core.sessions.types import ExecutionResult, Status

__all__ = [
    "Session",
    "Turn",
    "ended_while_idle",
    "format_bytes",
    "mark_stale",
    "take_turn",
    "unavailable",
    "with_start",
]

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


def ended_while_idle(name: str, live: LiveSandbox, reason: str, *, durable: bool) -> str:
    """The notice for session ``name`` whose sandbox ``live`` ended (``reason``) between calls:
    what is left of its state."""
    if not durable:
        lost = "this is a fresh one and the session's state was lost"
    elif live.durable is not None and live.durable.lost:
        lost = (
            f"its state after its last execution was not saved ({live.durable.lost}), "
            "so the work since its last saved state is lost"
        )
    else:
        lost = "its state as of its last successful execution is restored"
    return f"the sandbox of session {name!r} ended while idle ({reason}): {lost}"


def format_bytes(size: int) -> str:
    """``512m``-style sizes, as users write them in ``MCP_BRIDGE_MEMORY_LIMIT``."""
    for unit, factor in (("g", 1 << 30), ("m", 1 << 20), ("k", 1 << 10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor}{unit}"
    return f"{size}b"


def mark_stale(sess: Session, live: LiveSandbox) -> None:
    """``sess`` loses ``live``: if its last state was not saved, its restore says it is older."""
    if live.durable is not None and live.durable.lost:
        sess.stale = True


def with_start(result: ExecutionResult, waited: float) -> ExecutionResult:
    """``result`` saying how long its call waited for its sandbox to start."""
    return replace(result, sandbox_start=waited)


async def take_turn(turn: anyio.Semaphore, limit: float) -> bool:
    """Take a session's turn within ``limit`` seconds; False when it did not come in time.

    A free turn is taken without a cancel scope (entering and leaving one costs ~5 us on
    asyncio, and a warm call took five); cancellation is honoured as ``acquire`` would."""
    await anyio.lowlevel.checkpoint_if_cancelled()
    try:
        turn.acquire_nowait()
    except anyio.WouldBlock:
        with anyio.move_on_after(limit):
            await turn.acquire()
            return True
        return False
    return True
