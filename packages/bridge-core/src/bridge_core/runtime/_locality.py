"""Whether a container runtime can reach the sandbox channel from where the bridge runs.

Two channels (:mod:`.podman`): a unix socket in a host directory bind-mounted into the container,
which needs the bridge and the containers on one Linux kernel, and the container's own stdio
attached through the engine's API, which needs neither a shared file system nor a shared kernel.

On Linux a local engine gets the socket, and :func:`kernel_problem` refuses one that reports
another kernel (a VM, another machine: the bind mount, where it works at all, crosses a
file-sharing layer that does not carry unix sockets, so the sandbox would start and never
connect). An engine reached with ``MCP_BRIDGE_RUNTIME_URL=ssh://...`` gets stdio and no kernel
check: its own checks stand in (the filter read back from the OCI spec on its machine, the cgroup
limits its API reports).

macOS has no Linux kernel of its own: podman machine and Docker Desktop are a Linux engine in a
VM, and the bridge reaches podman machine's the way it reaches any remote engine, over ssh
(:func:`platform_problem` lets exactly that through). Over the VM's forwarded API socket alone it
could attach, but it could neither put its seccomp profile where that engine reads it nor read
back the OCI spec the engine wrote, so such a socket is refused with the ssh settings to use.

Windows is refused whatever the engine: the bridge itself needs what Windows lacks (see
:data:`WINDOWS_PROBLEM`).

The operating system is read in one place, :func:`host_system`, which tests replace to take the
macOS and Windows paths on Linux.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Mapping

__all__ = [
    "PLATFORMS_GUIDE",
    "host_system",
    "linux_host",
    "kernel_problem",
    "platform_problem",
    "process_problem",
]

PLATFORMS_GUIDE = "docs/platforms.md"
"""The guide naming the setups that work (Linux, macOS with podman machine, WSL2) and why."""

_WHY = (
    "the socket channel is a unix socket in a bind-mounted directory, which only works when the "
    "bridge and the containers share one Linux kernel"
)
_WINDOWS = ("win32", "cygwin", "msys")
_NAMES = {"darwin": "macOS"}
_MACHINE_SSH = (
    "podman machine's engine over ssh: set MCP_BRIDGE_RUNTIME_URL to the URI, and [engine] "
    "identity in bridge.toml to the Identity, of the connection that `podman system connection "
    "list --format json` lists as Default (ssh://core@127.0.0.1:PORT/run/user/UID/podman/"
    "podman.sock), and [engine] known_hosts to a file holding the VM's host key (ssh-keyscan -p "
    "PORT 127.0.0.1 > FILE)"
)

WINDOWS_PROBLEM = (
    "the bridge runs on Windows: it stops the MCP servers it proxies as POSIX process groups with "
    "signals, keeps its state in files guarded by POSIX owners and modes, and shares one ssh "
    "connection to a remote engine through a unix-socket control master (which Windows' OpenSSH "
    "does not support); Windows has none of these. Install and run the bridge inside WSL2, with "
    "podman in the same WSL2 distribution (or podman machine's engine over ssh from there; see "
    f"{PLATFORMS_GUIDE})"
)


def host_system() -> str:
    """The operating system the bridge runs on (``sys.platform``). The platform decisions read
    it here and nowhere else, so a test can replace this function to fake another system."""
    return sys.platform


def linux_host() -> bool:
    """Whether the bridge runs on Linux (where every backend and both channels work)."""
    return host_system().startswith("linux")


def _is_ssh(url: str | None) -> bool:
    return (url or "").startswith("ssh://")


def process_problem() -> str | None:
    """Why the bridge process itself cannot run here (Windows), or None."""
    return WINDOWS_PROBLEM if host_system() in _WINDOWS else None


def platform_problem(
    url: str | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    runtime: str | None = None,
) -> str | None:
    """Why sandboxes cannot run from this operating system with the engine at ``url``
    (``MCP_BRIDGE_RUNTIME_URL``; None: ``CONTAINER_HOST`` in ``environ``, else a local engine)
    and the backend ``runtime`` (None: any), or None when they can: on Linux always; on macOS
    (and other POSIX systems without a Linux kernel) with a podman engine reached over ssh,
    whose channel is stdio; on Windows never."""
    if linux_host():
        return None
    name = host_system()
    if name in _WINDOWS:
        return WINDOWS_PROBLEM
    if runtime == "docker":
        return (
            f"MCP_BRIDGE_RUNTIME=docker on {_NAMES.get(name, repr(name))}: the docker backend has "
            "only the socket channel, which needs the bridge and the containers on one Linux "
            f"kernel. Use MCP_BRIDGE_RUNTIME=podman with {_MACHINE_SSH}; see {PLATFORMS_GUIDE}"
        )
    where = url or (os.environ if environ is None else environ).get("CONTAINER_HOST")
    if _is_ssh(where):
        return None
    engine = f"the engine at {where}" if where else "a local engine"
    if name == "darwin":
        return (
            f"the bridge runs on macOS and {engine} was asked for: podman machine and Docker "
            "Desktop run containers in a Linux VM, which the bridge reaches only over ssh, "
            "where the sandboxes talk to it on their stdio and it writes and verifies their "
            "seccomp filter on the VM (through the VM's API socket alone it can do neither; "
            "Docker Desktop offers no ssh and the docker backend has no stdio channel). "
            f"Use {_MACHINE_SSH}; see {PLATFORMS_GUIDE}"
        )
    return (
        f"the bridge runs on {name!r}, which has no Linux kernel, and {engine} was asked for: "
        f"{_WHY}. Use a podman engine on a Linux machine over ssh "
        f"(MCP_BRIDGE_RUNTIME_URL=ssh://user@host/run/podman/podman.sock; see {PLATFORMS_GUIDE})"
    )


def kernel_problem(runtime: str, where: str, their_kernel: str, ours: str | None = None) -> str:
    """Why ``runtime`` (reached at ``where``) cannot serve sandboxes over the socket channel
    when it reports running containers on ``their_kernel``; ``""`` when that is this machine's
    kernel (``ours``, default ``platform.release()``) or the runtime does not say."""
    mine = ours or platform.release()
    if not their_kernel.strip() or their_kernel.strip() == mine:
        return ""
    return (
        f"{runtime} at {where} runs containers on kernel {their_kernel.strip()}, this machine "
        f"runs {mine}: that is a VM or another machine (podman machine, Docker Desktop, "
        f"CONTAINER_HOST or DOCKER_HOST pointing elsewhere), and {_WHY}. Use a runtime on this "
        f"machine (unset CONTAINER_HOST / DOCKER_HOST, or install podman here), or reach that "
        f"podman over ssh (MCP_BRIDGE_RUNTIME_URL=ssh://..., whose channel is stdio; see "
        f"{PLATFORMS_GUIDE})"
    )
