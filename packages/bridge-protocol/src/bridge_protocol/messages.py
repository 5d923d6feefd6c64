"""The typed messages of the wire protocol.

Every message is a frozen dataclass with a class-level ``KIND`` (the ``kind`` key on the wire).
Messages that belong to an execution carry its ``execution_id``; messages that belong to a tool
call or a request carry its ``call_id``. Late frames of a finished execution therefore can never be
mistaken for the next one.

Direction matters: :data:`SANDBOX_TO_HOST` and :data:`HOST_TO_SANDBOX` list which kinds each side
may send; a decoder built for one direction rejects the others.

JSON-like values (tool arguments, tool results, request parameters) are restricted to
``None | bool | int | float | str | bytes | list | dict[str, ...]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, TypeAlias

__all__ = [
    "HOST_TO_SANDBOX",
    "MESSAGE_TYPES",
    "SANDBOX_TO_HOST",
    "Call",
    "CancelCall",
    "Display",
    "ErrorInfo",
    "Execute",
    "ExecutionStatus",
    "Fault",
    "Hello",
    "Interrupt",
    "JSONValue",
    "Message",
    "Output",
    "Ping",
    "Pong",
    "Progress",
    "Refusal",
    "Reply",
    "Request",
    "Restore",
    "Restored",
    "Result",
    "Resave",
    "Shutdown",
    "Snapshot",
    "SnapshotCopy",
    "Stream",
    "Welcome",
]

JSONValue: TypeAlias = Any
"""A JSON-like value: None, bool, int, float, str, bytes, list of these, or dict with str keys."""

Stream: TypeAlias = Literal["stdout", "stderr"]
ExecutionStatus: TypeAlias = Literal["ok", "error", "interrupted", "timeout"]


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """A user-code exception: its type name, message and a traceback trimmed to user frames."""

    type: str
    message: str
    traceback: str = ""


@dataclass(frozen=True, slots=True)
class Fault:
    """Why a call or request failed: a wire error code (see :mod:`bridge_protocol.errors`)."""

    code: int
    message: str
    data: JSONValue = None


# --- handshake -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Hello:
    """Sandbox → host, first frame: the protocol versions the sandbox speaks."""

    KIND: ClassVar[str] = "hello"
    versions: tuple[int, ...]
    client_version: str = ""


@dataclass(frozen=True, slots=True)
class Welcome:
    """Host → sandbox: the negotiated version (highest common one) and the session's name."""

    KIND: ClassVar[str] = "welcome"
    version: int
    session: str = ""


@dataclass(frozen=True, slots=True)
class Refusal:
    """Host → sandbox: no common version (or another reason to refuse); the host then closes."""

    KIND: ClassVar[str] = "refusal"
    code: int
    message: str
    supported: tuple[int, ...] = ()


# --- executions ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Execute:
    """Host → sandbox: run ``code`` in the persistent namespace."""

    KIND: ClassVar[str] = "execute"
    execution_id: str
    code: str
    repr_limit: int = 10_000
    """Maximum characters of the trailing expression's repr sent back in :class:`Result`."""


@dataclass(frozen=True, slots=True)
class Output:
    """Sandbox → host: a chunk of stdout or stderr, exactly as written."""

    KIND: ClassVar[str] = "output"
    execution_id: str
    stream: Stream
    text: str


@dataclass(frozen=True, slots=True)
class Display:
    """Sandbox → host: an image (e.g. a matplotlib figure) produced by the execution."""

    KIND: ClassVar[str] = "display"
    execution_id: str
    mime: str
    data: bytes


@dataclass(frozen=True, slots=True)
class Progress:
    """Sandbox → host: ``runtime.progress(done, total, message)`` from user code."""

    KIND: ClassVar[str] = "progress"
    execution_id: str
    progress: float
    total: float | None = None
    message: str | None = None


@dataclass(frozen=True, slots=True)
class Result:
    """Sandbox → host: the execution ended. ``value`` is the repr of a trailing expression."""

    KIND: ClassVar[str] = "result"
    execution_id: str
    status: ExecutionStatus
    value: str | None = None
    error: ErrorInfo | None = None


@dataclass(frozen=True, slots=True)
class Interrupt:
    """Host → sandbox: stop the execution with KeyboardInterrupt semantics."""

    KIND: ClassVar[str] = "interrupt"
    execution_id: str


