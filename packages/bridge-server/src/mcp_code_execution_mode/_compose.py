"""Wire the real pieces together for ``serve``: discovery → upstream pool → gateway → sessions.

Everything here is entered once, by the server's lifespan, and torn down when it ends: the
session manager stops every sandbox, the pool stops every upstream server process.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
from bridge_core.approval import ApprovalRules
from bridge_core.audit import AuditLog
from bridge_core.catalog import (
    CheckCatalog,
    Finding,
    ToolCache,
    ToolDoc,
    TypeCheck,
    check_cell,
    checker_missing_advice,
    describe_findings,
    find_type_checker,
    type_check,
)
from bridge_core.discovery import DiscoveryReport, discover
from bridge_core.errors import ConfigError
from bridge_core.policy import Policy
from bridge_core.private_files import private_dir
from bridge_core.proxy import ProxyGateway, ProxyOptions, open_proxy
from bridge_core.redaction import Redactor
from bridge_core.runtime.base import CheckedRuntime, SandboxLimits
from bridge_core.runtime.detect import detect_runtime
from bridge_core.sessions import DEFAULT_SESSION, SessionStore, StoreSettings, validate_session_name
from bridge_core.sessions.manager import SessionManager
from bridge_core.sessions.types import ExecutionListener, ExecutionResult, SessionConfig
from bridge_core.workflows import WorkflowService, WorkflowStore
from bridge_protocol import ErrorInfo
from mcp.types import Tool

from mcp_code_execution_mode._image_supply import image_advice, require_image
from mcp_code_execution_mode._logging import mask_logs
from mcp_code_execution_mode._telemetry import exporting_traces, trace_export_from_env
from mcp_code_execution_mode.server import Executor, ExecutorFactory
from mcp_code_execution_mode.settings import Settings, runtime_target

__all__ = [
    "discover_servers",
    "executor_factory",
    "open_workflows",
    "private_state_dir",
    "proxy_options",
    "session_config",
    "session_store",
]

logger = logging.getLogger(__name__)


def session_config(settings: Settings, *, single_client: bool = False) -> SessionConfig:
    """The session manager's configuration from the settings (``single_client``: a stdio
    bridge, whose warm pool serves its one client only). The bounds on one sandbox's calls in
    flight are fixed constants (``bridge_core.sessions._budget``), not settings."""
    return SessionConfig(
        image=settings.image,
        limits=SandboxLimits(
            memory_bytes=settings.memory_limit,
            pids=settings.pids_limit,
            cpu_quota=settings.cpu_quota,
            tmpfs_bytes=settings.tmpfs_size,
        ),
        security_opt=settings.security_opt,
        pool_size=settings.pool_size,
        pool_imports=settings.pool_imports,
        max_sessions=settings.max_sessions,
        max_sessions_per_client=settings.max_sessions_per_client,
        idle_ttl=settings.session_ttl,
        start_timeout=settings.sandbox_start_timeout,
        persist=settings.session_persist,
        default_timeout=settings.timeout,
        max_timeout=settings.max_timeout,
        output_cap=settings.output_cap,
        image_advice=image_advice(settings),
        pool_preimport=single_client,
    )


def session_store(settings: Settings, sessions_dir: Path) -> SessionStore:
    """Where this bridge saves its sessions, from the settings."""
    return SessionStore(
        sessions_dir,
        StoreSettings(
            name=settings.session_store,
            max_bytes=settings.session_state_max,
            disk_limit=settings.session_state_disk,
            client_share=settings.session_state_disk_per_client,
            retention=settings.session_state_retention,
        ),
    )


def proxy_options(settings: Settings, *, process_dir: Path | None = None) -> ProxyOptions:
    """How upstream servers are started, timed and bounded, from the settings (the longest
    message is the fixed ``MAX_UPSTREAM_MESSAGE``)."""
    return ProxyOptions(
        call_timeout=settings.call_timeout,
        start_timeout=settings.server_start_timeout,
        max_tools=settings.max_server_tools,
        max_tool_list_bytes=settings.max_tool_list_size,
        process_dir=process_dir,
    )


def _discover_sync(settings: Settings) -> DiscoveryReport:
    # MCP_BRIDGE_DISCOVER=false: only the explicit file counts, no client configuration files.
    return discover(explicit=settings.config, clients=settings.discover)


async def discover_servers(settings: Settings) -> DiscoveryReport:
    """Discovery per the settings (file reads run in a worker thread)."""
    return await anyio.to_thread.run_sync(functools.partial(_discover_sync, settings))


async def private_state_dir(settings: Settings) -> Path:
    """The state dir, created or tightened to 0700 (an older version made it 0755).

    It holds the channel sockets of the sandboxes, the tool cache, spilled output and process
    records: other local accounts get nothing of it. Raises :class:`ConfigError` naming the
    setting when it cannot be made private (owned by another account, a shared /tmp-like
    directory, not creatable).
    """
    path = settings.resolved_state_dir
    try:
        return await anyio.to_thread.run_sync(_tighten_state_dir, path)
    except OSError as exc:
        raise ConfigError(f"state directory {path} (MCP_BRIDGE_STATE_DIR): {exc}") from exc


def _tighten_state_dir(path: Path) -> Path:
    private_dir(path)
    # Its directories (runtime, tools, upstream, sessions ...) are the bridge's too; an older
    # version made them 0755. The state dir alone would already keep others out: defence in depth.
    for entry in path.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            private_dir(entry)
    return path


CHECK_FAILED = "CheckFailed"
"""The error type of a cell the check before running blocked ([check] mode)."""


TYPE_CHECKS_AT_ONCE = 2
"""Type checks (child processes of up to 1 GiB and 10 s of CPU each) running at once for the whole
bridge, whatever the number of clients: a ``nested`` cell that finds them all busy runs without
warnings instead of waiting; an ``all`` cell waits its turn."""


class OpenBridge:
    """The session manager (the :class:`Executor`) and the gateway its sessions call through,
    which direct tools use too (one path for every proxied call).

    Every ``run_python`` execution passes through :meth:`execute`, so the check before running
    is made here, on the host, before any frame reaches a sandbox: the literal nested calls
    (modes ``nested`` and ``all``) block the cell; the type check (``type_checker``, ty) blocks
    it in mode ``all`` and, in mode ``nested``, runs beside the cell and adds its findings to
    the result as notices.
    """

    def __init__(
        self,
        manager: SessionManager,
        gateway: ProxyGateway,
        *,
        check: str = "nested",
        workflows: WorkflowStore | None = None,
        type_checker: str | None = None,
    ):
        self.manager = manager
        self.gateway = gateway
        self.check = check
        self.workflows = workflows
        self.type_checker = type_checker
        """The ty executable (None: no type check)."""
        self._type_checks = anyio.CapacityLimiter(TYPE_CHECKS_AT_ONCE)
        self._converted: dict[str, tuple[object, list[ToolDoc]]] = {}
        """Each server's live list as docs, kept while the pool holds that same list object."""

    async def execute(
        self,
        code: str,
        *,
        session: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - the Executor protocol
        reset: bool = False,
        listener: ExecutionListener | None = None,
        client: str | None = None,
    ) -> ExecutionResult:
        run = functools.partial(
            self.manager.execute,
            code,
            session=session,
            timeout=timeout,
            reset=reset,
            listener=listener,
            client=client,
        )
        if self.check == "off":
            return await run()
        blocked = await self._blocked(code, session)
        if blocked is not None:
            return blocked
        if self.type_checker is None:
            return await run()
        if self.check == "all":
            typed = await self._type_check(code, wait=True)
            if typed.findings:
                return self._blocked_result(typed.findings, session)
            return _with_notices(await run(), typed, blocking=True)
        # nested: the type check only helps explain a failure, so it runs once a cell failed; a
        # cell that worked costs nothing (a check per cell took a 50-client bridge on 2 cores
        # from 381 to 86 calls/s: bench/team.py, docs/decisions/0103).
        result = await run()
        if result.status != "error":
            return result
        typed = await self._type_check(code, wait=False)
        return _with_notices(result, TypeCheck(findings=typed.findings), blocking=False)

    async def _type_check(self, code: str, *, wait: bool) -> TypeCheck:
        """The type check of ``code``, at most :data:`TYPE_CHECKS_AT_ONCE` for the whole bridge;
        without ``wait`` (warnings only) none when they are all busy."""
        assert self.type_checker is not None
        if not wait and self._type_checks.available_tokens < 1:
            return TypeCheck()  # advisory: a cell is never held for a warning
        # A worker thread waits on the bounded child (TYPE_CHECK_TIMEOUT); a cancelled caller
        # leaves it to end on its own bound, holding its place until then.
        return await anyio.to_thread.run_sync(
            type_check,
            code,
            self.type_checker,
            abandon_on_cancel=True,
            limiter=self._type_checks,
        )

    async def _blocked(self, code: str, session: str | None) -> ExecutionResult | None:
        """The error result of a cell whose literal nested calls are wrong, else None. The cell
        is left as it is (no sandbox started, no reset made): it never reached one."""
        known = await self.check_catalog()
        # Parsing is bounded (MAX_CHECKED_CHARS) but a large cell still takes milliseconds:
        # off the event loop, so other sessions' frames keep flowing meanwhile.
        findings = await anyio.to_thread.run_sync(check_cell, code, known)
        if not findings:
            return None
        return self._blocked_result(findings, session)

    @staticmethod
    def _blocked_result(findings: Sequence[Finding], session: str | None) -> ExecutionResult:
        name = validate_session_name(DEFAULT_SESSION if session is None else session)
        error = ErrorInfo(type=CHECK_FAILED, message=describe_findings(findings))
        return ExecutionResult(status="error", session=name, error=error)

    async def check_catalog(self) -> CheckCatalog:
        """What the check knows, without starting any server: each visible server's live list
        (every tool, allowed or not), else its known list (memory, the tool cache), else None.
        A list that may lack a tool the server has now (from the cache, or with a change still
        to be listed) is provisional: a tool it lacks is left to run time."""
        catalog = self.gateway.catalog
        tools: dict[str, list[ToolDoc] | None] = {}
        provisional = []
        for server in catalog.visible_servers():
            if not self.gateway.pool.tools_current(server):
                provisional.append(server)
            live = self.gateway.pool.cached_tools(server)
            if live is not None:
                kept = self._converted.get(server)
                if kept is None or kept[0] is not live:
                    kept = self._converted[server] = (live, self._docs(server, live))
                tools[server] = kept[1]
            else:
                tools[server] = await catalog.known_tools(server) or None
        policy = catalog.policy
        return CheckCatalog(
            tools,
            list(catalog.servers),
            lambda server, tool: policy.check(server, tool).allowed,
            provisional,
        )

    @staticmethod
    def _docs(server: str, live: list[Tool]) -> list[ToolDoc]:
        docs = []
        for tool in live:
            try:
                docs.append(ToolDoc.from_tool(server, tool))
            except ValueError:
                continue  # unusable (no name): the catalog skips it too
        return docs

    def holds_sessions(self, client: str | None) -> bool:
        return self.manager.holds_sessions(client)

    async def close_client(self, client: str | None) -> list[str]:
        if self.workflows is not None:  # an anonymous client's workflows end with it
            await anyio.to_thread.run_sync(self.workflows.forget, client)
        return await self.manager.close_client(client)

    async def check_workflow(self, source: str) -> str | None:
        """The check before running, on a workflow's source as it is loaded: its nested calls
        are judged like a cell's (``[check] mode nested``)."""
        known = await self.check_catalog()
        findings = await anyio.to_thread.run_sync(check_cell, source, known)
        return describe_findings(findings) if findings else None


