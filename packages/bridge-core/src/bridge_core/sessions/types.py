"""What the session manager returns and streams: the contract with bridge-server."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

from bridge_protocol import ErrorInfo, Stream

from bridge_core.runtime.base import SandboxLimits
from bridge_core.sessions._budget import MAX_CALL_BYTES, MAX_CALLS_IN_FLIGHT

__all__ = [
    "OUTPUT_CAP",
    "ExecutionListener",
    "ExecutionResult",
    "Image",
    "SessionConfig",
    "SessionStats",
    "Status",
]

OUTPUT_CAP = 24 * 1024
"""Characters of stdout+stderr a result keeps by default (``MCP_BRIDGE_OUTPUT_CAP``); past it,
head and tail, and the whole output in the session's spill file. Chosen by measurement
(``bench/output_cap.py``): every output of its corpus a model reads in full fits (the largest,
a 200-line file, is 19,000 characters), while a dump costs at most ~16k tokens instead of ~33k,
below the 25,000 tokens at which Claude Code refuses a tool result even at one token per
character."""

Status = Literal["ok", "error", "interrupted", "timeout", "crashed", "unavailable"]
"""``crashed``: the container died (OOM, pids, killed). ``unavailable``: no runtime/sandbox could
be started, or the execution waited too long for its turn in the session."""


@dataclass(frozen=True, slots=True)
class Image:
    mime: str
    data: bytes


@dataclass(frozen=True, slots=True)
class ExecutionResult:
    """One execution as it is shown: every text from the sandbox (stdout, stderr, value, error)
    has its control, bidi and zero-width characters made visible and is bounded (the output by
    the cap, the value, traceback and message by limits of their own)."""

    status: Status
    session: str
    stdout: str = ""
    stderr: str = ""
    value: str | None = None
    """repr of the trailing expression, if any."""
    error: ErrorInfo | None = None
    images: tuple[Image, ...] = ()
    duration: float = 0.0
    notices: tuple[str, ...] = ()
    """Human sentences: session reset/replaced and why, state dropped, output truncated (with the
    total size and the path of the full output inside the sandbox)."""
    truncated: bool = False
    full_output_path: str | None = None
    """Path INSIDE the sandbox of the complete output (exact bytes, read-only) when it was
    truncated and kept."""
    sandbox_start: float = 0.0
    """Seconds the call waited for a sandbox to start before its code was sent (0: its
    session's sandbox was running). Not part of :attr:`duration` nor of the call's timeout."""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class ExecutionListener(Protocol):
    """Live events of one execution (bridge-server turns them into MCP progress).

    A listener may also have a ``client`` attribute, a :class:`bridge_core.client_link.ClientLink`
    to the MCP client that asked for the execution: nested calls ask it for approvals and relay
    what upstream servers ask of their client to it.
    """

    async def on_output(self, stream: Stream, text: str) -> None: ...

    async def on_progress(
        self, progress: float, total: float | None, message: str | None
    ) -> None: ...


@dataclass(frozen=True, slots=True)
class SessionConfig:
    """Settings of the session manager (bridge-server fills it from env/CLI)."""

    image: str
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    security_opt: tuple[str, ...] = ()
    pool_size: int = 1
    """Warm sandboxes started ahead of demand; 0 disables the pool."""
    max_sessions: int = 8
    max_sessions_per_client: int | None = None
    """Sessions one client may hold when clients are named (HTTP); None: only max_sessions."""
    idle_ttl: float = 1800.0
    """Seconds of inactivity after which a session's container is stopped."""
    persist: bool = True
    """False: a fresh sandbox for every execution (MCP_BRIDGE_SESSION_PERSIST=false)."""
    default_timeout: float = 120.0
    max_timeout: float = 900.0
    interrupt_grace: float = 2.0
    """Seconds an interrupted execution gets to stop before its container is killed."""
    output_cap: int = OUTPUT_CAP
    """Characters of stdout+stderr kept per execution; past it head and tail are kept."""
    max_calls_in_flight: int = MAX_CALLS_IN_FLIGHT
    """Tool calls and requests one sandbox may have in flight; past it they are refused."""
    max_call_bytes: int = MAX_CALL_BYTES
    """Bytes those calls may hold on the host (arguments, then results until sent)."""
    start_timeout: float = 60.0
    """Seconds a sandbox gets to start (or to come from the warm pool) when a call needs one;
    not part of the call's timeout, which is the code's own time."""
    pool_imports: tuple[str, ...] = ()
    """Top-level modules every warm-pool sandbox imports as it starts, named by whoever runs
    the bridge (``[sandbox] pool_imports``): they tell no client anything about another's."""
    pool_preimport: bool = False
    """Warm-pool sandboxes import the modules the saved sessions' states name, before any
    session claims them: only for a bridge with one client (stdio), whose pool serves no one
    else (see docs/decisions/0079)."""
    image_advice: str = ""
    """What to do when the image's sandbox client speaks no protocol version of this bridge
    (which image to pull or rebuild); the server fills it from its release record."""


@dataclass(frozen=True, slots=True)
class SessionStats:
    """Counters for ``doctor``, benchmarks and tests."""

    sessions: int
    live_sandboxes: int
    sandboxes_started: int
    pool_ready: int
    pool_hits: int
    pool_misses: int
