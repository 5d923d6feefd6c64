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

import ast
import dataclasses
import json
import shutil
import stat
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import anyio
import mcp_types as types
from bridge_core.discovery import CheckedSource, DiscoveryReport
from bridge_core.discovery import display_path as shown_path
from bridge_core.errors import BridgeError
from bridge_core.gateway import NullGateway
from bridge_core.policy import Policy
from bridge_core.redaction import Redactor, configured_secrets
from bridge_core.runtime import user_seccomp_option
from bridge_core.runtime.base import (
    IMAGE_BUILD_COMMAND,
    CheckedRuntime,
    RuntimeBackend,
    RuntimeInfo,
)
from bridge_core.runtime.detect import detect_runtime
from bridge_core.servers import ServerSpec
from bridge_core.sessions import visible
from bridge_core.sessions.manager import SessionManager
from bridge_image.names import (
    LABEL_PROTOCOL_VERSIONS,
    LABEL_REVISION,
    LABEL_SANDBOX_CLIENT_VERSION,
    LABEL_VARIANT,
)

from mcp_code_execution_mode import __version__
from mcp_code_execution_mode._compose import (
    discover_servers,
    private_state_dir,
    proxy_options,
    session_config,
)
from mcp_code_execution_mode._footprint import (
    BYTES_PER_TOKEN,
    double_loads,
    schema_bytes,
    token_estimate,
)
from mcp_code_execution_mode._image_supply import check_image
from mcp_code_execution_mode._logging import log_to_file_only
from mcp_code_execution_mode._probe import probe_servers
from mcp_code_execution_mode._telemetry import trace_export_from_env
from mcp_code_execution_mode._units import format_size
from mcp_code_execution_mode.settings import Settings, SettingsError, runtime_target

__all__ = ["run_doctor"]

SANDBOX_CHECK_TIMEOUT = 120.0
"""Starting the first sandbox can include creating the image's overlay layers: be generous."""

# Tried in a child process, so that a sandbox without the filter is not changed by the check.
_FILTER_ATTEMPTS = """
import ctypes, socket
libc = ctypes.CDLL(None, use_errno=True)
unshare = 0 if libc.unshare(0x10000000) == 0 else ctypes.get_errno()  # CLONE_NEWUSER
try:
    socket.socket(40, socket.SOCK_STREAM).close()  # AF_VSOCK
    vsock = 0
except OSError as exc:
    vsock = exc.errno
print(unshare, vsock)
"""
# Read back inside the sandbox: cgroup v2 files first, then the v1 hierarchy; the seccomp mode
# and the errno of the attempts above.
_LIMITS_PROBE = f"""
import pathlib, subprocess, sys
def read(*names):
    for name in names:
        p = pathlib.Path("/sys/fs/cgroup") / name
        if p.exists():
            return p.read_text().split()[0]
    return None
_status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines())
_tried = subprocess.run([sys.executable, "-c", {_FILTER_ATTEMPTS!r}], capture_output=True,
                        text=True, timeout=60)
{{"memory": read("memory.max", "memory/memory.limit_in_bytes"),
 "pids": read("pids.max", "pids/pids.max"),
 "cpu_quota": read("cpu.max", "cpu/cpu.cfs_quota_us"),
 "seccomp": _status["Seccomp"].strip(),
 "refused": _tried.stdout.split()}}
"""
_REFUSED = ["1", "97"]  # EPERM, EAFNOSUPPORT


@dataclass
class _Report:
    """The findings, one line each. Details quote text from upstream servers, config files and
    the runtime (an error, a server name, pull progress): every line has its control, bidi and
    line-separator characters escaped, so none can clear the terminal or fake a finding."""

    out: TextIO
    failed: bool = False
    redactor: Redactor = dataclasses.field(default_factory=Redactor)
    """The servers' secrets, once discovered: an upstream's error may quote its own token."""

    def _print(self, line: str, *, flush: bool = False) -> None:
        print(visible(self.redactor.text(line), single_line=True), file=self.out, flush=flush)

    def progress(self, line: str) -> None:
        self._print(f"       {line[:300]}", flush=True)

    def ok(self, what: str, detail: str) -> None:
        self._print(f"[ok]   {what}: {detail}")

    def warn(self, what: str, detail: str, fix: str = "") -> None:
        self._print(f"[warn] {what}: {detail}")
        if fix:
            self._print(f"       fix: {fix}")

    def fail(self, what: str, detail: str, fix: str) -> None:
        self.failed = True
        self._print(f"[FAIL] {what}: {detail}")
        self._print(f"       fix: {fix}")