# --- tool calls and requests from user code ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class Call:
    """Sandbox → host: call ``tool`` of upstream ``server`` with ``arguments``."""

    KIND: ClassVar[str] = "call"
    call_id: int
    execution_id: str
    server: str
    tool: str
    arguments: Mapping[str, JSONValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Request:
    """Sandbox → host: a discovery/search/docs request (``method`` + ``params``)."""

    KIND: ClassVar[str] = "request"
    call_id: int
    execution_id: str
    method: str
    params: Mapping[str, JSONValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CancelCall:
    """Sandbox → host: the sandbox abandoned call/request ``call_id`` (e.g. on interrupt)."""

    KIND: ClassVar[str] = "cancel"
    call_id: int


@dataclass(frozen=True, slots=True)
class Reply:
    """Host → sandbox: the answer to a :class:`Call` or :class:`Request`.

    Exactly one of ``value`` (when ``fault`` is None) or ``fault`` is meaningful. For a
    :class:`Call`, ``value`` is the upstream ``CallToolResult`` as its camelCase JSON dict.
    """

    KIND: ClassVar[str] = "reply"
    call_id: int
    value: JSONValue = None
    fault: Fault | None = None


# --- durable sessions ---------------------------------------------------------------------------


FORK_SNAPSHOT_PREFIX = "fork-"
"""A ``Snapshot`` whose id starts with this is a fork's (``fork_session`` request), never the
session's own saved state."""
CHECKPOINT_RESTORE_PREFIX = "checkpoint-"
"""A ``Restore`` whose id starts with this brings a checkpoint back into a running sandbox, while
an execution runs (``restore_checkpoint`` request): the sandbox hands it to the code that asked,
never loads it as the session's start."""
UNCHANGED_SNAPSHOT_PREFIX = "same-"
"""A ``Snapshot`` whose id starts with this carries no data and says the session's state is byte
for byte the one this sandbox sent last: the host keeps what it saved then (if it did)."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Sandbox → host: one chunk of the session's saved state after a successful execution.

    The bytes are opaque to the host (it stores them, never reads them). Chunks of one snapshot
    share ``snapshot_id`` and arrive in order; the one with ``last`` ends it and names what could
    not be saved (``unsaved``: ``"name (type): reason"``) or why nothing was (``error``).
    """

    KIND: ClassVar[str] = "snapshot"
    snapshot_id: str
    data: bytes = b""
    last: bool = False
    unsaved: tuple[str, ...] = ()
    error: str = ""


@dataclass(frozen=True, slots=True)
class SnapshotCopy:
    """Sandbox → host, version 2: a chunk of a snapshot that the host copies from the state it
    saved for snapshot ``base``: ``length`` bytes from ``offset`` (the parts of a large state
    that did not change are not sent again). Ordered with the ``snapshot`` chunks of the same
    ``snapshot_id``; the host refuses the whole snapshot when ``base`` is not the state it holds
    for this session or the range is not inside it."""

    KIND: ClassVar[str] = "snapshot_copy"
    snapshot_id: str
    base: str
    offset: int
    length: int


@dataclass(frozen=True, slots=True)
class Restore:
    """Host → sandbox: one chunk of a saved state to load before the first execution."""

    KIND: ClassVar[str] = "restore"
    restore_id: str
    data: bytes = b""
    last: bool = False


@dataclass(frozen=True, slots=True)
class Resave:
    """Host → sandbox, before an ``execute``: the host could not save the last state this
    sandbox sent whole, for a reason that may pass (its disk budget, an I/O error): the next
    :class:`Snapshot` sends the state whole, never as unchanged from that one."""

    KIND: ClassVar[str] = "resave"
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Restored:
    """Sandbox → host: the state of ``restore_id`` is loaded (``error`` empty) or was refused."""

    KIND: ClassVar[str] = "restored"
    restore_id: str
    error: str = ""


# --- liveness and shutdown -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Ping:
    KIND: ClassVar[str] = "ping"
    nonce: int


@dataclass(frozen=True, slots=True)
class Pong:
    KIND: ClassVar[str] = "pong"
    nonce: int


@dataclass(frozen=True, slots=True)
class Shutdown:
    """Host → sandbox: exit cleanly."""

    KIND: ClassVar[str] = "shutdown"
    reason: str = ""


Message: TypeAlias = (
    Hello
    | Welcome
    | Refusal
    | Execute
    | Output
    | Display
    | Progress
    | Result
    | Interrupt
    | Call
    | Request
    | CancelCall
    | Reply
    | Ping
    | Pong
    | Shutdown
    | Snapshot
    | SnapshotCopy
    | Restore
    | Restored
    | Resave
)

MESSAGE_TYPES: Mapping[str, type[Message]] = {
    cls.KIND: cls
    for cls in (
        Hello,
        Welcome,
        Refusal,
        Execute,
        Output,
        Display,
        Progress,
        Result,
        Interrupt,
        Call,
        Request,
        CancelCall,
        Reply,
        Ping,
        Pong,
        Shutdown,
        Snapshot,
        SnapshotCopy,
        Restore,
        Restored,
        Resave,
    )
}

SANDBOX_TO_HOST: frozenset[str] = frozenset(
    {
        "hello",
        "output",
        "display",
        "progress",
        "result",
        "call",
        "request",
        "cancel",
        "ping",
        "pong",
        "snapshot",
        "snapshot_copy",
        "restored",
    }
)
HOST_TO_SANDBOX: frozenset[str] = frozenset(
    {
        "welcome",
        "refusal",
        "execute",
        "interrupt",
        "reply",
        "ping",
        "pong",
        "shutdown",
        "restore",
        "resave",
    }
)
