"""Running one execution on a session's sandbox: timeout, interrupt, grace, kill, crash, output.

The order of events on a timeout (the issue's contract): interrupt → wait ``interrupt_grace`` →
kill and replace the container. Partial output is always returned. Cancellation of the caller is
a timeout without a result: the interrupt is sent at once, the cancellation propagates, and a
background task (which now holds the session's turn) finishes the grace/kill sequence.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
from bridge_protocol import ErrorInfo

from bridge_core.sessions._output import OutputCollector
from bridge_core.sessions._progress import PROGRESS_RATE
from bridge_core.sessions._sandbox import Execution, LiveSandbox
from bridge_core.sessions._session import Session, Turn, status_of
from bridge_core.sessions._spill import OUTPUT_DIR, save_full_output
from bridge_core.sessions.types import ExecutionListener, ExecutionResult, SessionConfig, Status

__all__ = ["ExecutionRunner"]

logger = logging.getLogger("bridge_core.sessions")

CANCEL_INTERRUPT_TIMEOUT = 1.0
"""A cancelled caller waits at most this long for the interrupt frame to be written."""
SPILL_LIMIT = 48 * 1024 * 1024
"""Most bytes of full output kept (on the host while streaming, then in the sandbox's /tmp)."""

_MARKER = (
    "\n[... {omitted} characters omitted: the output had {total} characters and {lines} lines; "
    "{where} ...]\n"
)


class ExecutionRunner:
    """Runs executions for the manager; the manager supplies sandbox replacement and tasks."""

    def __init__(
        self,
        config: SessionConfig,
        *,
        spill_dir: Path,
        replace: Callable[..., None],
        exit_reason: Callable[[LiveSandbox], Awaitable[str]],
        background: Callable[..., bool],
    ) -> None:
        self.config = config
        self._spill_dir = spill_dir
        self._replace = replace
        self._exit_reason = exit_reason
        self._background = background

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
        spill_limit = min(SPILL_LIMIT, self.config.limits.tmpfs_bytes // 2)
        output = OutputCollector(self.config.output_cap, self._spill_dir, spill_limit=spill_limit)
        execution = Execution(uuid.uuid4().hex, output, listener)
        started = anyio.current_time()
        try:
            try:
                await live.start(execution, code)
                with anyio.move_on_at(deadline):
                    await execution.done.wait()
                timed_out = not execution.done.is_set()
                if timed_out:
                    await live.interrupt(execution)
                    with anyio.move_on_after(self.config.interrupt_grace):
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
                sess, live, execution, limit, timed_out, duration, notices, ephemeral
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
    ) -> ExecutionResult:
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
            if not ephemeral:
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
            reason = await self._exit_reason(live)
            status = "timeout" if timed_out else "crashed"
            error = ErrorInfo("SandboxCrashed", reason)
            self._replace(sess, live, kill=True)
            if not ephemeral:
                notices.append(
                    f"the sandbox of session {name!r} failed: {reason}; it was replaced by a fresh "
                    "one and the session's state (variables, imports, /tmp files) was lost"
                )
                sess.notices.append(
                    f"session {name!r} was reset after its sandbox failed ({reason}): variables, "
                    "imports and /tmp files from before are gone"
                )
        full_path = await self._keep_full_output(live, execution, notices, ephemeral)
        output = execution.output
        if output.truncated:
            where = (
                f"the full output is in {full_path}"
                if full_path
                else "the full output was not kept"
            )
            stdout, stderr = output.render(_MARKER.replace("{where}", where))
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
            value=result.value if result is not None else None,
            error=error,
            images=tuple(execution.images),
            duration=duration,
            notices=tuple(notices),
            truncated=output.truncated,
            full_output_path=full_path,
        )

    async def _keep_full_output(
        self, live: LiveSandbox, execution: Execution, notices: list[str], ephemeral: bool
    ) -> str | None:
        output = execution.output
        if not output.truncated:
            return None
        summary = f"output truncated to {output.cap:,} of {output.chars:,} characters"
        if ephemeral:
            notices.append(f"{summary}; the full output was not kept (sessions do not persist)")
            return None
        if not live.alive:
            notices.append(f"{summary}; the full output was lost with the sandbox")
            return None
        if output.spill_error is not None:
            notices.append(f"{summary}; the full output was not kept: {output.spill_error}")
            return None
        path = f"{OUTPUT_DIR}/{execution.id}.txt"
        problem = await save_full_output(live, output, path)
        if problem is not None:
            notices.append(f"{summary}; the full output could not be saved: {problem}")
            return None
        partial = (
            f" (its first {output.spilled_bytes:,} bytes only)" if output.spill_incomplete else ""
        )
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
                sess.notices.append(
                    f"the previous execution in session {sess.name!r} was cancelled and {reason}: "
                    "its container was killed and the session's state was lost"
                )
        finally:
            with anyio.CancelScope(shield=True):
                await execution.output.aclose()
            sess.turn.release()
