"""The runtime-backend interface: start hardened sandboxes and hand back their channel.

Implementations: ``podman`` (podman-py over the API socket), ``docker`` (docker CLI) and
``local`` (the sandbox client as a plain subprocess, for fast tests only: NO isolation).
A later Kubernetes or remote-podman backend implements the same interface, which is why
:meth:`RuntimeBackend.start` returns a connected byte stream rather than a socket path.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, TypeAlias, runtime_checkable

from anyio.abc import ByteStream

__all__ = [
    "IMAGE_BUILD_COMMAND",
    "OWNER_LABEL",
    "CheckedRuntime",
    "PRODUCT_LABEL",
    "RuntimeBackend",
    "RuntimeFactory",
    "RuntimeInfo",
    "RuntimeSource",
    "Sandbox",
    "SandboxExit",
    "SandboxLimits",
    "SandboxSpec",
    "SharedDir",
]

IMAGE_BUILD_COMMAND = "mcp-code-execution-mode image build"
"""Builds the standard sandbox image (``--slim``: the slim one); installed with the server, so
every "image missing" message can name it."""

PRODUCT_LABEL = "io.github.mcp-code-execution-mode"
"""Every container we create carries this label (value: ``"sandbox"``)."""

OWNER_LABEL = "io.github.mcp-code-execution-mode.owner"
"""``<pid>:<process start time>`` of the bridge process that created the container. Leftover
cleanup removes only containers whose owner process is gone, so two bridges on one host (e.g.
Claude Desktop and Cursor each running one) never remove each other's sandboxes."""

MiB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """Resource limits of one sandbox container."""

    memory_bytes: int = 512 * MiB
    """Memory limit; swap is set equal so the container cannot swap past it."""
    pids: int = 128
    cpu_quota: int | None = None
    """CFS quota in microseconds per ``cpu_period`` (50000 = half a core); None = unlimited."""
    cpu_period: int = 100_000
    tmpfs_bytes: int = 64 * MiB
    """Size of the writable /tmp (the only writable place)."""
    nofile: int = 1024
    nproc: int = 4096


@dataclass(frozen=True, slots=True)
class SandboxSpec:
    """What to start. ``name`` is unique per bridge; the backend adds the ownership labels."""

    name: str
    image: str
    """The image's name, as configured: what messages show."""
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    security_opt: tuple[str, ...] = ()
    """Extra ``--security-opt`` values from settings (added to ours, never replacing them)."""
    labels: Mapping[str, str] = field(default_factory=dict)
    connect_timeout: float = 30.0
    """Seconds to wait for the sandbox client to connect its channel after start."""
    preimport: tuple[str, ...] = ()
    """Modules the sandbox client imports as it starts (names validated by
    :func:`bridge_protocol.hints.strict_hint`): written into the channel directory, so only
    runtimes with one (a unix-socket channel) pass them; the others ignore them."""
    image_id: str | None = None
    """``sha256:`` ID of the image that was checked under ``image`` (against its pin, before
    the first sandbox): the podman and docker backends create the container from it, so a name
    re-tagged after the check cannot swap what runs. None: started by name."""

    @property
    def source(self) -> str:
        """What the container is created from: the checked ID, else the name."""
        return self.image_id or self.image


@dataclass(frozen=True, slots=True)
class SandboxExit:
    """How a sandbox ended, as far as the runtime can tell."""

    running: bool
    exit_code: int | None = None
    oom_killed: bool = False
    error: str = ""

    def describe(self, memory_limit: str = "") -> str:
        """A one-line human reason, e.g. ``memory limit 512m exceeded (OOM kill)``."""
        if self.oom_killed:
            return f"memory limit {memory_limit} exceeded (the container was OOM-killed)".replace(
                "limit  ", "limit "
            )
        if self.running:
            return "container is still running"
        if self.exit_code is not None:
            return f"container exited with status {self.exit_code}" + (
                f": {self.error}" if self.error else ""
            )
        return self.error or "container is gone"


