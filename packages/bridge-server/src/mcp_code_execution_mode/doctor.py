"""``mcp-code-execution-mode doctor``: check everything the bridge needs, say how to fix it.

Checks, in order: the state directory (made private), the log file, the container runtime
(version, rootless, API service) and the system-call filter it applies, the sandbox image and
its labels, a real sandbox running code with its memory/pids/cpu limits and its filter read back
from inside (seccomp mode, and that creating a user namespace and opening an AF_VSOCK socket
fail), then every config file looked at (found, not found, invalid) and every discovered MCP
server (its source file, whether it starts, how many tools it lists), every such file that holds
credentials while other accounts can read it, and the servers a client loads both directly and
through the bridge, with what that costs.
Exit status 1 when something needed (runtime, image, sandbox) is missing, a client config file is
unusable or the explicit config file is missing; a server that fails is reported but does not by
itself fail the check, since the bridge works without it.
"""

from __future__ import annotations

import json
import stat
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

import anyio
import mcp_types as types
from bridge_core.discovery import CheckedSource, DiscoveryReport
from bridge_core.discovery import display_path as shown_path
from bridge_core.errors import BridgeError
from bridge_core.policy import Policy
from bridge_core.redaction import Redactor, configured_secrets
from bridge_core.servers import ServerSpec

from mcp_code_execution_mode import __version__
from mcp_code_execution_mode._compose import (
    discover_servers,
    private_state_dir,
    proxy_options,
)
from mcp_code_execution_mode._doctor_report import Report
from mcp_code_execution_mode._doctor_sandbox import (
    check_image_present,
    check_runtime,
    check_sandbox,
)
from mcp_code_execution_mode._footprint import (
    BYTES_PER_TOKEN,
    double_loads,
    schema_bytes,
    token_estimate,
)
from mcp_code_execution_mode._logging import log_to_file_only
from mcp_code_execution_mode._probe import probe_servers
from mcp_code_execution_mode._telemetry import trace_export_from_env
from mcp_code_execution_mode.settings import Settings, SettingsError

__all__ = ["run_doctor"]


async def _check_state_dir(settings: Settings, report: Report) -> bool:
    try:
        path = await private_state_dir(settings)
    except BridgeError as exc:
        report.fail("state dir", str(exc), "see docs/configuration.md#state-directory")
        return False
    report.ok("state dir", f"{path} (private: only this user can enter it)")
    return True


def _files_looked_at(checked: list[CheckedSource], home: Path) -> list[str]:
    """One line per file (a file read for two scopes, like ``~/.claude.json``, once)."""
    by_path: dict[Path, list[CheckedSource]] = {}
    for source in checked:
        by_path.setdefault(source.path, []).append(source)
    lines = []
    for path, readings in by_path.items():
        clients = ", ".join(dict.fromkeys(r.client for r in readings))
        shown = shown_path(path, home)
        problem = next((r.problem for r in readings if r.problem), None)
        if problem is not None:
            lines.append(f"invalid    {shown} ({clients}): {problem}")
        elif any(r.found for r in readings):
            count = sum(len(r.usable) for r in readings)
            lines.append(f"found      {shown} ({clients}): {count} server(s)")
        else:
            lines.append(f"not found  {shown} ({clients})")
    return lines


def _check_files(settings: Settings, discovery: DiscoveryReport, report: Report) -> None:
    home = Path.home()
    report.ok("discovery", f"{len(discovery.servers)} server(s); files looked at:")
    for line in _files_looked_at(discovery.sources_checked, home):
        report._print(f"         {line}")
    for source in discovery.sources_checked:
        if source.problem is not None:
            report.fail(
                "config file",
                f"{shown_path(source.path, home)} ({source.client}) is unusable: {source.problem}",
                "correct the file (the client that owns it cannot read it either); until then "
                "its servers are skipped",
            )
    explicit = settings.config
    if explicit is not None and not explicit.is_file():
        report.fail(
            "config file",
            f"the explicit config file {explicit} does not exist",
            "create it, or correct MCP_BRIDGE_CONFIG / --config",
        )
    for problem in discovery.problems:
        if problem.severity == "info":
            # Skipped on purpose (the bridge's own entry, a disabled one): as expected.
            report.ok("discovery", str(problem).removeprefix("info: "))
        elif problem.entry is not None or problem.severity != "error":
            report.warn("discovery", str(problem))
    for conflict in discovery.conflicts:
        report.warn("discovery", f"{conflict.name!r} defined again in {', '.join(conflict.losers)}")
    _check_readable_secrets(discovery, home, report)


def _check_readable_secrets(discovery: DiscoveryReport, home: Path, report: Report) -> None:
    """Warn about each config file other accounts can read that holds a credential literally.

    What counts as a credential is the bridge's redaction rule, applied to the servers read from
    the file; a value taken from the environment (``${GITHUB_TOKEN}``) is not in the file, so
    the check looks for each secret in the file's own text."""
    for source in discovery.sources_checked:
        if not source.found or source.problem is not None:
            continue
        try:
            mode = stat.S_IMODE(source.path.stat().st_mode)
            if not mode & (stat.S_IRGRP | stat.S_IROTH):
                continue
            text = source.path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        where = shown_path(source.path, home)
        holding = [
            name
            for name, spec in discovery.servers.items()
            if spec.source.startswith(f"{where}#") and _written_in(configured_secrets(spec), text)
        ]
        if holding:
            report.warn(
                "config file",
                f"{where} can be read by other accounts (mode {mode:o}) and holds credentials "
                f"(servers {', '.join(map(repr, holding))})",
                f"chmod 600 {source.path}",
            )


