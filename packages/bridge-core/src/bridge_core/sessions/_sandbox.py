"""One started sandbox with its connected channel and the task that reads it.

A :class:`LiveSandbox` exists from the moment the runtime handed back a connected sandbox until it
is stopped, whether it waits in the warm pool or serves a session. Its :meth:`LiveSandbox.serve`
task (owned by the session manager's task group) does the handshake, then reads every frame and
dispatches it to the current :class:`~._execution.Execution`. Tool calls and requests run as
tasks of the sandbox's own task group, each in a cancel scope recorded on its execution, so
ending the execution (result, timeout, interrupt) or a ``CancelCall`` from the sandbox cancels
them.

Everything the sandbox sends is bounded before the host keeps it: calls and requests by the
sandbox's :class:`~bridge_core.sessions._budget.CallBudget` (refused past it, never queued),
output, images, progress and the ``Result`` by the execution they belong to (:mod:`._execution`).
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass

import anyio
from anyio.abc import TaskGroup, TaskStatus
from bridge_protocol import (
    Call,
    CancelCall,
    Display,
    ErrorCode,
    Execute,
    Fault,
    Hello,
    Interrupt,
    JSONValue,
    Message,
    Output,
    Ping,
    Pong,
    Progress,
    ProtocolError,
    Reply,
    Request,
    Resave,
    Restored,
    Result,
    Snapshot,
    SnapshotCopy,
    encode,
)

from bridge_core import tracing
from bridge_core.channel import Channel, ChannelClosed, UnexpectedMessage
from bridge_core.gateway import CallContext, CallFailed, Gateway
from bridge_core.runtime.base import Sandbox
from bridge_core.sessions._budget import CallBudget, CallLimits
from bridge_core.sessions._checkpoints import CHECKPOINT_METHOD, RESTORE_METHOD
from bridge_core.sessions._checkpoints import METHODS as CHECKPOINT_METHODS
from bridge_core.sessions._durable import DurableLink
from bridge_core.sessions._execution import Execution, bounded_result
from bridge_core.sessions._fork import FORK_METHOD, PendingFork

__all__ = ["Execution", "LiveSandbox"]

logger = logging.getLogger("bridge_core.sessions")

MAX_SHOWN_NAME = 200
"""Characters of a sandbox-chosen server, tool or method name quoted in a refusal."""


@dataclass(slots=True)
class _Failure:
    reason: str
    protocol: bool


class LiveSandbox:
    """A running sandbox, its channel and its reader. Created by the manager, served in its
    task group, stopped by the manager."""

    def __init__(
        self,
        sandbox: Sandbox,
        channel: Channel,
        gateway: Gateway,
        *,
        handshake_timeout: float,
        call_limits: CallLimits | None = None,
    ) -> None:
        self.sandbox = sandbox
        self.channel = channel
        self.session = ""
        """The session this sandbox serves ("" while it waits in the pool)."""
        self.closed = anyio.Event()
        """Set when the channel ended: EOF, protocol violation, or :meth:`close`."""
        self.failure: _Failure | None = None
        self._gateway = gateway
        self._handshake_timeout = handshake_timeout
        self.budget = CallBudget(call_limits or CallLimits())
        """Calls in flight and the bytes they hold; refused past its limits."""
        self.durable: DurableLink | None = None
        """Set once the sandbox serves a durable session: its snapshots go to the store."""
        self.not_durable = "its session is not saved"
        """Why a fork of its session is refused when :attr:`durable` is None."""
        self._execution: Execution | None = None
        self._scope: anyio.CancelScope | None = None
        self._calls: TaskGroup | None = None

    @property
    def name(self) -> str:
        return self.sandbox.name

    @property
    def alive(self) -> bool:
        return not self.closed.is_set()

    @property
    def failure_reason(self) -> str:
        return self.failure.reason if self.failure else "the sandbox closed its channel"

    @property
    def protocol_failure(self) -> bool:
        return self.failure is not None and self.failure.protocol

    async def serve(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Handshake, report started, then read frames until the channel ends.

        Never raises for anything the sandbox does: that only ends this sandbox.
        """
        try:
            with anyio.CancelScope() as scope:
                self._scope = scope
                with anyio.fail_after(self._handshake_timeout):
                    await self.channel.handshake(self.session)
                task_status.started()
                async with anyio.create_task_group() as calls:
                    self._calls = calls
                    await self._read_frames()
                    calls.cancel_scope.cancel()
        finally:
            self._calls = None
            self._end()
            with anyio.CancelScope(shield=True):
                await self.channel.aclose()

    async def _read_frames(self) -> None:
        try:
            while True:
                message, size = await self.channel.receive_frame()
                await self._dispatch(message, size)
        except ChannelClosed as exc:
            self._fail(str(exc) or "the sandbox closed its channel", protocol=False)
        except ProtocolError as exc:
            logger.warning("sandbox %s violated the protocol: %s", self.name, exc)
            self._fail(f"protocol violation by the sandbox ({exc.code.name}): {exc}", protocol=True)
        except Exception as exc:
            # Top-level handler of the reader: a bug here must end this sandbox, not the bridge.
            logger.exception("reader of sandbox %s failed", self.name)
            self._fail(f"internal error while reading the sandbox channel: {exc!r}", protocol=True)

    def _fail(self, reason: str, *, protocol: bool) -> None:
        if self.failure is None:
            self.failure = _Failure(reason, protocol)

    def _end(self) -> None:
        self._fail("the sandbox was stopped", protocol=False)
        self.closed.set()
        execution, self._execution = self._execution, None
        if execution is not None:
            execution.cancel_calls()
            execution.done.set()
        if self.durable is not None:
            self.durable.end()

    def close(self) -> None:
        """Stop reading (the channel is closed by :meth:`serve` on its way out)."""
        self._fail("the sandbox was stopped by the bridge", protocol=False)
        if self._scope is not None:
            self._scope.cancel()
        else:
            self._end()

    # --- dispatch ----------------------------------------------------------------------------

    async def _stop_snapshot(self) -> None:
        """Tell the sandbox to stop the state it is sending (refused: past the largest kept);
        a sandbox that is gone or does not read loses nothing by not hearing it."""
        with contextlib.suppress(ChannelClosed, ProtocolError):
            await self.channel.send(Resave("the state being sent is past the largest kept"))

    def _current(self, execution_id: str, kind: str) -> Execution | None:
        execution = self._execution
        if execution is None or execution.id != execution_id:
            logger.debug("dropping %s frame of stale execution %s", kind, execution_id)
            return None
        return execution

    async def _dispatch(self, message: Message, size: int) -> None:
        if isinstance(message, Output):
            if execution := self._current(message.execution_id, "output"):
                await execution.on_output(message.stream, message.text)
        elif isinstance(message, Result):
            if execution := self._current(message.execution_id, "result"):
                self._execution = None
                if self.durable is not None and message.status == "ok":
                    self.durable.expect_snapshot()  # its frames follow the result
                execution.result = bounded_result(message)
                execution.cancel_calls()
                execution.done.set()
        elif isinstance(message, (Call, Request)):
            if execution := self._current(message.execution_id, message.KIND):
                await self._start_call(execution, message, size)
        elif isinstance(message, CancelCall):
            if self._execution is not None and (
                scope := self._execution.calls.pop(message.call_id, None)
            ):
                scope.cancel()
        elif isinstance(message, Progress):
            if execution := self._current(message.execution_id, "progress"):
                await execution.on_progress(message)
        elif isinstance(message, Display):
            if execution := self._current(message.execution_id, "display"):
                execution.on_display(message)
        elif isinstance(message, Snapshot):
            if self.durable is not None:  # a sandbox that was never asked to save is ignored
                await self.durable.on_snapshot(message)
                if self.durable.stop_wanted and self._calls is not None:
                    self.durable.stop_wanted = False
                    self._calls.start_soon(self._stop_snapshot)
        elif isinstance(message, SnapshotCopy):
            if self.durable is not None:
                await self.durable.on_snapshot_copy(message)
        elif isinstance(message, Restored):
            if self.durable is not None:
                self.durable.on_restored(message)
        elif isinstance(message, Ping):
            await self.channel.send(Pong(message.nonce))
        elif isinstance(message, Pong):
            pass
        else:  # Hello again: the decoder only lets sandbox-to-host kinds through.
            assert isinstance(message, Hello)
            raise UnexpectedMessage("hello after the handshake")

    async def _start_call(self, execution: Execution, message: Call | Request, size: int) -> None:
        if message.call_id in execution.calls:
            raise UnexpectedMessage(f"call id {message.call_id} is already in flight")
        if reason := self.budget.refusal(size):
            # Answered from the reader: a sandbox that floods without reading its replies is
            # slowed down to the pace at which it reads them.
            text = (
                f"{_describe(message)} was not made: {reason}; await some of the calls in flight "
                "before starting more (for example, limit concurrency with an asyncio.Semaphore)"
            )
            fault = Fault(ErrorCode.TOO_MANY_CALLS, text, _limits_data(self.budget))
            refusal = Reply(message.call_id, fault=fault)
            tracing.refused_call(execution.trace, message, size, refusal)
            await self.channel.send(refusal)
            return
        assert self._calls is not None
        fork: PendingFork | None = None
        replaces = ""
        if isinstance(message, Request) and message.method in (FORK_METHOD, CHECKPOINT_METHOD):
            # Reserved here, on the reader, before the snapshot frames that follow.
            try:
                if message.method == FORK_METHOD:
                    fork = self._begin_fork(message)
                else:
                    fork, replaces = await self._link(message).checkpoints.begin(message.params)
            except CallFailed as exc:
                fault = Fault(int(exc.code), exc.message)
                await self.channel.send(Reply(message.call_id, fault=fault))
                return
        self.budget.take(size)
        scope = anyio.CancelScope()
        execution.calls[message.call_id] = scope
        self._calls.start_soon(self._run_call, execution, message, scope, size, fork, replaces)

    def _link(self, message: Request) -> DurableLink:
        """The durable link a checkpoint request needs; refused when the session has none."""
        if self.durable is None:
            raise CallFailed(
                ErrorCode.TOOL_ERROR,
                f"session {self.session!r} has no checkpoints: {self.not_durable} "
                "(checkpoints are saved states of a saved session)",
            )
        return self.durable

    def _begin_fork(self, message: Request) -> PendingFork:
        if self.durable is None:
            raise CallFailed(
                ErrorCode.TOOL_ERROR,
                f"session {self.session!r} cannot be forked: {self.not_durable} (forks are "
                "saved sessions)",
            )
        return self.durable.forks.begin(message.params)

    async def _run_call(
        self,
        execution: Execution,
        message: Call | Request,
        scope: anyio.CancelScope,
        size: int,
        fork: PendingFork | None = None,
        replaces: str = "",
    ) -> None:
        held = size
        span = tracing.nested_call(execution.trace, message, size)
        try:
            reply: Reply | None = None
            with scope:
                if fork is not None and self.durable is not None:
                    reply = await self._answer_fork(message.call_id, self.durable, fork, replaces)
                elif isinstance(message, Request) and message.method in CHECKPOINT_METHODS:
                    reply = await self._answer_checkpoint(message)
                else:
                    reply = await self._answer(execution, message)
            execution.calls.pop(message.call_id, None)
            if reply is None:  # cancelled: the sandbox abandoned it or the execution ended
                return
            try:
                frame = encode(reply)
            except (ProtocolError, ValueError, TypeError) as exc:
                # The encoder refused the reply (a value the wire cannot carry, or above the
                # frame limit): the sandbox gets a fault instead, the stream stays in sync.
                logger.warning("reply to call %s cannot be sent: %s", message.call_id, exc)
                what = (
                    f"the result of {_shown(message.server)}.{_shown(message.tool)}"
                    if isinstance(message, Call)
                    else f"the answer to {_shown(message.method)}"
                )
                fault = Fault(ErrorCode.INTERNAL, f"{what} could not be sent to the sandbox: {exc}")
                reply = Reply(message.call_id, fault=fault)
                frame = encode(reply)
            span.replied(reply, len(frame))
            # While it waits to be sent, the result is what the call holds.
            self.budget.resize(held, len(frame))
            held = len(frame)
            try:
                await self.channel.send_frame(frame)
            except ChannelClosed:
                return
        finally:
            span.end()
            self.budget.release(held)

    @staticmethod
    async def _answer_fork(
        call_id: int, link: DurableLink, fork: PendingFork, replaces: str = ""
    ) -> Reply:
        try:
            if fork.checkpoint:
                return Reply(call_id, value=await link.checkpoints.finish(fork, replaces))
            name = await link.forks.finish(fork)
        except CallFailed as exc:
            return Reply(call_id, fault=Fault(int(exc.code), exc.message))
        return Reply(call_id, value={"session": name})

    async def _answer_checkpoint(self, message: Request) -> Reply:
        """``restore_checkpoint`` and ``list_checkpoints`` (a checkpoint itself is a fork's)."""
        try:
            link = self._link(message)
            value: JSONValue
            if message.method == RESTORE_METHOD:
                value = await link.checkpoints.restore(message.params, self.channel)
            else:
                value = await link.checkpoints.listing()
        except CallFailed as exc:
            return Reply(message.call_id, fault=Fault(int(exc.code), exc.message))
        return Reply(message.call_id, value=value)

    async def _answer(self, execution: Execution, message: Call | Request) -> Reply:
        ctx = CallContext(
            self.session,
            execution.id,
            client=execution.client,
            client_key=execution.client_key,
            grant_scope=execution.grant_scope,
        )
        try:
            if isinstance(message, Call):
                value = await self._gateway.call_tool(
                    ctx, message.server, message.tool, message.arguments
                )
            else:
                value = await self._gateway.request(ctx, message.method, message.params)
        except CallFailed as exc:
            return Reply(message.call_id, fault=Fault(int(exc.code), exc.message, exc.data))
        except Exception:
            # Top-level handler of one call: the sandbox gets a generic fault, the log the details.
            logger.exception("gateway failed on %s %s", message.KIND, _describe(message))
            fault = Fault(ErrorCode.INTERNAL, f"internal bridge error during {_describe(message)}")
            return Reply(message.call_id, fault=fault)
        return Reply(message.call_id, value=value)

    # --- commands from the session -----------------------------------------------------------

    async def start(self, execution: Execution, code: str) -> None:
        """Send ``Execute``. If the sandbox is gone, ``execution.done`` is set at once.

        Raises ValueError when the code itself cannot be encoded (e.g. above the frame limit).
        """
        if not self.alive:
            execution.done.set()
            return
        try:
            if self.durable is not None and self.durable.lost_last:
                # Its last state is not saved here, for a reason that may pass: the sandbox
                # must not announce the next as "unchanged" from it.
                await self.channel.send(Resave("the last state sent could not be saved"))
                self.durable.resave_asked()
            frame = Execute(execution.id, code)
            self._execution = execution
            await self.channel.send(frame)
            execution.sent = True
        except ProtocolError as exc:  # raised by the encoder, before any byte was written
            self._execution = None
            raise ValueError(f"the code cannot be sent to the sandbox: {exc}") from exc
        except anyio.get_cancelled_exc_class():
            # Cancelled while waiting for the send lock: nothing was written (the write itself
            # is shielded), so there is nothing to interrupt either.
            self._execution = None
            raise
        except ChannelClosed as exc:
            self._fail(str(exc), protocol=False)
            self.close()

    async def interrupt(self, execution: Execution) -> None:
        """Ask the sandbox to raise KeyboardInterrupt in ``execution`` (no-op once it ended)."""
        if self._execution is not execution or not self.alive:
            return
        try:
            await self.channel.send(Interrupt(execution.id))
        except ChannelClosed:
            pass

    def finish(self, execution: Execution) -> None:
        """Forget ``execution``: its late frames are dropped from now on, its calls cancelled."""
        if self._execution is execution:
            self._execution = None
        execution.cancel_calls()


def _shown(name: str) -> str:
    return name if len(name) <= MAX_SHOWN_NAME else name[:MAX_SHOWN_NAME] + "…"


def _describe(message: Call | Request) -> str:
    if isinstance(message, Call):
        return f"call to {_shown(message.server)}.{_shown(message.tool)}"
    return f"request {_shown(message.method)!r}"


def _limits_data(budget: CallBudget) -> dict[str, int]:
    return {
        "calls_in_flight": budget.calls,
        "bytes_in_flight": budget.bytes,
        "max_calls_in_flight": budget.limits.max_calls,
        "max_call_bytes": budget.limits.max_bytes,
    }
