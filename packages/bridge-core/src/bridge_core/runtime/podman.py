"""The podman backend: podman-py over the podman API socket.

The socket is found in this order: ``$CONTAINER_HOST``, the rootful ``/run/podman/podman.sock``,
the rootless ``$XDG_RUNTIME_DIR/podman/podman.sock`` (rootless first when not root). When none
answers, a private ``podman system service`` is started on ``<state_dir>/podman-<pid>.sock`` and
stopped by :meth:`PodmanBackend.aclose`. ``state_dir`` is made private (0700): it holds the
channel sockets of the sandboxes (see :mod:`._channel`).

Every created container is inspected before it is started, and its system-call filter read back
from the OCI spec podman wrote for it; if any hardening option is missing it is removed and
:class:`~bridge_core.errors.SandboxStartError` names the option (:mod:`._podman_create`).

Nothing outlives the bridge: containers are auto-removed once they end, the sandbox client exits
when its channel hits EOF (so a SIGKILLed bridge leaves nothing running either), and shutdown
kills every sandbox at once through pidfds of their init processes (:mod:`._pidfd`,
:mod:`._podman_shutdown`, which also says why podman then needs seconds to remove them). Exit codes
of removed containers come from podman's event stream (:mod:`._podman_events`), their start-up
output from a log file of their own in the state directory.

The channel (:data:`CHANNELS`): a unix socket in a bind-mounted directory of the state dir
(:mod:`._channel`), or the container's own stdio attached through the API (:mod:`._attach`),
which needs no shared filesystem. An engine on another machine (``ssh://`` URL, :mod:`._ssh`)
always uses stdio; there the seccomp profile is written on that machine and read back from the
OCI spec there, and nothing that needs this machine's kernel (pidfds, OOM cgroup parents) is
used.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any, Literal

import anyio
import podman

from bridge_core.errors import RuntimeUnavailable
from bridge_core.private_files import private_dir
from bridge_core.runtime import _oom
from bridge_core.runtime import _podman_api as api
from bridge_core.runtime._attach import AttachedStream
from bridge_core.runtime._channel import ChannelDir
from bridge_core.runtime._engine import CLEANUP_TIMEOUT, ContainerEngine, ContainerSandbox
from bridge_core.runtime._hardening import container_name
from bridge_core.runtime._locality import kernel_problem
from bridge_core.runtime._peer import PeerCredentials, container_peer_problem
from bridge_core.runtime._podman_connect import can_track_oom, find_engine, seccomp_profile
from bridge_core.runtime._podman_create import ImageEnvs, create_verified
from bridge_core.runtime._podman_events import ContainerEvents
from bridge_core.runtime._podman_service import PrivateService
from bridge_core.runtime._podman_shutdown import REMOVAL_WAIT, Reaper
from bridge_core.runtime._podman_stdio import open_attach, wait_spoken
from bridge_core.runtime._seccomp import describe_filter
from bridge_core.runtime._ssh import SshLink
from bridge_core.runtime.base import RuntimeInfo, SandboxSpec

__all__ = [
    "CHANNELS",
    "CLEANUP_TIMEOUT",
    "LOCAL_CHANNEL",
    "REMOVAL_WAIT",
    "Channel",
    "PodmanBackend",
]

Channel = Literal["socket", "stdio"]
CHANNELS: tuple[Channel, ...] = ("socket", "stdio")
LOCAL_CHANNEL: Channel = "socket"
"""The channel of a local engine: measured faster (bench/channel_transports.py, see
docs/decisions/0051). A remote engine always gets ``stdio``."""

logger = logging.getLogger(__name__)


def _run(func: Any, *args: Any) -> Any:
    """Run a blocking podman-py call in a worker thread."""
    return anyio.to_thread.run_sync(partial(func, *args))


class PodmanBackend(ContainerEngine):
    """Sandboxes as podman containers. Create with :meth:`connect`; ``aclose()`` when done."""

    name = "podman"
    _transient = api.FAILURES

    def __init__(
        self,
        client: podman.PodmanClient,
        *,
        url: str,
        state_dir: Path,
        service: PrivateService | None = None,
        link: SshLink | None = None,
        channel: Channel = LOCAL_CHANNEL,
    ) -> None:
        super().__init__(state_dir, partial(ContainerEvents, url), _oom.EngineCgroups(link))
        self._events.start()
        self._client = client
        self._link = link
        self.channel: Channel = "stdio" if link is not None else channel
        """How sandboxes talk to the bridge (:data:`CHANNELS`)."""
        self._service = service
        self._reaper = Reaper(client)
        """Kills and removals (:mod:`._podman_shutdown`), with the sandboxes' init pidfds."""
        self._image_envs = ImageEnvs()
        self.url = url
        """The API URL in use."""

    @property
    def remote(self) -> bool:
        """True for an engine reached over ssh (another machine, as far as we know)."""
        return self._link is not None

    @classmethod
    async def connect(
        cls,
        *,
        state_dir: Path,
        url: str | None = None,
        start_service: bool = True,
        channel: Channel = LOCAL_CHANNEL,
        identity: Path | None = None,
        known_hosts: Path | None = None,
    ) -> PodmanBackend:
        """Find (or start) a podman API service, then remove leftovers of dead bridges.

        ``url`` forces one API URL; otherwise the usual sockets are tried. An ``ssh://`` URL
        (also from ``CONTAINER_HOST``) reaches an engine on another machine through one ssh
        client of ours (``identity``: its key; ``known_hosts``: the file its host key must be
        in), with the stdio channel whatever ``channel`` says. Raises
        :class:`RuntimeUnavailable` naming every URL tried, :class:`ConfigError` for a bad ssh
        URL, and :class:`~bridge_core.private_files.UnsafeDirectory` for a ``state_dir``
        another account owns.
        """
        await anyio.to_thread.run_sync(private_dir, state_dir)
        # An older version made it 0755; the owner dirs inside are private, it must be too.
        await anyio.to_thread.run_sync(private_dir, state_dir / "sandboxes")
        engine = await find_engine(
            state_dir=state_dir,
            url=url,
            start_service=start_service,
            identity=identity,
            known_hosts=known_hosts,
        )
        backend = cls(
            engine.client,
            url=engine.url,
            state_dir=state_dir,
            service=engine.service,
            link=engine.link,
            channel=channel,
        )
        try:
            data: dict[str, Any] = await _run(backend._client.info)
            # Before anything else touches host paths: a runtime in a VM cannot use them. The
            # stdio channel needs no shared kernel.
            kernel = str(data.get("host", {}).get("kernel"))
            problem = kernel_problem("podman", backend.url, kernel)
            if problem and backend.channel == "socket":
                raise RuntimeUnavailable(problem)
            backend.track_oom = can_track_oom(engine, data)
            backend.seccomp, backend.seccomp_problem = await seccomp_profile(engine, state_dir)
            await backend.remove_leftovers()
        except api.FAILURES as exc:
            await backend.aclose()
            raise RuntimeUnavailable(f"podman at {backend.url} fails: {exc}") from exc
        except BaseException:
            await backend.aclose()
            raise
        return backend

    async def info(self) -> RuntimeInfo:
        """Version, rootless or not, and whether this host enforces resource limits."""
        try:
            data: dict[str, Any] = await _run(self._client.info)
        except api.FAILURES as exc:
            raise RuntimeUnavailable(f"podman at {self.url} did not answer: {exc}") from exc
        host = data.get("host", {})
        rootless = bool(host.get("security", {}).get("rootless", False))
        cgroup_version = str(host.get("cgroupVersion", ""))
        reason = api.limits_support(rootless, cgroup_version, host.get("cgroupControllers") or [])
        version = str(data.get("version", {}).get("Version", "unknown"))
        where = self.url if self._link is None else f"ssh://{self._link.target.destination}"
        detail = f"API {where}; channel {self.channel}; cgroup {cgroup_version or 'unknown'}"
        if self.channel == "stdio":
            # No kernel check on this channel: say which kernel the engine's containers get.
            detail += f"; engine kernel {host.get('kernel') or 'unknown'}"
        if self._service is not None:
            detail += " (private service started by the bridge)"
        if reason:
            detail += f"; limits NOT enforced: {reason}"
        seccomp = describe_filter(self.seccomp, self.seccomp_problem)
        return RuntimeInfo("podman", version, rootless, not reason, detail, seccomp=seccomp)

    async def start(self, spec: SandboxSpec) -> ContainerSandbox:
        """Create, verify and start the container, then accept its channel connection."""
        if self.channel == "stdio":
            return await self._start_attached(spec)
        return await super().start(spec)

    async def _start_attached(self, spec: SandboxSpec) -> ContainerSandbox:
        """Create, verify, attach to its stdio, start; return once the client spoke."""
        if self._link is not None:
            await self._link.ensure()  # a dropped link is reopened for the next sandbox
        name = container_name(spec.name)
        # The host's copies of the files copied in (see _copy_in); _forget removes it.
        host_dir = ChannelDir.create(self._sandboxes, name, shared=False)
        self._events.follow(name)
        stream: AttachedStream | None = None
        try:
            await _run(self._create_verify_start, spec, name, None)
            stream = await open_attach(self.url, name)
            await _run(api.start, self._client, name)
            await self._hold_init_async(name)
            await wait_spoken(stream, name, spec.connect_timeout, partial(self._death, name, 0))
        except BaseException:
            await self._undo_start(name, stream)
            raise
        sandbox = ContainerSandbox(
            name=name,
            stream=stream,
            spec=spec,
            channel=None,
            copy_in=partial(self._copy_in, name),
            host_dir=host_dir.path,
        )
        self._live[name] = sandbox
        return sandbox

    async def _copy_in(self, name: str, source: Path, inside: str) -> None:
        """A file for the sandbox's code (a kept full output) into its read-only tmpfs."""
        await _run(api.copy_in_read_only, self._client, name, source, inside)

    async def _hold_init_async(self, name: str) -> None:
        if self._link is None:  # a pid on another machine is not ours to open
            await anyio.to_thread.run_sync(self._hold_init, name)

    async def _undo_start(self, name: str, channel: AttachedStream | None = None) -> None:
        """Remove what a failed or cancelled start left: shielded (a cancelled caller must still
        not leak the container) but bounded."""
        with anyio.CancelScope(shield=True):
            killed = self._reaper.kill_init(name)
            if killed:
                # Started: auto-removal deletes it. Not waited for here (a start cancelled by the
                # shutdown would hold up the kill of every other sandbox); the shutdown's
                # kill_all waits for it with the others.
                self._reaper.unconfirmed.add(name)
            with anyio.move_on_after(CLEANUP_TIMEOUT):
                if channel is not None:
                    await anyio.aclose_forcefully(channel)
                if not killed:
                    await self._remove_half_started(name)
            await self._forget(name, patient=not killed)

    async def _remove_half_started(self, name: str) -> None:
        try:
            await anyio.to_thread.run_sync(
                api.remove_quietly, self._client, name, abandon_on_cancel=True
            )
        except api.FAILURES as cleanup:
            # The API being down is often why the start failed: the cleanup's error must not
            # replace the start's (the next start's sweep removes it).
            logger.warning("could not remove half-started sandbox %s: %s", name, cleanup)

    def _log_path(self, name: str) -> Path:
        return self._sandboxes / f"{name}.log"

    async def _launch(self, spec: SandboxSpec, name: str, channel_dir: Path) -> None:
        await _run(self._create_verify_start, spec, name, channel_dir)

    def _create_verify_start(self, spec: SandboxSpec, name: str, channel_dir: Path | None) -> None:
        """Create and verify (:func:`._podman_create.create_verified`); then start (socket
        channel), or leave it initialised for the attach (``channel_dir`` None: the stdio
        channel, started by the caller)."""
        started = create_verified(
            self._client,
            spec,
            name,
            owner=self.owner,
            seccomp=self.seccomp,
            seccomp_problem=self.seccomp_problem,
            link=self._link,
            url=self.url,
            cgroup_parent=_oom.cgroup_parent(name) if self.track_oom else None,
            channel_dir=channel_dir,
            log_path=self._log_path(name) if channel_dir is not None else None,
            image_envs=self._image_envs,
        )
        if started:
            self._hold_init(name)

    def _hold_init(self, name: str) -> None:
        """Open a pidfd on the started container's init (see :mod:`._pidfd`). Done in the
        worker thread of the start, so that even a start cancelled right now is killed through
        it; :meth:`_forget` closes it. Without one, kills go through the API."""
        try:
            attrs = api.inspect(self._client, name)
        except api.FAILURES as exc:
            logger.debug("no init pid for %s (%r): it will be killed through the API", name, exc)
            return
        self._reaper.hold(name, attrs)

    async def _exited_while_starting(self, name: str, memory_limit: int) -> str | None:
        """:meth:`_death` for a start waiting for the channel: with the init held, it waits for
        the init to exit first, so the API is not asked every poll while the sandbox's Python
        starts (podman answers each inspect with work of its own, on the cores that start)."""
        held = self._reaper.inits.get(name)
        if held is not None:
            await held.exited()
        return await self._death(name, memory_limit)

    async def _last_output(self, name: str) -> str:
        if self.channel == "stdio":
            return ""  # its stderr came over the attach stream
        return await anyio.to_thread.run_sync(api.log_tail, self._log_path(name))

    async def _check_peer(self, name: str, peer: PeerCredentials) -> str | None:
        """Why ``peer`` is not a process of container ``name`` (None: it is)."""
        held = self._reaper.inits.get(name)
        if held is not None and held.alive():
            # The pid the held pidfd names (checked to be the container's when opened); alive
            # after the check too, so the pid was not reused while /proc was read.
            problem = await anyio.to_thread.run_sync(container_peer_problem, peer, held.pid)
            return problem if held.alive() else "the container's first process exited"
        try:
            inspect: dict[str, Any] = await _run(api.inspect, self._client, name)
        except api.FAILURES as exc:
            return f"podman cannot say which processes are the sandbox's ({exc})"
        container_pid = int((inspect.get("State") or {}).get("Pid") or 0)
        return await anyio.to_thread.run_sync(container_peer_problem, peer, container_pid)

    async def _state(self, name: str) -> dict[str, Any] | None:
        try:
            inspect: dict[str, Any] = await _run(api.inspect, self._client, name)
        except api.NotFound:
            return None
        state: dict[str, Any] = inspect["State"]
        return state

    async def _stop_and_remove(self, name: str, grace: float) -> None:
        await _run(api.stop_and_remove, self._client, name, grace)

    async def _remove(self, name: str) -> None:
        await _run(api.remove_quietly, self._client, name)

    async def _kill_many(self, names: Sequence[str]) -> None:
        """Through pidfds (:meth:`._podman_shutdown.Reaper.kill_all`; its module says where the
        time goes), returning once podman removed them or after :data:`REMOVAL_WAIT`; also waits
        for sandboxes a cancelled start killed. Their cgroup parents (:mod:`._oom`) are left to
        the next start's sweep (one pass over 128 took 3.5 s under load)."""
        await self._reaper.kill_all(names)

    def _forget_all(self, names: Sequence[str]) -> None:
        """Also each one's pidfd and log."""
        super()._forget_all(names)
        for name in names:
            self._reaper.release(name)
            self._log_path(name).unlink(missing_ok=True)

    async def _remove_leftover_containers(self) -> int:
        return await self._reaper.remove_leftovers()

    async def aclose(self) -> None:
        """Then close the API client, stop the private service if this backend started one,
        close the ssh link."""
        with anyio.CancelScope(shield=True):
            await super().aclose()
            api.close(self._client)
            if self._service is not None:
                await self._service.aclose()
                self._service = None
            if self._link is not None:
                await self._link.aclose()