def _inspect_image(cli: str, image: str) -> dict[str, Any] | None:
    # The runtime interface has no image query; the runtime's own CLI reads the same storage.
    binary = shutil.which(cli)
    if binary is None:
        return None
    proc = subprocess.run(
        [binary, "image", "inspect", image], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        return None
    data = json.loads(proc.stdout)
    return data[0] if isinstance(data, list) and data else None


async def _check_state_dir(settings: Settings, report: _Report) -> bool:
    try:
        path = await private_state_dir(settings)
    except BridgeError as exc:
        report.fail("state dir", str(exc), "see docs/configuration.md#state-directory")
        return False
    report.ok("state dir", f"{path} (private: only this user can enter it)")
    return True


async def _check_runtime(settings: Settings, report: _Report) -> RuntimeBackend | None:
    preference = None if settings.runtime == "auto" else settings.runtime
    try:
        backend = await detect_runtime(
            preference,
            state_dir=settings.resolved_state_dir / "runtime",
            target=runtime_target(settings),
        )
        info: RuntimeInfo = await backend.info()
    except BridgeError as exc:
        report.fail("runtime", str(exc), "see docs/troubleshooting.md#no-container-runtime")
        return None
    mode = "rootless" if info.rootless else "rootful"
    report.ok("runtime", f"{info.backend} {info.version} ({mode}); {info.detail}")
    if info.backend != "local":
        _report_profile(settings, info, report)
    if info.backend == "local":
        report.warn("isolation", "runtime 'local' runs code WITHOUT a container", "use podman")
    elif not info.limits_enforced:
        report.warn(
            "limits",
            "this host does not enforce memory/pids/cpu limits for this runtime",
            "run on a cgroup v2 host, or run podman as root (see docs/troubleshooting.md)",
        )
    return backend


def _report_profile(settings: Settings, info: RuntimeInfo, report: _Report) -> None:
    users = user_seccomp_option(settings.security_opt)
    if users is not None:
        report.warn(
            "seccomp",
            f"your profile {users} (MCP_BRIDGE_SECURITY_OPT) replaces the bridge's; the bridge "
            "does not check it",
            "leave seccomp= out of MCP_BRIDGE_SECURITY_OPT to use the bridge's profile",
        )
    elif info.seccomp.startswith("UNAVAILABLE"):
        report.fail("seccomp", info.seccomp, "see docs/troubleshooting.md#seccomp")
    else:
        report.ok("seccomp", info.seccomp)


def _check_image(
    settings: Settings, backend: RuntimeBackend, report: _Report
) -> CheckedRuntime | None:
    """The runtime with the ID of the image checked in its store (the sandbox check starts
    from it, as the server does), or None when the image may not run."""
    if backend.name == "local":
        return CheckedRuntime(backend, None)
    # The one decision the server makes before its first sandbox (verified, pulled, refused,
    # digest-pinned, unknown tag, missing, unchecked): doctor says which case applies.
    supplied = check_image(settings, backend.name, progress=report.progress)
    if supplied is not None and not supplied.usable:
        report.fail("image", supplied.detail, supplied.fix)
        return None
    if supplied is not None and supplied.pulled:
        report.ok("image pull", supplied.detail)
    data = _inspect_image(backend.name, settings.image)
    if data is None:
        report.fail(
            "image",
            f"{settings.image} is not present",
            f"{IMAGE_BUILD_COMMAND} (builds the standard image; --slim the slim one), or set "
            "MCP_BRIDGE_IMAGE to an image you have",
        )
        return None
    labels = data.get("Labels") or data.get("Config", {}).get("Labels") or {}
    # The few labels a user acts on, not every label (a line, not a screen).
    shown = [f"{name} {labels[label]}" for name, label in _IMAGE_FACTS if labels.get(label)]
    case = f"{supplied.case}; " if supplied is not None else ""
    report.ok(
        "image",
        f"{settings.image} ({str(data.get('Id', ''))[:12]}); {case}"
        + (", ".join(shown) or "no labels of this product"),
    )
    return CheckedRuntime(backend, supplied.image_id if supplied is not None else None)


_IMAGE_FACTS = (
    ("variant", LABEL_VARIANT),
    ("sandbox client", LABEL_SANDBOX_CLIENT_VERSION),
    ("protocol", LABEL_PROTOCOL_VERSIONS),
    ("revision", LABEL_REVISION),
)


def _expected_limits(settings: Settings) -> dict[str, str]:
    return {
        "memory": str(settings.memory_limit),
        "pids": str(settings.pids_limit),
        "cpu_quota": str(settings.cpu_quota) if settings.cpu_quota is not None else "max",
    }


async def _check_sandbox(settings: Settings, checked: CheckedRuntime, report: _Report) -> None:
    backend = checked.backend
    config = session_config(settings)
    manager = SessionManager(
        dataclasses.replace(config, pool_size=0, max_sessions=1),
        runtime=checked,
        gateway=NullGateway(),
        state_dir=settings.resolved_state_dir / "doctor",
    )
    async with manager:
        result = await manager.execute(_LIMITS_PROBE, timeout=SANDBOX_CHECK_TIMEOUT)
    if not result.ok or result.value is None:
        error = result.error.message if result.error is not None else result.status
        report.fail(
            "sandbox",
            f"could not run code: {error}",
            "see docs/troubleshooting.md#the-sandbox-does-not-start",
        )
        return
    report.ok("sandbox", f"ran code in {result.duration:.2f} s")
    try:
        seen = ast.literal_eval(result.value)
    except (ValueError, SyntaxError):
        seen = {}
    if not isinstance(seen, dict):
        seen = {}
    expected = _expected_limits(settings)
    wrong = [
        f"{key} {seen.get(key)!r} (want {want})"
        for key, want in expected.items()
        if str(seen.get(key)) != want and not (key == "cpu_quota" and want == "max")
    ]
    if wrong:
        report.warn(
            "limits",
            "not enforced inside the sandbox: " + ", ".join(wrong),
            "run on a cgroup v2 host, or run podman as root (see docs/troubleshooting.md)",
        )
    else:
        report.ok(
            "limits",
            f"memory {format_size(settings.memory_limit)}, pids {settings.pids_limit}"
            + (f", cpu quota {settings.cpu_quota}" if settings.cpu_quota else "")
            + " enforced (read back inside the sandbox)",
        )
    if backend.name != "local" and user_seccomp_option(settings.security_opt) is None:
        _report_filter_in_sandbox(seen, report)


def _report_filter_in_sandbox(seen: dict[str, Any], report: _Report) -> None:
    if seen.get("seccomp") == "2" and seen.get("refused") == _REFUSED:
        report.ok(
            "seccomp in the sandbox",
            "mode 2 (filtering); creating a user namespace: EPERM, an AF_VSOCK socket: "
            "EAFNOSUPPORT (tried inside the sandbox)",
        )
        return
    report.fail(
        "seccomp in the sandbox",
        f"seccomp mode {seen.get('seccomp')!r}; errno of unshare(CLONE_NEWUSER) and "
        f"socket(AF_VSOCK): {seen.get('refused')!r} (want mode 2, EPERM and EAFNOSUPPORT)",
        "see docs/troubleshooting.md#seccomp",
    )


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


def _check_files(settings: Settings, discovery: DiscoveryReport, report: _Report) -> None:
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


def _check_readable_secrets(discovery: DiscoveryReport, home: Path, report: _Report) -> None:
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
    report: _Report,
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


async def _check_servers(settings: Settings, report: _Report) -> None:
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
    report: _Report,
) -> None:
    """The tools a client is given in this mode, and what their definitions cost per request."""
    from mcp_code_execution_mode._direct import (
        listed_tool,
        lists_code,
        lists_direct,
        name_tools,
    )
    from mcp_code_execution_mode.tool import run_python_tool

    listed = [run_python_tool()] if lists_code(settings.tools) else []
    if lists_direct(settings.tools):
        allowed = [
            (server, tool)
            for server, tools in results.items()
            if isinstance(tools, list)
            for tool in tools
            if policy.check(server, tool.name).allowed
        ]
        named = name_tools(allowed, [t.name for t in listed])
        listed += [listed_tool(name, server, tool) for name, (server, tool) in named.items()]
    size = schema_bytes(listed)
    report.ok(
        "tools",
        f"mode {settings.tools}: lists {len(listed)} tool(s), ~{token_estimate(size):,} tokens "
        f"of definitions per request (estimate: {size:,} bytes / {BYTES_PER_TOKEN})",
    )


def _check_traces(report: _Report, environ: Mapping[str, str] | None = None) -> None:
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


def _report_settings_file(settings: Settings, report: _Report) -> None:
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
    report = _Report(out or sys.stdout)
    print(f"mcp-code-execution-mode {__version__} doctor", file=report.out)
    log_file = settings.resolved_log_file
    report.ok("log file", str(log_file) if log_file else "off (MCP_BRIDGE_LOG_FILE=off)")
    _report_settings_file(settings, report)
    _check_traces(report)
    backend = None
    if await _check_state_dir(settings, report):
        backend = await _check_runtime(settings, report)
    if backend is not None:
        try:
            checked = await anyio.to_thread.run_sync(_check_image, settings, backend, report)
            if checked is not None:
                await _check_sandbox(settings, checked, report)
        finally:
            with anyio.CancelScope(shield=True):
                await backend.aclose()
    await _check_servers(settings, report)
    print("result: " + ("PROBLEMS FOUND" if report.failed else "ready"), file=report.out)
    return 1 if report.failed else 0
