"""Pick the runtime backend: the one asked for, or the first that works (podman, then docker)."""

from __future__ import annotations

from pathlib import Path

from bridge_core.errors import ConfigError, RuntimeUnavailable
from bridge_core.runtime._locality import platform_problem
from bridge_core.runtime.base import RuntimeBackend

__all__ = ["RUNTIME_CHOICES", "detect_runtime"]

RUNTIME_CHOICES = ("podman", "docker", "local")
"""Values of ``MCP_BRIDGE_RUNTIME``. ``local`` (no isolation) is never chosen automatically."""

_AUTO_ORDER = ("podman", "docker")
_FIX = (
    "install podman (recommended; scripts/prepare-host sets it up on Debian/Ubuntu) or docker, "
    "start its service, or choose one with MCP_BRIDGE_RUNTIME=podman|docker"
)


async def _connect(name: str, state_dir: Path) -> RuntimeBackend:
    # Imported lazily: each backend pulls its own client library.
    if name == "podman":
        from bridge_core.runtime.podman import PodmanBackend

        return await PodmanBackend.connect(state_dir=state_dir)
    if name == "docker":
        from bridge_core.runtime.docker import DockerBackend

        return await DockerBackend.connect(state_dir=state_dir)
    from bridge_core.runtime.local import LocalBackend

    return LocalBackend(state_dir=state_dir)


async def detect_runtime(preference: str | None, *, state_dir: Path) -> RuntimeBackend:
    """A connected backend for ``preference`` (``"podman"``, ``"docker"``, ``"local"``) or, for
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
    order = (preference,) if preference else _AUTO_ORDER
    if preference != "local":
        # Before any runtime is probed: off Linux the channel cannot reach a container at all.
        problem = platform_problem()
        if problem:
            raise RuntimeUnavailable(problem)
    failures = []
    for name in order:
        try:
            return await _connect(name, state_dir)
        except RuntimeUnavailable as exc:
            failures.append(f"{name}: {exc}")
    raise RuntimeUnavailable(
        f"no container runtime is usable (tried {', '.join(order)}). "
        + " | ".join(failures)
        + f". Fix: {_FIX}"
    )
