"""The workflow requests of sandbox code, answered for the caller's principal.

Each request's principal is ``CallContext.client_key``: the single stdio client, an HTTP token's
principal, or an anonymous HTTP client; nothing in ``params`` can name another. Params come from
sandbox code and are validated here (types, names, sizes) before the store sees them. A save and
a delete are each one audit record (:class:`~bridge_core.audit.WorkflowRecord`).

Search reuses the tool search's ranker (:class:`~bridge_core.catalog.ToolIndex`): a workflow is
indexed as a tool whose name is the workflow's, whose description is its description and
docstring, and whose parameters are the tools it names.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, cast

import anyio.to_thread
from bridge_protocol import ErrorCode, JSONValue

from bridge_core.audit import AuditLog, WorkflowRecord
from bridge_core.catalog import MAX_QUERY_CHARS, MAX_SEARCH_LIMIT, ToolDoc, ToolIndex
from bridge_core.gateway import CallContext
from bridge_core.workflows._limits import audit_principal, validate_name, validate_version
from bridge_core.workflows._source import WorkflowError
from bridge_core.workflows._store import WorkflowStore, WorkflowVersion

__all__ = ["Check", "WorkflowService"]

Check = Callable[[str], Awaitable[str | None]]
"""The check before running, for a workflow's source: a description of what it finds, or None."""


def _param(params: Mapping[str, Any], key: str, kind: type, default: Any = ...) -> Any:
    value = params.get(key, default)
    if value is ...:
        raise WorkflowError(f"{key!r} is required")
    if value is None and default is None:
        return None
    if (isinstance(value, bool) and kind is not bool) or not isinstance(value, kind):
        raise WorkflowError(f"{key!r} must be a {kind.__name__}, not {type(value).__name__}")
    return value


def _limit(params: Mapping[str, Any]) -> int:
    limit = _param(params, "limit", int, 5)
    if not 1 <= limit <= MAX_SEARCH_LIMIT:
        raise WorkflowError(f"limit must be between 1 and {MAX_SEARCH_LIMIT}, got {limit}")
    return cast(int, limit)


def _query(params: Mapping[str, Any]) -> str:
    query = _param(params, "query", str)
    if len(query) > MAX_QUERY_CHARS:
        raise WorkflowError(f"query is longer than {MAX_QUERY_CHARS} characters")
    return cast(str, query)


def _doc(workflow: WorkflowVersion) -> ToolDoc:
    text = " ".join(part for part in (workflow.description, workflow.facts.docstring) if part)
    named = [*workflow.facts.tools, *workflow.facts.workflows]
    return ToolDoc(
        server="",
        name=workflow.name,
        description=text,
        input_schema={"properties": {name: {} for name in named}},
    )


def _ranked(workflows: list[WorkflowVersion], query: str, limit: int) -> list[dict[str, Any]]:
    by_name = {w.name: w for w in workflows}
    return [
        {
            "kind": "workflow",
            "name": hit.tool,
            "version": by_name[hit.tool].version,
            "description": by_name[hit.tool].description or by_name[hit.tool].facts.docstring,
            "score": round(hit.score, 1),
        }
        for hit in ToolIndex(_doc(w) for w in workflows).search(query, limit)
    ]


class WorkflowService:
    """:class:`bridge_core.gateway.WorkflowRequests` over a :class:`WorkflowStore`."""

    def __init__(
        self, store: WorkflowStore, audit: AuditLog | None = None, check: Check | None = None
    ) -> None:
        self.store = store
        self.audit = audit or AuditLog(None)
        self.check = check
        """Run on a workflow's source each time it is loaded (``[check] mode nested``)."""

    async def _run(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await anyio.to_thread.run_sync(functools.partial(function, *args, **kwargs))

    async def request(self, ctx: CallContext, method: str, params: Mapping[str, Any]) -> JSONValue:
        """Answer ``method`` for ``ctx.client_key``'s workflows."""
        client = ctx.client_key
        if method == "save_workflow":
            return await self._save(ctx, params)
        if method == "list_workflows":
            listed = await self._run(self.store.list_with_versions, client)
            return [workflow.summary(versions) for workflow, versions in listed]
        if method == "search_workflows":
            query, limit = _query(params), _limit(params)
            return cast(JSONValue, await self._search(client, query, limit))
        if method == "get_workflow":
            name = validate_name(params.get("name"))
            version = validate_version(params.get("version"))
            workflow = await self._run(self.store.get, client, name, version)
            await self._check(workflow)
            return {
                **workflow.summary([]),
                "source": workflow.source,
                "function": workflow.facts.function,
            }
        if method == "delete_workflow":
            name = validate_name(params.get("name"))
            version = validate_version(params.get("version"))
            deleted = await self._run(self.store.delete, client, name, version)
            await self._record(ctx, "workflow_deleted", name, deleted)
            return {"name": name, "deleted": deleted}
        raise WorkflowError(f"unknown workflow method {method[:100]!r}", ErrorCode.UNKNOWN_METHOD)

    async def _save(self, ctx: CallContext, params: Mapping[str, Any]) -> JSONValue:
        name = validate_name(params.get("name"))
        source = _param(params, "source", str)
        description = _param(params, "description", str, None)
        saved = await self._run(
            self.store.save, ctx.client_key, name, source, description, session=ctx.session
        )
        size = len(source.encode("utf-8", "surrogatepass"))
        await self._record(ctx, "workflow_saved", name, [saved.version], size)
        return {"name": saved.name, "version": saved.version}

    async def _check(self, workflow: WorkflowVersion) -> None:
        if self.check is None:
            return
        found = await self.check(workflow.source)
        if found is not None:
            raise WorkflowError(
                f"workflow {workflow.name!r} version {workflow.version} does not pass the check "
                f"before running, so it was not loaded:\n{found}"
            )

    async def _search(self, client: str | None, query: str, limit: int) -> list[dict[str, Any]]:
        workflows = await self._run(self.store.latest, client)
        if not workflows:
            return []
        return cast(
            list[dict[str, Any]], await anyio.to_thread.run_sync(_ranked, workflows, query, limit)
        )

    async def add_to_search(
        self, ctx: CallContext, params: Mapping[str, Any], hits: JSONValue
    ) -> JSONValue:
        """Tool ``hits`` (each marked ``"kind": "tool"``) first, as a search always answered,
        then the caller's matching workflows (at most ``limit`` of each): code written for tool
        hits (``matches[0]["server"]``) keeps working when a workflow matches better."""
        query, limit = _query(params), _limit(params)
        tools = [
            {**hit, "kind": "tool"}
            for hit in (hits if isinstance(hits, list) else [])
            if isinstance(hit, dict)
        ]
        found = await self._search(ctx.client_key, query, limit)
        return cast(JSONValue, [*tools, *found])

    async def _record(
        self,
        ctx: CallContext,
        event: str,
        name: str,
        versions: list[int],
        size: int | None = None,
    ) -> None:
        if not self.audit.enabled:
            return
        with anyio.CancelScope(shield=True):
            await self.audit.record(
                WorkflowRecord(
                    event=event,
                    principal=audit_principal(ctx.client_key),
                    session=ctx.session,
                    execution_id=ctx.execution_id,
                    workflow=name,
                    versions=tuple(versions),
                    source_bytes=size,
                )
            )
