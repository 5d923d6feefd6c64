"""Whether a container runtime can reach the sandbox channel: same machine, same Linux kernel.

The channel is a unix socket in a host directory bind-mounted into the container. A runtime that
runs containers in a VM (podman machine and Docker Desktop on macOS and Windows, Docker Desktop
for Linux) or on another machine (``CONTAINER_HOST=ssh://...``) cannot connect it: the bind mount,
where it works at all, crosses a file-sharing layer that does not carry unix sockets, so the
sandbox would start and then never connect. These checks say so before a container is started.
They apply to that socket channel only: the stdio channel (``MCP_BRIDGE_CHANNEL=stdio``, and
always for an engine reached with ``MCP_BRIDGE_RUNTIME_URL=ssh://...``) needs no shared file
system or kernel, so the podman backend skips the kernel check for it.
"""

from __future__ import annotations

import platform
import sys

__all__ = ["PLATFORMS_GUIDE", "kernel_problem", "platform_problem"]

PLATFORMS_GUIDE = "docs/platforms.md"
"""The guide naming the setups that work today (Linux, WSL2) and why the others do not."""

_WHY = (
    "the sandbox channel of this release is a unix socket in a bind-mounted directory, which "
    "only works when the bridge and the containers share one Linux kernel"
)


def platform_problem(system: str | None = None) -> str | None:
    """Why container sandboxes cannot run with the bridge on this operating system (None on
    Linux). ``system`` defaults to ``sys.platform``."""
    name = system or sys.platform
    if name.startswith("linux"):
        return None
    if name == "darwin":
        return (
            "the bridge runs on macOS, where podman machine and Docker Desktop run containers in "
            f"a Linux VM: {_WHY}. Run the bridge inside a Linux VM together with podman "
            f"(see {PLATFORMS_GUIDE})"
        )
    if name in ("win32", "cygwin", "msys"):
        return (
            "the bridge runs on Windows, where podman machine and Docker Desktop run containers "
            f"in a VM: {_WHY}. Install and run the bridge inside WSL2, with podman in the same "
            f"WSL2 distribution (see {PLATFORMS_GUIDE})"
        )
    return f"the bridge runs on {name!r}: {_WHY} (see {PLATFORMS_GUIDE})"


def kernel_problem(runtime: str, where: str, their_kernel: str, ours: str | None = None) -> str:
    """Why ``runtime`` (reached at ``where``) cannot serve sandboxes when it reports running
    containers on ``their_kernel``; ``""`` when that is this machine's kernel (``ours``, default
    ``platform.release()``) or the runtime does not say."""
    mine = ours or platform.release()
    if not their_kernel.strip() or their_kernel.strip() == mine:
        return ""
    return (
        f"{runtime} at {where} runs containers on kernel {their_kernel.strip()}, this machine "
        f"runs {mine}: that is a VM or another machine (podman machine, Docker Desktop, "
        f"CONTAINER_HOST or DOCKER_HOST pointing elsewhere), and {_WHY}. Use a runtime on this "
        f"machine (unset CONTAINER_HOST / DOCKER_HOST, or install podman here; see "
        f"{PLATFORMS_GUIDE})"
    )
