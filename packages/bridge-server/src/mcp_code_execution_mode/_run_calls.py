"""How a ``run_python`` request meets its :class:`~._runs.Run`: it starts one (or finds it by id),
waits, and answers with what the client can take — the result, a task, a yielded run, or the
questions the run needs answered (``input_required``). See docs/long-runs.md.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

import anyio
import mcp_types as types
from anyio.abc import TaskGroup
from bridge_core._visible import visible, visible_tail
from bridge_core.client_link import Capability
from mcp.server.context import ServerRequestContext
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp_code_execution_mode._client_link import RequestLink
from mcp_code_execution_mode._run_registry import KEEP_FINISHED, Runs, shown_keys
from mcp_code_execution_mode._runs import AnswerRefused, Question, Run
from mcp_code_execution_mode.rendering import OutputMode, error_wire, render_wire

if TYPE_CHECKING:
    from bridge_core.sessions.types import ExecutionListener

__all__ = [
    "CANCEL_WAIT",
    "POLL_INTERVAL_MS",
    "TASKS_EXTENSION",
    "TASK_GRACE",
    "answered_run",
    "capabilities_of",
    "declares_tasks",
    "final_wire",
    "task_handle",
    "wait_and_answer",
]

logger = logging.getLogger(__name__)

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
TASK_GRACE = 1.0
"""Seconds a call of a Tasks client runs before it becomes a task (a quick call stays a call)."""
POLL_INTERVAL_MS = 1000
CANCEL_WAIT = 5.0
"""Seconds ``run_python(cancel=ID)`` waits for the code to stop (interrupt, then kill)."""
STATUS_OUTPUT = 2000
"""Characters of the latest output a yielded run or a task's status message shows."""

_CAPABILITIES: dict[Capability, types.ClientCapabilities] = {
    "elicitation": types.ClientCapabilities(elicitation=types.ElicitationCapability()),
    "sampling": types.ClientCapabilities(sampling=types.SamplingCapability()),
    "roots": types.ClientCapabilities(roots=types.RootsCapability()),
}


def declares_tasks(ctx: ServerRequestContext[Any]) -> bool:
    """Whether this request's client speaks the Tasks extension (2026-07-28 only)."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    capabilities = ctx.session.client_capabilities
    extensions = capabilities.extensions if capabilities is not None else None
    return bool(extensions) and TASKS_EXTENSION in extensions  # type: ignore[operator]


def capabilities_of(ctx: ServerRequestContext[Any]) -> frozenset[Capability]:
    """What the client declared it can be asked (whether or not this request can carry it)."""
    session = ctx.session
    return frozenset(
        c for c, caps in _CAPABILITIES.items() if session.check_client_capability(caps)
    )


async def _ask_over(run: Run, link: RequestLink, question: Question) -> None:
    """Take ``question`` to the client over this request's back channel and settle it."""
    request = question.request
    try:
        if isinstance(request, types.ElicitRequest):
            answer: Any = await link.elicit(request.params)
        elif isinstance(request, types.CreateMessageRequest):
            answer = await link.create_message(request.params)
        else:
            answer = await link.list_roots()
    except anyio.get_cancelled_exc_class():
        # This request ended before its client answered (a client's request timeout cancels a
        # resume that waits on a question): a run that outlives it must ask again on the next
        # request, not wait for an answer no one will be asked for until the asker times out.
        run.return_question(question)
        raise
    except Exception as exc:  # the client failed or went away: the asker reports it
        question.error = f"{type(exc).__name__}: {exc}"[:300]
        question.answered.set()
        return
    question.settle(answer)


async def _wait(
    run: Run,
    link: RequestLink,
    relay: ExecutionListener,
    deadline: float | None,
) -> str:
    """Wait for the run; return ``ended``, ``question`` (one this request cannot ask) or
    ``deadline``. Questions this request can ask over its back channel are asked here."""
    run.listener, run.log_link = relay, link
    try:
        async with anyio.create_task_group() as tg:
            outcome = await _watch(run, link, deadline, tg)
            tg.cancel_scope.cancel()  # a question still being asked: the run has ended
        return outcome
    finally:
        run.listener = run.log_link = None


async def _watch(run: Run, link: RequestLink, deadline: float | None, tg: TaskGroup) -> str:
    while True:
        if run.finished:
            return "ended"
        pending = run.pending()
        if pending and not link.can_send_request:
            return "question"
        for question in pending:
            question.asked = True
            tg.start_soon(_ask_over, run, link, question)
        remaining = None if deadline is None else deadline - anyio.current_time()
        if remaining is not None and remaining <= 0:
            if not run.questions:
                return "deadline"
            remaining = None  # a question is being asked: its answer comes first
        with anyio.move_on_after(remaining):
            await run.changed()


def answered_run(runs: Runs, params: types.CallToolRequestParams, client: str | None) -> Run:
    """The run a retried call's ``requestState`` names (the SDK's boundary verified it: this
    bridge sealed it, for this tool, these arguments and this client), with the call's
    ``inputResponses`` delivered. Raises :class:`UnknownRun` (ended, or already answered) or
    :class:`AnswerRefused`."""
    run = runs.get(params.request_state, client)
    unknown = run.answer(params.input_responses or {})
    if unknown:
        raise AnswerRefused(
            f"inputResponses {shown_keys(unknown)} answer no question this run is waiting for"
        )
    return run