def _with_notices(result: ExecutionResult, typed: TypeCheck, *, blocking: bool) -> ExecutionResult:
    """``result`` with what the type check has to say beside it: in mode ``nested`` its
    findings (the cell ran and failed), in mode ``all`` that it could not finish."""
    notices: list[str] = []
    if typed.incomplete is not None:
        notices.append(f"type check: the cell ran unchecked: {typed.incomplete}")
    elif typed.findings and not blocking:
        shown = "; ".join(str(f) for f in typed.findings[:MAX_TYPE_WARNINGS])
        more = len(typed.findings) - MAX_TYPE_WARNINGS
        tail = f"; and {more} more" if more > 0 else ""
        notices.append(f"type check (warning, the cell ran): {shown}{tail}")
    if not notices:
        return result
    return dataclasses.replace(result, notices=(*result.notices, *notices))


MAX_TYPE_WARNINGS = 5
"""Type findings shown beside a result: the first ones say what to look at."""


def type_checker_for(check: str) -> str | None:
    """The type checker the bridge uses in mode ``check``: ty when it is installed (mode
    ``nested`` without it has no type warnings). Mode ``all`` without it is an error at start."""
    if check == "off":
        return None
    found = find_type_checker()
    if found is None and check == "all":
        raise ConfigError(checker_missing_advice())
    return found


