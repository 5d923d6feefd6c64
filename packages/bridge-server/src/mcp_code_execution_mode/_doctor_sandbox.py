"""doctor's checks of what runs code: the container runtime and its system-call filter, the
sandbox image (the server's own image decision), and a real sandbox running code with its limits
and its filter read back from inside."""

from __future__ import annotations

import ast
import dataclasses
import json
import shutil
import subprocess
from typing import Any

from bridge_core.errors import BridgeError
from bridge_core.gateway import NullGateway
from bridge_core.runtime import user_seccomp_option
from bridge_core.runtime.base import (
    IMAGE_BUILD_COMMAND,
    CheckedRuntime,
    RuntimeBackend,
    RuntimeInfo,
)
from bridge_core.runtime.detect import detect_runtime
from bridge_core.sessions.manager import SessionManager
from bridge_image.names import (
    LABEL_PROTOCOL_VERSIONS,
    LABEL_REVISION,
    LABEL_SANDBOX_CLIENT_VERSION,
    LABEL_VARIANT,
)

from mcp_code_execution_mode._compose import session_config
from mcp_code_execution_mode._doctor_report import Report
from mcp_code_execution_mode._image_supply import check_image
from mcp_code_execution_mode._units import format_size
from mcp_code_execution_mode.settings import Settings, runtime_target

__all__ = ["check_image_present", "check_runtime", "check_sandbox"]

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


async def check_runtime(settings: Settings, report: Report) -> RuntimeBackend | None:
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


def _report_profile(settings: Settings, info: RuntimeInfo, report: Report) -> None:
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


def check_image_present(
    settings: Settings, backend: RuntimeBackend, report: Report
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


async def check_sandbox(settings: Settings, checked: CheckedRuntime, report: Report) -> None:
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


def _report_filter_in_sandbox(seen: dict[str, Any], report: Report) -> None:
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