def final_wire(run: Run, mode: OutputMode, *, addressed: bool) -> dict[str, Any]:
    """The run's final result as a ``CallToolResult`` JSON object (a plain call's result; with
    ``addressed``, also its ``run_id``/``state``, and without the stdout already shown)."""
    if isinstance(run.result, types.CallToolResult):  # a direct tool's call
        wire = run.result.model_dump(by_alias=True, mode="json", exclude_none=True)
    elif run.result is not None:
        result = run.result
        if addressed and run.shown:
            shown = visible("".join(run.output_since(0)[0][: run.shown]))
            if run.output_since(0)[1] == 0 and result.stdout.startswith(shown) and shown:
                result = replace(result, stdout=result.stdout[len(shown) :])
        wire = render_wire(result, mode)
    elif run.failure is not None:
        kind = run.failure_kind
        message = run.failure
        if kind == "BridgeError" and not message.startswith("the bridge"):
            message = (
                f"the bridge failed to run this code ({message}); the session may have been reset"
            )
        wire = error_wire(message, kind=kind)
    else:
        wire = error_wire(
            "the run was cancelled: the code was interrupted (a session that ignores the "
            "interrupt is restarted, and its next call says so)",
            kind="Cancelled",
        )
    if addressed:
        payload = wire["structuredContent"]
        payload["run_id"] = run.id
        payload["state"] = "cancelled" if run.state == "cancelled" else "done"
    run.wire_result = wire
    return wire


def _yielded_wire(run: Run, waited: float) -> dict[str, Any]:
    """What a yielded run returns: the output since the last look (the code's block), then the
    bridge's block: its id and how to go on (as in every result, code cannot write the latter)."""
    text, lost = run.output_since(run.shown)
    run.shown = run.output_chars
    shown, taken = visible_tail(text, STATUS_OUTPUT * 8)
    said = []
    if lost or taken < len(text):
        said.append(f"[notice] {lost + len(text) - taken} characters of output were not kept")
    said.append(
        f"[running] still running after {waited:.1f} s as run {run.id}: "
        f'run_python(resume="{run.id}", yield_after=S) returns what comes next, '
        f'run_python(cancel="{run.id}") stops it'
    )
    blocks = [shown.removesuffix("\n")] if shown else []
    blocks.append("\n".join(said))
    return {
        "content": [{"type": "text", "text": block} for block in blocks],
        "isError": False,
        "structuredContent": {"state": "running", "run_id": run.id},
    }


def status_message(run: Run) -> str:
    tail = run.output_tail(STATUS_OUTPUT)
    if run.state == "input_required":
        return "waiting for the user to answer a question"
    if not tail:
        return {"working": "running", "completed": "done"}.get(run.state, run.state)
    return visible_tail(tail, STATUS_OUTPUT)[0]


def task_handle(run: Run) -> dict[str, Any]:
    """The task fields every task answer carries (flat, 2026-07-28 Tasks extension)."""
    return {
        "taskId": run.id,
        "status": run.state,
        "statusMessage": status_message(run),
        "createdAt": run.created_at,
        "lastUpdatedAt": run.updated_at,
        "ttlMs": int(KEEP_FINISHED * 1000),
        "pollIntervalMs": POLL_INTERVAL_MS,
    }


def _input_requests(questions: list[Question]) -> dict[str, Any]:
    return {q.key: q.wire() for q in questions}


async def wait_and_answer(
    ctx: ServerRequestContext[Any],
    run: Run,
    relay: ExecutionListener,
    link: RequestLink,
    *,
    mode: OutputMode,
    yield_after: float | None,
    addressed: bool,
    new: bool,
) -> types.CallToolResult | types.InputRequiredResult:
    """Wait for ``run`` on behalf of this request and answer as its client can take it: a new
    run of a Tasks client becomes a task unless the model asked to yield (its own choice)."""
    tasks = new and yield_after is None and declares_tasks(ctx)
    started = anyio.current_time()
    deadline = None
    if tasks:
        deadline = started + TASK_GRACE
    elif yield_after is not None:
        deadline = started + yield_after
    try:
        outcome = await _wait(run, link, relay, deadline)
    except anyio.get_cancelled_exc_class():
        if not run.detached:
            run.cancel()  # the client gave up on a plain call: its code stops, as always
        raise
    if outcome == "ended":
        wire = final_wire(run, mode, addressed=addressed)
        if not (addressed or run.as_task):
            ctx.lifespan_context.runs.forget(run)  # a replayed requestState finds no run
        return types.CallToolResult.model_validate(wire)
    run.detached = True
    if tasks:
        run.as_task = True
        # An extension result: the SDK passes a claimed resultType through on 2026-07-28
        # connections (the only ones that declare Tasks); its handler type knows core ones only.
        return cast(types.CallToolResult, {"resultType": "task", **task_handle(run)})
    if outcome == "question":
        return types.InputRequiredResult(
            input_requests=_input_requests(run.pending()), request_state=run.id
        )
    run.yielded = True
    return types.CallToolResult.model_validate(_yielded_wire(run, anyio.current_time() - started))


async def cancel_run(run: Run, mode: OutputMode) -> types.CallToolResult:
    """``run_python(cancel=ID)``: stop the run, wait (bounded) for its code to stop, and return
    what it printed since the model last looked."""
    run.cancel()
    with anyio.move_on_after(CANCEL_WAIT):
        await run.ended()
    if run.result is not None or run.failure is not None:
        wire = final_wire(run, mode, addressed=True)
    else:
        text, _lost = run.output_since(run.shown)
        shown = visible_tail(text, STATUS_OUTPUT * 8)[0].removesuffix("\n")
        said = (
            f"[cancelled] run {run.id} was cancelled: its code was interrupted (a session that "
            "ignores the interrupt is restarted, and its next call says so)"
        )
        wire = {
            "content": [{"type": "text", "text": t} for t in (shown, said) if t],
            "isError": False,
            "structuredContent": {"state": "cancelled", "run_id": run.id},
        }
    return types.CallToolResult.model_validate(wire)
