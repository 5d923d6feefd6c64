"""Finding the podman engine a backend talks to, and what it allows (seccomp, OOM tracking).

The API URL is, in order: the one given, else ``$CONTAINER_HOST``, the rootful socket, the
rootless one (:func:`~._podman_api.socket_candidates`); an ``ssh://`` URL reaches an engine on
another machine through one ssh client of ours (:mod:`._podman_stdio`). When no socket answers,
a private ``podman system service`` is started in the state dir (:mod:`._podman_service`).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import podman

from bridge_core.errors import RuntimeUnavailable
from bridge_core.runtime import _podman_api as api
from bridge_core.runtime._podman_service import PrivateService
from bridge_core.runtime._podman_stdio import open_ssh_engine, upload_profile
from bridge_core.runtime._seccomp import SeccompProfile, SeccompUnavailable, write_profile
from bridge_core.runtime._ssh import SshLink

__all__ = ["Engine", "can_track_oom", "find_engine", "seccomp_profile"]


@dataclass(frozen=True, slots=True)
class Engine:
    """A podman API that answered: its client and URL, and what the bridge opened to reach it."""

    client: podman.PodmanClient
    url: str
    service: PrivateService | None = None
    """The private service started for it (stopped with the backend)."""
    link: SshLink | None = None
    """The ssh client of an engine on another machine."""


async def find_engine(
    *,
    state_dir: Path,
    url: str | None,
    start_service: bool,
    identity: Path | None,
    known_hosts: Path | None,
) -> Engine:
    """The first podman API that answers (see the module's docstring for the order).

    Raises :class:`RuntimeUnavailable` naming every URL tried, and :class:`ConfigError` for a
    bad ssh URL.
    """
    urls = [url] if url else api.socket_candidates(os.environ, os.geteuid())
    if urls[0].startswith("ssh://"):
        client, link = await open_ssh_engine(urls[0], identity, known_hosts)
        return Engine(client, link.url, link=link)
    for candidate in urls:
        found: podman.PodmanClient | None = await anyio.to_thread.run_sync(api.connect, candidate)
        if found is not None:
            return Engine(found, candidate)
    binary = shutil.which("podman")
    if url or not start_service or binary is None:
        raise RuntimeUnavailable(
            f"no podman API service answers at {', '.join(urls)}"
            + ("" if binary else " and no `podman` binary is on PATH")
            + "; install podman (scripts/prepare-host does it on Debian/Ubuntu) or "
            "start its service: podman system service --time=0 unix:///run/podman/"
            "podman.sock"
        )
    # Per process: two bridges sharing a state dir must not replace each other's service.
    service = await PrivateService.start(binary, state_dir / f"podman-{os.getpid()}.sock")
    private: podman.PodmanClient | None = await anyio.to_thread.run_sync(api.connect, service.url)
    if private is None:
        await service.aclose()
        raise RuntimeUnavailable(
            f"no podman API service answers at {', '.join(urls)}, and the private service "
            f"started at {service.url} does not answer either: {service.log_tail()}"
        )
    return Engine(private, service.url, service=service)


async def seccomp_profile(engine: Engine, state_dir: Path) -> tuple[SeccompProfile | None, str]:
    """The sandboxes' system-call filter where the engine can read it, else None and why."""
    if engine.link is not None:
        try:
            local = await anyio.to_thread.run_sync(write_profile, state_dir)
            return await upload_profile(engine.link, local), ""
        except (SeccompUnavailable, RuntimeUnavailable) as exc:
            return None, str(exc)
    if not engine.url.startswith("unix://"):
        return None, (
            f"the podman service at {engine.url} is not on this machine and cannot read the "
            "bridge's seccomp profile; name a profile on that machine with "
            "MCP_BRIDGE_SECURITY_OPT=seccomp=PATH"
        )
    try:
        return await anyio.to_thread.run_sync(write_profile, state_dir), ""
    except SeccompUnavailable as exc:
        return None, str(exc)


def can_track_oom(engine: Engine, info: dict[str, Any]) -> bool:
    """Whether sandboxes can get a cgroup parent the bridge reads (:mod:`._oom`): rootful,
    cgroupfs-managed podman, local as root or over ssh."""
    if not engine.url.startswith("unix://"):
        return False
    if engine.link is None and os.geteuid() != 0:
        return False  # the engine runs as root (rootful), we could not read its cgroups
    host = info.get("host", {})
    rootless = bool(host.get("security", {}).get("rootless", False))
    return not rootless and host.get("cgroupManager") == "cgroupfs"
