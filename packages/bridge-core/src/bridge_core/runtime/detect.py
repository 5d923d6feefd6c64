"""Pick the runtime backend: the one asked for, or the first that works (podman, then docker)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from bridge_core.errors import ConfigError, RuntimeUnavailable
from bridge_core.runtime._locality import host_system, linux_host, platform_problem
from bridge_core.runtime.base import RuntimeBackend

__all__ = ["RUNTIME_CHOICES", "RuntimeTarget", "detect_runtime"]

RUNTIME_CHOICES = ("podman", "docker")
"""Values of ``MCP_BRIDGE_RUNTIME``. The unisolated :class:`~bridge_core.runtime.local.LocalBackend`
is not one: tests construct it directly (it is their seam), no setting can select it."""

logger = logging.getLogger(__name__)

_AUTO_ORDER = ("podman", "docker")
_FIX = (
    "install podman (recommended; scripts/prepare-host sets it up on Debian/Ubuntu) or docker, "
    "start its service, or choose one with MCP_BRIDGE_RUNTIME=podman|docker"
)


@dataclass(frozen=True, slots=True)
class RuntimeTarget:
    """Where and how the podman backend reaches its engine (the ``runtime_*`` settings)."""

    url: str | None = None
    """An API URL (``unix://``, ``tcp://``, ``ssh://``); None: CONTAINER_HOST or the usual."""
    identity: Path | None = None
    known_hosts: Path | None = None
    channel: str = "auto"
    """``socket``, ``stdio`` or ``auto`` (socket locally, stdio over ssh)."""


async def _connect(name: str, state_dir: Path, target: RuntimeTarget) -> RuntimeBackend:
    # Imported lazily: each backend pulls its own client library.
    if name == "podman":
        from bridge_core.runtime.podman import LOCAL_CHANNEL, PodmanBackend

        channel = LOCAL_CHANNEL if target.channel == "auto" else target.channel
        return await PodmanBackend.connect(
            state_dir=state_dir,
            url=target.url,
            channel=channel,  # type: ignore[arg-type]  # checked by the settings
            identity=target.identity,
            known_hosts=target.known_hosts,
        )
    from bridge_core.runtime.docker import DockerBackend

    return await DockerBackend.connect(state_dir=state_dir)


async def detect_runtime(
    preference: str | None, *, state_dir: Path, target: RuntimeTarget | None = None
) -> RuntimeBackend:
    """A connected backend for ``preference`` (``"podman"``, ``"docker"``) or, for
    None, the first of podman and docker that answers.

    Connecting also removes leftover containers of dead bridges. Raises
    :class:`RuntimeUnavailable` naming every runtime tried, why each failed, and the fix;
    :class:`ConfigError` for an unknown preference.
    """
    if preference is not None and preference not in RUNTIME_CHOICES:
        raise ConfigError(
            f"MCP_BRIDGE_RUNTIME={preference!r} is not a runtime; use one of "
            f"{', '.join(RUNTIME_CHOICES)} (or leave it unset to auto-detect)"
        )
    target = target or RuntimeTarget()
    if target.url is not None or target.channel != "auto":
        if preference == "docker":
            raise ConfigError(
                f"MCP_BRIDGE_RUNTIME_URL and [engine] channel in bridge.toml apply to podman "
                f"only, not to MCP_BRIDGE_RUNTIME={preference}: unset them or use podman"
            )
        preference = "podman"
    # Off Linux only podman over ssh can serve sandboxes (the docker backend has no stdio
    # channel): auto-detection tries nothing else there.
    order = (preference,) if preference else _AUTO_ORDER if linux_host() else ("podman",)
    # Before any runtime is probed: off Linux a local engine's containers cannot be reached.
    problem = platform_problem(target.url, runtime=preference)
    if problem:
        raise RuntimeUnavailable(problem)
    if not linux_host():
        logger.info(
            "the bridge runs on %s: sandboxes run on the podman engine reached over ssh, over "
            "the stdio channel, without this machine's kernel checks",
            host_system(),
        )
    failures = []
    for name in order:
        try:
            return await _connect(name, state_dir, target)
        except RuntimeUnavailable as exc:
            failures.append(f"{name}: {exc}")
    raise RuntimeUnavailable(
        f"no container runtime is usable (tried {', '.join(order)}). "
        + " | ".join(failures)
        + f". Fix: {_FIX}"
    )
