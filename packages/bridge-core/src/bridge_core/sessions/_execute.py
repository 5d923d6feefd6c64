"""Running one execution on a session's sandbox: timeout, interrupt, grace, kill, crash, output.

The order of events on a timeout (the issue's contract): interrupt → wait ``interrupt_grace`` →
kill and replace the container. Partial output is always returned. Cancellation of the caller is
a timeout without a result: the interrupt is sent at once, the cancellation propagates, and a
background task (which now holds the session's turn) finishes the grace/kill sequence.

The deadline holds for everything a call does, whatever the sandbox does: sending the code and
waiting for it end at the timeout, sending the interrupt and waiting for it end with the grace
(a sandbox that stops reading its channel cannot hold either: the channel's writes end at the
caller's deadline), and building the result (the exit status, keeping the full output, which
runs no code in the sandbox) ends :data:`RESULT_MARGIN` later. Everything the sandbox sends back
for the result is bounded too: a sandbox can forge its result frame.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable

import anyio
from bridge_protocol import ErrorInfo

from bridge_core._visible import visible_head, visible_tail
from bridge_core.sessions._execution import Execution
from bridge_core.sessions._output import OutputCollector
from bridge_core.sessions._progress import PROGRESS_RATE
from bridge_core.sessions._sandbox import LiveSandbox
from bridge_core.sessions._session import Session, Turn, status_of
from bridge_core.sessions._spill import EXECUTION_LIMIT, FullOutputs, SpillFile
from bridge_core.sessions.types import ExecutionListener, ExecutionResult, SessionConfig, Status

__all__ = ["ExecutionRunner"]

logger = logging.getLogger("bridge_core.sessions")

CANCEL_INTERRUPT_TIMEOUT = 1.0
"""A cancelled caller waits at most this long for the interrupt frame to be written."""
RESULT_MARGIN = 1.0
"""Seconds after the timeout and the interrupt grace within which the result is built (the exit
status of a dead sandbox, keeping the full output): the bound on a whole call."""
VALUE_LIMIT = 10_000
"""Characters of the last expression's repr shown (the sandbox's own ``repr_limit``, applied again
here: a forged result frame can carry megabytes)."""
TRACEBACK_LIMIT = 16 * 1024
"""Characters of a traceback shown; its end (the failing frame and the message) is kept."""
TYPE_LIMIT = 256
"""Characters of an exception's type name kept."""
MESSAGE_LIMIT = 16 * 1024
"""Characters of an exception's message kept (the sandbox client's own limit, applied again)."""

_MARKER = (
    "\n[... {omitted} characters omitted: "
    "the output had {total} characters and {lines} lines ...]\n"
)