def _written_in(secrets: set[str], text: str) -> bool:
    # As the file spells them: JSON escapes a quote or a backslash (TOML basic strings alike).
    return any(s in text or json.dumps(s, ensure_ascii=False)[1:-1] in text for s in secrets)


def _check_double_loads(
    discovery: DiscoveryReport,
    proxied: dict[str, ServerSpec],
    tools: dict[str, list[types.Tool] | str],
    report: Report,
) -> None:
    home = Path.home()
    for double in double_loads(discovery.sources_checked, proxied):
        listed = tools.get(double.name)
        if isinstance(listed, list):
            size = schema_bytes(listed)
            cost = (
                f"its {len(listed)} tool schema(s) cost ~{token_estimate(size):,} tokens "
                f"(estimate: {size:,} bytes / {BYTES_PER_TOKEN}) on every request"
            )
        else:
            cost = "its tool schemas cost tokens on every request (it did not start here)"
        where = shown_path(double.source.path, home)
        if double.source.scope == "user":
            fix = f"mcp-code-execution-mode setup {double.app} (moves it behind the bridge)"
        else:
            fix = f"remove it from {where}: the bridge proxies it in that project already"
        report.warn(
            f"server {double.name!r}",
            f"loaded twice: directly by {double.source.client} ({where}) and through the "
            f"bridge; {cost}",
            fix + f", or hide it from the bridge: add {double.name!r} to [policy] deny_servers in "
            "bridge.toml",
        )


async def _check_servers(settings: Settings, report: Report) -> None:
    discovery = await discover_servers(settings)
    report.redactor = Redactor.for_servers(discovery.servers.values())
    _check_files(settings, discovery, report)
    policy = Policy.from_settings(
        allow_servers=settings.allow_servers,
        deny_servers=settings.deny_servers,
        allow_tools=settings.allow_tools,
        deny_tools=settings.deny_tools,
    )
    proxied = {n: s for n, s in discovery.servers.items() if policy.check_server(n).allowed}
    results = await probe_servers(proxied.values(), proxy_options(settings))
    for name, spec in proxied.items():
        outcome = results.get(name, "not checked")
        if isinstance(outcome, list):
            report.ok(f"server {name!r}", f"starts, lists {len(outcome)} tool(s) [{spec.source}]")
        else:
            report.warn(
                f"server {name!r}",
                f"{outcome} [{spec.source}]",
                "check its command and env in that file; [policy] deny_servers in bridge.toml "
                "hides it",
            )
    _check_double_loads(discovery, proxied, results, report)
    _check_tools_mode(settings, policy, results, report)


def _check_tools_mode(
    settings: Settings,
    policy: Policy,
    results: Mapping[str, list[types.Tool] | str],
    report: Report,
) -> None:
    """The tools a client is given in this mode, and what their definitions cost per request."""
    from mcp_code_execution_mode._direct import client_tools
    from mcp_code_execution_mode.tool import run_python_tool

    allowed = [
        (server, tool)
        for server, tools in results.items()
        if isinstance(tools, list)
        for tool in tools
        if policy.check(server, tool.name).allowed
    ]
    # The servers ran for this check: their App tools count in code mode as they do once they
    # ran for the bridge (its code-mode listing shows the App tools it knows).
    listed = client_tools(settings.tools, run_python_tool(), allowed, report.redactor)
    size = schema_bytes(listed)
    report.ok(
        "tools",
        f"mode {settings.tools}: lists {len(listed)} tool(s), ~{token_estimate(size):,} tokens "
        f"of definitions per request (estimate: {size:,} bytes / {BYTES_PER_TOKEN})",
    )


def _check_traces(report: Report, environ: Mapping[str, str] | None = None) -> None:
    """Whether traces are exported, by which variable (its value may hold a credential)."""
    try:
        export = trace_export_from_env(environ)
    except SettingsError as exc:
        report.fail("traces", str(exc), exc.fix)
        return
    if export is None:
        report.ok("traces", "off (no OTEL_EXPORTER_OTLP_ENDPOINT; docs/observability.md)")
    else:
        report.ok("traces", f"exported over OTLP/HTTP (endpoint from {export.endpoint_variable})")


def _report_settings_file(settings: Settings, report: Report) -> None:
    # Read (and validated) with the other settings before doctor runs: a bad key never gets here.
    path = settings.settings_file
    if path is not None:
        report.ok("settings file", f"{path}" if path.is_file() else f"none ({path} is not there)")
    for deprecation in settings.deprecations:
        report.warn("deprecated", deprecation.line, deprecation.fix)


async def run_doctor(settings: Settings, out: TextIO | None = None) -> int:
    """Run every check, print the findings; return 0 when everything needed is there, else 1."""
    # Each finding is one of doctor's lines: the log records behind them (discovery's warnings,
    # a server's failed start) go to the log file, whose path is the first line.
    log_to_file_only()
    report = Report(out or sys.stdout)
    print(f"mcp-code-execution-mode {__version__} doctor", file=report.out)
    log_file = settings.resolved_log_file
    report.ok("log file", str(log_file) if log_file else "off (MCP_BRIDGE_LOG_FILE=off)")
    _report_settings_file(settings, report)
    _check_traces(report)
    backend = None
    if await _check_state_dir(settings, report):
        backend = await check_runtime(settings, report)
    if backend is not None:
        try:
            checked = await anyio.to_thread.run_sync(check_image_present, settings, backend, report)
            if checked is not None:
                await check_sandbox(settings, checked, report)
        finally:
            with anyio.CancelScope(shield=True):
                await backend.aclose()
    await _check_servers(settings, report)
    print("result: " + ("PROBLEMS FOUND" if report.failed else "ready"), file=report.out)
    return 1 if report.failed else 0
