"""The docker backend: the ``docker`` CLI (the docker SDK is deliberately not a dependency).

Same behaviour as the podman backend: the same hardening (checked by ``docker inspect`` before
the container starts), the same system-call filter (the docker CLI reads the profile file and
sends its content, which inspect shows back in ``SecurityOpt``), the same private channel with
its peer check, ownership labels and leftover cleanup. Docker's ``--read-only`` adds no writable
/run or /var/tmp, so no ``--read-only-tmpfs`` is needed.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import SocketListener
from bridge_protocol.paths import SANDBOX_CHANNEL_DIR

from bridge_core.errors import RuntimeUnavailable, SandboxStartError
from bridge_core.private_files import private_dir
from bridge_core.runtime._channel import ChannelDir, accept_channel
from bridge_core.runtime._hardening import (
    SANDBOX_USER,
    TMPFS_MODE,
    container_labels,
    container_name,
    ulimits,
)
from bridge_core.runtime._locality import kernel_problem
from bridge_core.runtime._ownership import ContainerRecord, current_owner, select_leftovers
from bridge_core.runtime._peer import PeerCredentials, container_peer_problem
from bridge_core.runtime._sandbox import ContainerSandbox
from bridge_core.runtime._seccomp import (
    SeccompProfile,
    SeccompUnavailable,
    describe_filter,
    profile_to_apply,
    user_seccomp_option,
    write_profile,
)
from bridge_core.runtime._verify import hardening_violations, seccomp_violations
from bridge_core.runtime.base import (
    IMAGE_BUILD_COMMAND,
    PRODUCT_LABEL,
    RuntimeInfo,
    Sandbox,
    SandboxExit,
    SandboxSpec,
)

__all__ = ["CLI_TIMEOUT", "DockerBackend", "create_args"]

CLI_TIMEOUT = 60.0
"""Seconds any single docker command may take (a hung daemon must not hang the bridge)."""
CLEANUP_TIMEOUT = 15.0
KILLS_AT_ONCE = 16
"""Concurrent ``docker rm --force`` commands at shutdown."""


class _CommandFailed(Exception):
    pass


def create_args(
    spec: SandboxSpec,
    *,
    name: str,
    labels: Mapping[str, str],
    channel_dir: Path,
    seccomp_profile: Path | None = None,
) -> list[str]:
    """``docker create`` arguments giving the full hardening of the sandbox (pure).

    ``seccomp_profile`` (see :mod:`._seccomp`) replaces docker's default filter unless the
    spec's own ``seccomp=`` option names another.
    """
    limits = spec.limits
    ours = [] if seccomp_profile is None else [f"--security-opt=seccomp={seccomp_profile}"]
    args = [
        "create",
        f"--name={name}",
        f"--user={SANDBOX_USER}",
        "--cap-drop=ALL",
        "--read-only",
        "--security-opt=no-new-privileges",
        *(ours if user_seccomp_option(spec.security_opt) is None else []),
        *(f"--security-opt={option}" for option in spec.security_opt),
        "--network=none",
        f"--memory={limits.memory_bytes}",
        f"--memory-swap={limits.memory_bytes}",
        f"--pids-limit={limits.pids}",
        f"--tmpfs=/tmp:rw,size={limits.tmpfs_bytes},mode={TMPFS_MODE}",
        "--init",
        *(f"--ulimit={u.name}={u.soft}:{u.hard}" for u in ulimits(limits)),
        f"--mount=type=bind,source={channel_dir},target={SANDBOX_CHANNEL_DIR},readonly",
        *(f"--label={key}={value}" for key, value in labels.items()),
    ]
    if limits.cpu_quota is not None:
        args += [f"--cpu-quota={limits.cpu_quota}", f"--cpu-period={limits.cpu_period}"]
    return [*args, spec.image]


def _applied_seccomp(inspect: Mapping[str, Any]) -> dict[str, Any] | None:
    """The profile docker keeps for the container (``seccomp=<JSON>`` in ``SecurityOpt``)."""
    for option in (inspect.get("HostConfig") or {}).get("SecurityOpt") or ():
        if str(option).startswith("seccomp="):
            try:
                profile = json.loads(str(option).removeprefix("seccomp="))
            except ValueError:
                return None
            return profile if isinstance(profile, dict) else None
    return None


class DockerBackend:
    """Sandboxes as docker containers, driven through the docker CLI."""

    name = "docker"

    def __init__(self, *, binary: str, state_dir: Path) -> None:
        self._binary = binary
        self._sandboxes = state_dir / "sandboxes"
        self.owner = current_owner()
        """This bridge process, as written in the ownership label of every container."""
        self._live: dict[str, ContainerSandbox] = {}
        self.seccomp: SeccompProfile | None = None
        """The sandboxes' system-call filter (:mod:`._seccomp`); set by :meth:`connect`."""
        self.seccomp_problem = "not connected"
        """Why :attr:`seccomp` is None (then only a profile of the user's own is accepted)."""

    @classmethod
    async def connect(cls, *, state_dir: Path, binary: str | None = None) -> DockerBackend:
        """Check that a docker daemon answers, then remove leftovers of dead bridges."""
        found = binary or shutil.which("docker")
        if found is None:
            raise RuntimeUnavailable("no `docker` binary on PATH")
        await anyio.to_thread.run_sync(private_dir, state_dir)  # holds the channel sockets
        backend = cls(binary=found, state_dir=state_dir)
        try:
            await backend._docker("version", "--format", "{{.Server.Version}}")
        except _CommandFailed as exc:
            raise RuntimeUnavailable(f"the docker daemon does not answer: {exc}") from None
        try:
            kernel = await backend._docker("info", "--format", "{{.KernelVersion}}")
        except _CommandFailed as exc:
            raise RuntimeUnavailable(f"docker info failed: {exc}") from None
        where = os.environ.get("DOCKER_HOST") or "the docker CLI's daemon"
        problem = kernel_problem("docker", where, kernel)
        if problem:
            raise RuntimeUnavailable(problem)
        try:
            # The CLI reads the file and sends its content: a remote daemon gets it too.
            backend.seccomp = await anyio.to_thread.run_sync(write_profile, state_dir)
        except SeccompUnavailable as exc:
            backend.seccomp_problem = str(exc)
        except OSError as exc:
            raise RuntimeUnavailable(f"cannot write the sandbox seccomp profile: {exc}") from exc
        await backend.remove_leftovers()
        return backend

    async def _docker(self, *args: str, check: bool = True) -> str:
        try:
            with anyio.fail_after(CLI_TIMEOUT):
                result = await anyio.run_process([self._binary, *args], check=False)
        except TimeoutError:
            raise _CommandFailed(f"`docker {args[0]}` took over {CLI_TIMEOUT:g} s") from None
        if check and result.returncode != 0:
            raise _CommandFailed(result.stderr.decode(errors="replace").strip())
        return result.stdout.decode(errors="replace")

    async def _inspect(self, kind: str, name: str) -> dict[str, Any] | None:
        try:
            out = await self._docker(kind, "inspect", name)
        except _CommandFailed:
            return None
        items: Sequence[dict[str, Any]] = json.loads(out)
        return items[0] if items else None

    async def info(self) -> RuntimeInfo:
        """Version, rootless or not, whether limits are enforced (cgroup v1 rootless: no)."""
        try:
            data = json.loads(await self._docker("info", "--format", "{{json .}}"))
        except (_CommandFailed, ValueError) as exc:
            raise RuntimeUnavailable(f"docker info failed: {exc}") from exc
        rootless = any("rootless" in str(opt) for opt in data.get("SecurityOptions") or ())
        cgroup = str(data.get("CgroupVersion", ""))
        enforced = not (rootless and cgroup != "2")
        detail = f"cgroup v{cgroup or '?'}"
        if not enforced:
            detail += "; limits NOT enforced: rootless docker on cgroup v1 ignores them"
        seccomp = describe_filter(self.seccomp, self.seccomp_problem)
        return RuntimeInfo(
            "docker", str(data.get("ServerVersion", "?")), rootless, enforced, detail, seccomp
        )

    async def start(self, spec: SandboxSpec) -> ContainerSandbox:
        """Create, verify and start the container, then accept its channel connection."""
        name = container_name(spec.name)
        channel = ChannelDir.create(self._sandboxes, name)
        listener: SocketListener | None = None
        try:
            listener = await channel.listen()
            await self._create_verify_start(spec, name, channel.path)
            stream = await accept_channel(
                listener,
                exited=lambda: self._death(name),
                check_peer=partial(self._check_peer, name),
                what=f"sandbox container {name}",
                connect_timeout=spec.connect_timeout,
            )
        except BaseException:
            with anyio.CancelScope(shield=True), anyio.move_on_after(CLEANUP_TIMEOUT):
                if listener is not None:
                    await listener.aclose()
                await self._docker("rm", "--force", name, check=False)
            channel.remove()
            raise
        await listener.aclose()
        channel.unlink_socket()
        sandbox = ContainerSandbox(name=name, stream=stream, spec=spec, channel=channel)
        self._live[name] = sandbox
        return sandbox

    async def _create_verify_start(self, spec: SandboxSpec, name: str, channel_dir: Path) -> None:
        ours = profile_to_apply(spec.security_opt, self.seccomp, self.seccomp_problem)
        image = await self._inspect("image", spec.image)
        if image is None:
            raise SandboxStartError(
                f"sandbox image {spec.image!r} is not in docker's image store: build it with "
                f"`{IMAGE_BUILD_COMMAND}` (it builds with podman) and load it into docker "
                f"(podman save {spec.image} | docker load), or set MCP_BRIDGE_IMAGE to an image "
                "you have"
            )
        labels = container_labels(spec, self.owner)
        try:
            await self._docker(
                *create_args(
                    spec,
                    name=name,
                    labels=labels,
                    channel_dir=channel_dir,
                    seccomp_profile=None if ours is None else ours.path,
                )
            )
        except _CommandFailed as exc:
            raise SandboxStartError(
                f"docker could not create sandbox container {name}: {exc}"
            ) from None
        inspect = await self._inspect("container", name)
        problems = (
            ["container vanished after create"]
            if inspect is None
            else hardening_violations(
                inspect, spec, image_env=(image.get("Config") or {}).get("Env") or []
            )
        )
        if inspect is not None and ours is not None:
            problems += seccomp_violations(_applied_seccomp(inspect), ours.content)
        if problems:
            await self._docker("rm", "--force", name, check=False)
            raise SandboxStartError(
                f"docker did not apply {'; '.join(problems)} to sandbox container {name}; "
                "refusing to run it (the container was removed)"
            )
        try:
            await self._docker("start", name)
        except _CommandFailed as exc:
            raise SandboxStartError(
                f"docker could not start sandbox container {name}: {exc}"
            ) from None

    async def _death(self, name: str) -> str | None:
        exit_ = await self._status(name)
        if exit_.running:
            return None
        result = await anyio.run_process([self._binary, "logs", "--tail", "20", name], check=False)
        # docker replays the container's stderr on its own stderr
        logs = (result.stdout + result.stderr).decode(errors="replace").strip()
        return exit_.describe() + (f"; last output:\n{logs}" if logs else "")

    async def _check_peer(self, name: str, peer: PeerCredentials) -> str | None:
        """Why ``peer`` is not a process of container ``name`` (None: it is)."""
        inspect = await self._inspect("container", name)
        if inspect is None:
            return "docker cannot say which processes are the sandbox's"
        container_pid = int((inspect.get("State") or {}).get("Pid") or 0)
        return await anyio.to_thread.run_sync(container_peer_problem, peer, container_pid)

    async def _status(self, name: str) -> SandboxExit:
        inspect = await self._inspect("container", name)
        if inspect is None:
            return SandboxExit(running=False, error="container is gone")
        state = inspect.get("State") or {}
        running = bool(state.get("Running"))
        return SandboxExit(
            running=running,
            exit_code=None if running else state.get("ExitCode"),
            oom_killed=bool(state.get("OOMKilled")),
            error=str(state.get("Error") or ""),
        )

    async def status(self, sandbox: Sandbox) -> SandboxExit:
        """Whether it runs; if not, its exit code and whether it was OOM-killed."""
        return await self._status(sandbox.name)

    async def stop(self, sandbox: Sandbox, *, grace: float = 2.0) -> None:
        """Close the channel, SIGTERM, SIGKILL after ``grace`` seconds, remove. Cancel-safe."""
        self._live.pop(sandbox.name, None)
        with anyio.CancelScope(shield=True):
            await anyio.aclose_forcefully(sandbox.stream)
            with anyio.move_on_after(grace + CLEANUP_TIMEOUT):
                seconds = str(max(1, round(grace)))
                await self._docker("stop", "--time", seconds, sandbox.name, check=False)
                await self._docker("rm", "--force", sandbox.name, check=False)
            ChannelDir(self._sandboxes / sandbox.name).remove()

    async def kill(self, sandbox: Sandbox) -> None:
        """SIGKILL and remove now (``docker rm --force`` kills immediately). Cancel-safe."""
        self._live.pop(sandbox.name, None)
        with anyio.CancelScope(shield=True):
            await anyio.aclose_forcefully(sandbox.stream)
            with anyio.move_on_after(CLEANUP_TIMEOUT):
                await self._docker("rm", "--force", sandbox.name, check=False)
            ChannelDir(self._sandboxes / sandbox.name).remove()

    async def kill_all(self, sandboxes: Sequence[Sandbox]) -> None:
        """Kill and remove every sandbox, :data:`KILLS_AT_ONCE` docker commands at a time.

        No auto-removal and no pidfds here (yet): this is the podman backend's per-container
        path, run concurrently. Cancel-safe.
        """
        limiter = anyio.CapacityLimiter(KILLS_AT_ONCE)

        async def kill(sandbox: Sandbox) -> None:
            async with limiter:
                await self.kill(sandbox)

        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as kills:
                for sandbox in sandboxes:
                    kills.start_soon(kill, sandbox)

    async def remove_leftovers(self) -> int:
        """Remove our containers whose owner bridge process is gone; return how many."""
        ids = (
            await self._docker("ps", "--all", "--quiet", "--filter", f"label={PRODUCT_LABEL}")
        ).split()
        records = []
        for container_id in ids:
            inspect = await self._inspect("container", container_id)
            if inspect is not None:
                name = str(inspect.get("Name", container_id)).lstrip("/")
                labels = (inspect.get("Config") or {}).get("Labels") or {}
                records.append(ContainerRecord(name, labels))
        names = select_leftovers(records)
        for name in names:
            await self._docker("rm", "--force", name, check=False)
            ChannelDir(self._sandboxes / name).remove()
        return len(names)

    async def aclose(self) -> None:
        """Kill sandboxes still running (normally the session manager stopped them all)."""
        await self.kill_all(list(self._live.values()))