@asynccontextmanager
async def open_workflows(state_dir: Path) -> AsyncIterator[WorkflowStore]:
    """The workflow store under ``state_dir / "workflows"`` for one bridge lifetime."""
    store = WorkflowStore(state_dir / "workflows")
    await anyio.to_thread.run_sync(store.open)
    try:
        yield store
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(store.close)


def executor_factory(settings: Settings, *, single_client: bool = False) -> ExecutorFactory:
    """Opens the whole bridge for one server lifetime; yields the session manager
    (``single_client``: served over stdio)."""

    @asynccontextmanager
    async def open_executor() -> AsyncIterator[Executor]:
        type_checker = type_checker_for(settings.check)  # mode all without ty: fails here, first
        report = await discover_servers(settings)
        servers = list(report.servers.values())
        mask_logs(Redactor.for_servers(servers))
        logger.info("proxying %d MCP server(s): %s", len(servers), ", ".join(report.servers))
        state_dir = await private_state_dir(settings)
        options = proxy_options(settings, process_dir=state_dir / "upstream")
        policy = Policy.from_settings(
            allow_servers=settings.allow_servers,
            deny_servers=settings.deny_servers,
            allow_tools=settings.allow_tools,
            deny_tools=settings.deny_tools,
        )
        approvals = ApprovalRules.from_settings(
            mode=settings.approval,
            tools=settings.approve_tools,
            timeout=settings.approval_timeout,
            fallback=settings.approval_fallback,
        )
        preference = None if settings.runtime == "auto" else settings.runtime

        async def connect_runtime() -> CheckedRuntime:
            backend = await detect_runtime(
                preference, state_dir=state_dir / "runtime", target=runtime_target(settings)
            )
            try:
                # The image is checked against its pin (pulled by digest and verified if need
                # be) before any sandbox starts: bridge_image.supply.
                supplied = await anyio.to_thread.run_sync(require_image, settings, backend.name)
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await backend.aclose()
                raise
            # Sandboxes start from the ID that was checked: the name could be re-tagged to
            # another image after the check.
            return CheckedRuntime(backend, supplied.image_id if supplied is not None else None)

        async with (
            exporting_traces(trace_export_from_env()),
            open_proxy(
                servers,
                options=options,
                policy=policy,
                cache=ToolCache(
                    state_dir,
                    max_tools=settings.max_server_tools,
                    max_bytes=settings.max_tool_list_size,
                ),
                audit=AuditLog(settings.audit_log),
                approvals=approvals,
            ) as gateway,
            SessionManager(
                session_config(settings, single_client=single_client),
                runtime=connect_runtime,
                gateway=gateway,
                state_dir=state_dir / "sessions",
                store=session_store(settings, state_dir / "sessions"),
            ) as manager,
            open_workflows(state_dir) as workflows,
        ):
            bridge = OpenBridge(
                manager,
                gateway,
                check=settings.check,
                workflows=workflows,
                type_checker=type_checker,
            )
            check = bridge.check_workflow if settings.check != "off" else None
            gateway.workflows = WorkflowService(workflows, gateway.audit, check)
            yield bridge

    return open_executor