@dataclass(frozen=True, slots=True)
class RuntimeInfo:
    """What ``doctor`` and the logs report about a backend."""

    backend: Literal["podman", "docker", "local"]
    version: str
    rootless: bool
    limits_enforced: bool
    """False e.g. for rootless podman on cgroup v1 hosts, which silently ignores limits."""
    detail: str = ""
    seccomp: str = ""
    """The sandboxes' system-call filter: which profile, or why the bridge's is unavailable."""


@dataclass(frozen=True, slots=True)
class SharedDir:
    """A host directory that a sandbox sees, read-only, at ``inside``.

    The host puts files there for the sandbox's code (full outputs), without running anything in
    the sandbox. Everything in it goes when the sandbox is removed.
    """

    host: Path
    inside: str
    """The same directory's path as code in the sandbox sees it."""
    copy_in: Callable[[Path, str], Awaitable[None]] | None = None
    """For a sandbox that does not mount ``host`` (the stdio channel: a remote engine): copies
    a file put there to the given path inside, read-only, through the engine (OSError when it
    cannot). None: ``host`` is the mounted directory itself."""


class Sandbox(Protocol):
    """A started sandbox whose channel is connected."""

    @property
    def name(self) -> str: ...

    @property
    def stream(self) -> ByteStream:
        """The connected channel: frames of :mod:`bridge_protocol` both ways."""
        ...

    @property
    def shared_dir(self) -> SharedDir | None:
        """A directory the host shares with the sandbox, or None when the runtime has none
        (a remote runtime without a shared filesystem)."""
        ...


@runtime_checkable
class RuntimeBackend(Protocol):
    """Start, stop and inspect sandboxes. All methods are safe to call concurrently."""

    name: str

    async def info(self) -> RuntimeInfo:
        """Version, rootless or not, whether limits are enforced. Raises RuntimeUnavailable."""
        ...

    async def start(self, spec: SandboxSpec) -> Sandbox:
        """Create and start the container, wait for its channel, return it connected.

        Raises :class:`~bridge_core.errors.SandboxStartError` (container removed) on failure.
        Cancellation during start leaves no container behind.
        """
        ...

    async def status(self, sandbox: Sandbox) -> SandboxExit:
        """Whether it runs; if not, its exit code and whether it was OOM-killed."""
        ...

    async def stop(self, sandbox: Sandbox, *, grace: float = 2.0) -> None:
        """Close the channel, stop (SIGTERM, then SIGKILL after ``grace``) and remove."""
        ...

    async def kill(self, sandbox: Sandbox) -> None:
        """SIGKILL and remove, now."""
        ...

    async def kill_all(self, sandboxes: Sequence[Sandbox]) -> None:
        """Kill and remove many sandboxes at once (shutdown): bounded, never raises, and as
        fast as the runtime allows, since MCP clients SIGKILL a server a few seconds after
        closing its stdin."""
        ...

    async def remove_leftovers(self) -> int:
        """Remove containers of ours whose owner bridge process is gone; return how many."""
        ...

    async def aclose(self) -> None:
        """Release backend resources (e.g. a private podman API service it started)."""
        ...


@dataclass(frozen=True, slots=True)
class CheckedRuntime:
    """A runtime whose image store was checked to hold the sandbox image: what a runtime
    factory of the session manager may return instead of the bare backend."""

    backend: RuntimeBackend
    image_id: str | None
    """ID of the configured image as checked in ``backend``'s store; every sandbox starts from
    it (:attr:`SandboxSpec.image_id`). None: nothing was checked (e.g. a remote engine)."""


RuntimeFactory: TypeAlias = Callable[[], Awaitable[RuntimeBackend | CheckedRuntime]]
"""Makes the runtime when the session manager first needs it (detection, the image check)."""
RuntimeSource: TypeAlias = RuntimeBackend | CheckedRuntime | RuntimeFactory
"""What the session manager takes as its runtime: a backend, or a factory of one."""
