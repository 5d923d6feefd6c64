"""The 2026-07-28 Tasks extension (``io.modelcontextprotocol/tasks``) over the bridge's runs
(:class:`~._run_registry.Runs`).

A ``run_python`` call of a client that declares the extension and is still running after
:data:`~._run_calls.TASK_GRACE` answers with a task handle (``resultType: "task"``); the client
then polls ``tasks/get`` (state, the latest output as the status message, the questions waiting
for an answer, and once it ends the result a plain call would have returned), answers questions
with ``tasks/update`` and stops the code with ``tasks/cancel``. A task is a run: it belongs to
the client that started it, and another gets ``-32602`` as for an id that never existed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from pydantic import Field

from mcp_code_execution_mode._clients import request_client
from mcp_code_execution_mode._run_calls import (
    TASKS_EXTENSION,
    declares_tasks,
    final_wire,
    task_handle,
)
from mcp_code_execution_mode._run_registry import UnknownRun, shown_keys
from mcp_code_execution_mode._runs import Run
from mcp_code_execution_mode.rendering import OutputMode

if TYPE_CHECKING:
    from mcp_code_execution_mode._executor import BridgeState

__all__ = ["MISSING_CLIENT_CAPABILITY", "serve_tasks"]

MISSING_CLIENT_CAPABILITY = -32021
"""SEP-2575's error for a method the client did not negotiate."""


class TaskParams(types.RequestParams):
    task_id: str = Field(alias="taskId", max_length=200)


class TaskUpdateParams(TaskParams):
    input_responses: dict[str, Any] = Field(default_factory=dict, alias="inputResponses")


def _run(ctx: ServerRequestContext[BridgeState], task_id: str) -> Run:
    if not declares_tasks(ctx):
        raise MCPError(
            MISSING_CLIENT_CAPABILITY,
            f"tasks need the {TASKS_EXTENSION} extension declared in the client's capabilities",
            data={"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
        )
    client = None
    if ctx.request is not None:
        client = request_client(ctx.request.scope, ctx.request.headers)
    try:
        run = ctx.lifespan_context.runs.get(task_id, client)
    except UnknownRun as exc:
        raise MCPError(types.INVALID_PARAMS, str(exc)) from None
    if not run.as_task:  # a run of this client that is not a task (a yielded run)
        raise MCPError(types.INVALID_PARAMS, f"unknown task {task_id[:40]!r}")
    return run


async def _get(ctx: ServerRequestContext[BridgeState], params: TaskParams) -> dict[str, Any]:
    run = _run(ctx, params.task_id)
    detailed = task_handle(run)
    if run.state == "input_required":
        detailed["inputRequests"] = {
            q.key: q.wire() for q in run.questions.values() if not q.answered.is_set()
        }
    elif run.state == "completed":
        mode: OutputMode = (
            "toon" if ctx.lifespan_context.settings.output_mode == "toon" else "compact"
        )
        detailed["result"] = run.wire_result or final_wire(run, mode, addressed=False)
    elif run.state == "failed":
        detailed["error"] = {"code": types.INTERNAL_ERROR, "message": run.failure or "failed"}
    return detailed


async def _update(
    ctx: ServerRequestContext[BridgeState], params: TaskUpdateParams
) -> dict[str, Any]:
    run = _run(ctx, params.task_id)
    unknown = run.answer(params.input_responses)
    if unknown and len(unknown) == len(params.input_responses):
        raise MCPError(
            types.INVALID_PARAMS,
            f"inputResponses {shown_keys(unknown)} answer no question this task is waiting for",
        )
    return {}


async def _cancel(ctx: ServerRequestContext[BridgeState], params: TaskParams) -> dict[str, Any]:
    _run(ctx, params.task_id).cancel()
    return {}


def serve_tasks(server: Server[Any]) -> None:
    """Advertise the Tasks extension on ``server`` and answer its methods."""
    server.extensions[TASKS_EXTENSION] = {}
    server.add_request_handler("tasks/get", TaskParams, _get)
    server.add_request_handler("tasks/update", TaskUpdateParams, _update)
    server.add_request_handler("tasks/cancel", TaskParams, _cancel)