class ExecutionRunner:
    """Runs executions for the manager; the manager supplies sandbox replacement and tasks."""

    def __init__(
        self,
        config: SessionConfig,
        *,
        outputs: FullOutputs,
        replace: Callable[..., None],
        exit_reason: Callable[[LiveSandbox], Awaitable[str]],
        background: Callable[..., bool],
        durable: Callable[[], bool] = lambda: False,
    ) -> None:
        self.config = config
        self._outputs = outputs
        self._replace = replace
        self._exit_reason = exit_reason
        self._background = background
        self._durable = durable

    async def run(
        self,
        sess: Session,
        live: LiveSandbox,
        code: str,
        limit: float,
        deadline: float,
        listener: ExecutionListener | None,
        notices: list[str],
        turn: Turn,
        *,
        ephemeral: bool = False,
    ) -> ExecutionResult:
        # A full output is kept only where code can read it later: a persistent session whose
        # runtime shares a directory with the sandbox.
        keeps = not ephemeral and live.sandbox.shared_dir is not None
        spill = SpillFile(self._outputs, EXECUTION_LIMIT) if keeps else None
        output = OutputCollector(self.config.output_cap, spill)
        execution = Execution(
            uuid.uuid4().hex, output, listener, client_key=sess.client, grant_scope=sess.grant_scope
        )
        started = anyio.current_time()
        grace = self.config.interrupt_grace
        try:
            try:
                with anyio.move_on_at(deadline):
                    # Inside the deadline: a sandbox that does not read its channel cannot hold
                    # the call by not taking the code either.
                    await live.start(execution, code)
                    await execution.done.wait()
                timed_out = not execution.done.is_set()
                if timed_out and execution.sent:
                    with anyio.move_on_after(grace):
                        await live.interrupt(execution)
                        await execution.done.wait()
            except anyio.get_cancelled_exc_class():
                if not execution.sent:
                    raise
                with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_INTERRUPT_TIMEOUT):
                    await live.interrupt(execution)
                if not ephemeral:
                    # The session's turn goes to the task that finishes the interrupt.
                    turn.handed_off = self._background(
                        self._finish_cancelled, sess, live, execution
                    )
                raise
            duration = anyio.current_time() - started
            live.finish(execution)
            return await self._result(
                sess,
                live,
                execution,
                limit,
                timed_out,
                duration,
                notices,
                ephemeral,
                deadline + grace + RESULT_MARGIN,
            )
        finally:
            if not turn.handed_off:
                live.finish(execution)
                await output.aclose()

    async def _result(
        self,
        sess: Session,
        live: LiveSandbox,
        execution: Execution,
        limit: float,
        timed_out: bool,
        duration: float,
        notices: list[str],
        ephemeral: bool,
        by: float,
    ) -> ExecutionResult:
        """The result, built by ``by`` (the call's hard deadline) whatever the sandbox does."""
        name, grace = sess.name, self.config.interrupt_grace
        result = execution.result
        status: Status
        error = result.error if result is not None else None
        if result is not None:
            status = "timeout" if timed_out else status_of(result.status)
            if timed_out:
                error = ErrorInfo(
                    "TimeoutError",
                    f"the execution exceeded its timeout of {limit:g} s and was interrupted",
                    error.traceback if error else "",
                )
                notices.append(
                    f"timed out after {limit:g} s: the code was interrupted; "
                    f"the state of session {name!r} was kept"
                )
        elif timed_out and live.alive:
            status = "timeout"
            message = (
                f"the execution exceeded its timeout of {limit:g} s and did not stop within "
                f"{grace:g} s of the interrupt"
            )
            if held := live.channel.partial_frame:
                # Its answer may have come, stuck behind a frame the code wrote and never ended.
                message += (
                    f", or its answer is stuck behind an incomplete frame on its channel "
                    f"({held} bytes received of it)"
                )
            error = ErrorInfo("TimeoutError", message)
            self._replace(sess, live, kill=True)
            if not ephemeral and self._durable():
                notices.append(
                    f"timed out after {limit:g} s and ignored the interrupt for {grace:g} s: the "
                    f"container was killed; session {name!r} comes back on its next call as of "
                    + _last_saved(live, "its last successful execution")
                )
            elif not ephemeral:
                notices.append(
                    f"timed out after {limit:g} s and ignored the interrupt for {grace:g} s: the "
                    f"container was killed and session {name!r} was reset "
                    "(its variables, imports and /tmp files are lost)"
                )
                sess.notices.append(
                    f"session {name!r} was reset because its previous execution timed out and "
                    "had to be killed: variables, imports and /tmp files from before are gone"
                )
        else:
            reason = live.failure_reason
            with anyio.move_on_at(by):
                reason = await self._exit_reason(live)
            status = "timeout" if timed_out else "crashed"
            error = ErrorInfo("SandboxCrashed", reason)
            self._replace(sess, live, kill=True)
            if not ephemeral and self._durable():
                notices.append(
                    f"the sandbox of session {name!r} failed: {reason}; the next call runs in a "
                    "new sandbox restored to "
                    + _last_saved(live, "the state after the last successful execution")
                )
            elif not ephemeral:
                notices.append(
                    f"the sandbox of session {name!r} failed: {reason}; it was replaced by a fresh "
                    "one and the session's state (variables, imports, /tmp files) was lost"
                )
                sess.notices.append(
                    f"session {name!r} was reset after its sandbox failed ({reason}): variables, "
                    "imports and /tmp files from before are gone"
                )
        output = execution.output
        await output.finish()
        full_path: str | None = None
        if output.truncated:
            with anyio.move_on_at(by) as keeping:
                full_path = await self._keep_full_output(live, execution, notices, ephemeral)
            if keeping.cancelled_caught:
                notices.append(f"{self._summary(output)}; the full output was not kept in time")
            stdout, stderr = output.render(_MARKER)
        else:
            stdout, stderr = output.render("")
        if execution.dropped_images:
            notices.append(f"{execution.dropped_images} image(s) were dropped (limit reached)")
        if dropped := execution.progress_gate.dropped:
            notices.append(
                f"{dropped} progress update(s) were not relayed (more than "
                f"{PROGRESS_RATE:g} per second)"
            )
        return ExecutionResult(
            status=status,
            session=name,
            stdout=stdout,
            stderr=stderr,
            value=_shown_value(result.value) if result is not None else None,
            error=_shown_error(error),
            images=tuple(execution.images),
            duration=duration,
            notices=tuple(notices),
            truncated=output.truncated,
            full_output_path=full_path,
        )

    @staticmethod
    def _summary(output: OutputCollector) -> str:
        return f"output truncated to {output.cap:,} of {output.chars:,} characters"

    async def _keep_full_output(
        self, live: LiveSandbox, execution: Execution, notices: list[str], ephemeral: bool
    ) -> str | None:
        output = execution.output
        summary = self._summary(output)
        spill = output.spill
        shared = live.sandbox.shared_dir
        if ephemeral:
            notices.append(f"{summary}; the full output was not kept (sessions do not persist)")
            return None
        if not live.alive:
            notices.append(f"{summary}; the full output was lost with the sandbox")
            return None
        if spill is None or shared is None:
            notices.append(
                f"{summary}; the full output was not kept (the runtime shares no directory "
                "with the sandbox)"
            )
            return None
        if spill.error is not None:
            notices.append(f"{summary}; the full output was not kept: {spill.error}")
            return None
        try:
            path = await spill.keep(shared, f"{execution.id}.txt")
        except OSError as exc:
            notices.append(f"{summary}; the full output could not be saved ({exc.strerror or exc})")
            return None
        partial = f" (its first {spill.size:,} bytes only)" if spill.incomplete else ""
        notices.append(f"{summary}; the full output{partial} is in {path} inside the session")
        return path

    async def _finish_cancelled(
        self, sess: Session, live: LiveSandbox, execution: Execution
    ) -> None:
        """After a cancelled execution: wait the grace period, kill if it did not stop."""
        try:
            with anyio.move_on_after(self.config.interrupt_grace):
                await execution.done.wait()
            live.finish(execution)
            if execution.result is None:
                reason = (
                    f"did not stop within {self.config.interrupt_grace:g} s of the interrupt"
                    if live.alive
                    else await self._exit_reason(live)
                )
                self._replace(sess, live, kill=True)
                lost = (
                    "it comes back as of " + _last_saved(live, "its last successful execution")
                    if self._durable()
                    else "the session's state was lost"
                )
                sess.notices.append(
                    f"the previous execution in session {sess.name!r} was cancelled and {reason}: "
                    f"its container was killed and {lost}"
                )
        finally:
            with anyio.CancelScope(shield=True):
                await execution.output.aclose()
            sess.turn.release()


def _shown_value(value: str | None) -> str | None:
    if value is None:
        return None
    shown, taken = visible_head(value, VALUE_LIMIT)
    if taken < len(value):
        shown += f"... [{len(value) - taken:,} more characters]"
    return shown


def _shown_error(error: ErrorInfo | None) -> ErrorInfo | None:
    """The error as shown: made visible and bounded (its traceback keeps its end)."""
    if error is None:
        return None
    traceback, taken = visible_tail(error.traceback, TRACEBACK_LIMIT)
    if taken < len(error.traceback):
        omitted = len(error.traceback) - taken
        traceback = f"[... {omitted:,} characters of traceback omitted ...]\n{traceback}"
    return ErrorInfo(
        visible_head(error.type, TYPE_LIMIT, single_line=True)[0],
        visible_head(error.message, MESSAGE_LIMIT)[0],
        traceback,
    )


def _last_saved(live: LiveSandbox, latest: str) -> str:
    """Which state a durable session's next sandbox restores, for a notice: ``latest`` unless
    the state after its last execution was not saved (never claimed then: docs/decisions/0090)."""
    if live.durable is not None and (lost := live.durable.lost):
        return f"its last saved state (its state after its last execution was not saved: {lost})"
    return latest
