"""The docker backend: the ``docker`` CLI (:mod:`._docker_cli`; the SDK is not a dependency).

Same behaviour as the podman backend: the same hardening (checked by ``docker inspect`` before
the container starts), the same system-call filter (the docker CLI reads the profile file and
sends its content, which inspect shows back in ``SecurityOpt``), a capped container log, the same
private channel with its peer check, ownership labels and leftover cleanup (containers, and the
per-owner channel directories of dead bridges). Docker's ``--read-only`` adds no writable /run or
/var/tmp, so no ``--read-only-tmpfs`` is needed.

Failures keep their meaning (:mod:`._docker_cli`): a daemon that does not answer is
:class:`~bridge_core.errors.RuntimeUnavailable` from :meth:`DockerBackend.status`, never a
container reported gone; every command is bounded in time and in number.

Docker 20.10 on cgroup v1 does not report ``OOMKilled`` for a sandbox whose init survived the
kill (measured: exit 137, ``OOMKilled: false``): where the bridge reads the host's cgroups (local
daemon, root, cgroupfs driver) each sandbox gets a cgroup parent of its own, read after its
death as for podman (:mod:`._oom`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from bridge_core.errors import RuntimeUnavailable, SandboxStartError
from bridge_core.private_files import private_dir
from bridge_core.runtime import _oom
from bridge_core.runtime._docker_cli import (
    COMMAND_TIMEOUT,
    CommandRefused,
    DaemonUnavailable,
    DockerCLI,
    NoSuchObject,
    applied_seccomp,
    create_args,
    lifecycle_violations,
)
from bridge_core.runtime._docker_events import DockerEvents
from bridge_core.runtime._engine import CLEANUP_TIMEOUT, ContainerEngine
from bridge_core.runtime._hardening import ContainerRecord, container_labels, select_leftovers
from bridge_core.runtime._locality import kernel_problem
from bridge_core.runtime._peer import PeerCredentials, container_peer_problem
from bridge_core.runtime._seccomp import (
    SeccompUnavailable,
    describe_filter,
    profile_to_apply,
    write_profile,
)
from bridge_core.runtime._verify import hardening_violations, seccomp_violations
from bridge_core.runtime.base import (
    IMAGE_BUILD_COMMAND,
    OWNER_LABEL,
    PRODUCT_LABEL,
    RuntimeInfo,
    SandboxSpec,
)

__all__ = ["CLEANUP_TIMEOUT", "COMMAND_TIMEOUT", "DockerBackend", "create_args"]

logger = logging.getLogger(__name__)

KILL_BATCH = 32
"""Containers per ``docker rm --force`` at shutdown: one CLI process for many sandboxes."""


_OWNERSHIP = (PRODUCT_LABEL, OWNER_LABEL)


def _is_local(host: str | None) -> bool:
    return host is None or host.startswith("unix://")


class DockerBackend(ContainerEngine):
    """Sandboxes as docker containers, driven through the docker CLI."""

    name = "docker"
    _transient = (DaemonUnavailable,)

    def __init__(self, cli: DockerCLI, *, state_dir: Path) -> None:
        super().__init__(state_dir, partial(DockerEvents, cli.prefix), _oom.EngineCgroups())
        self._cli = cli

    @classmethod
    async def connect(
        cls,
        *,
        state_dir: Path,
        binary: str | None = None,
        host: str | None = None,
        command_timeout: float = COMMAND_TIMEOUT,
    ) -> DockerBackend:
        """Check that a docker daemon answers, then remove leftovers of dead bridges.

        ``host`` is passed as ``--host`` (None: ``$DOCKER_HOST`` or the CLI's default);
        ``command_timeout`` bounds every docker command. Raises :class:`RuntimeUnavailable`.
        """
        found = binary or shutil.which("docker")
        if found is None:
            raise RuntimeUnavailable("no `docker` binary on PATH")
        await anyio.to_thread.run_sync(private_dir, state_dir)  # holds the channel sockets
        await anyio.to_thread.run_sync(private_dir, state_dir / "sandboxes")
        backend = cls(DockerCLI(found, host=host, timeout=command_timeout), state_dir=state_dir)
        try:
            data = await backend._info()
        except CommandRefused as exc:
            raise RuntimeUnavailable(f"docker info failed: {exc}") from None
        backend._events.start()
        try:
            await backend._prepare(data, state_dir, host)
        except BaseException:
            backend._events.close()
            raise
        return backend

    async def _prepare(self, data: dict[str, Any], state_dir: Path, host: str | None) -> None:
        """What connecting does once the daemon answered: the kernel check, OOM tracking, the
        seccomp profile, the leftover sweep."""
        problem = kernel_problem("docker", self._cli.where, str(data.get("KernelVersion")))
        if problem:
            raise RuntimeUnavailable(problem)
        self.track_oom = (
            _is_local(host or os.environ.get("DOCKER_HOST"))
            and os.geteuid() == 0
            and data.get("CgroupDriver") == "cgroupfs"
            and not _rootless(data)
        )
        try:
            # The CLI reads the file and sends its content: a remote daemon gets it too.
            self.seccomp = await anyio.to_thread.run_sync(write_profile, state_dir)
        except SeccompUnavailable as exc:
            self.seccomp_problem = str(exc)
        except OSError as exc:
            raise RuntimeUnavailable(f"cannot write the sandbox seccomp profile: {exc}") from exc
        await self.remove_leftovers()

    async def _info(self) -> dict[str, Any]:
        out = await self._cli.run("info", "--format", "{{json .}}")
        try:
            data = json.loads(out)
        except ValueError as exc:
            raise CommandRefused(f"docker info printed no JSON: {exc}") from None
        if not isinstance(data, dict) or not data.get("ServerVersion"):
            # The CLI prints client-side info and exits 0 when the daemon part fails.
            errors = data.get("ServerErrors") if isinstance(data, dict) else None
            raise DaemonUnavailable(
                f"the docker daemon at {self._cli.where} does not answer: {errors or out[:200]}"
            )
        return data

    async def info(self) -> RuntimeInfo:
        """Version, rootless or not, whether limits are enforced (cgroup v1 rootless: no)."""
        try:
            data = await self._info()
        except CommandRefused as exc:
            raise RuntimeUnavailable(f"docker info failed: {exc}") from exc
        rootless = _rootless(data)
        cgroup = str(data.get("CgroupVersion", ""))
        enforced = not (rootless and cgroup != "2")
        detail = f"{self._cli.where}; cgroup v{cgroup or '?'}"
        if not enforced:
            detail += "; limits NOT enforced: rootless docker on cgroup v1 ignores them"
        seccomp = describe_filter(self.seccomp, self.seccomp_problem)
        return RuntimeInfo(
            "docker", str(data.get("ServerVersion", "?")), rootless, enforced, detail, seccomp
        )

    async def _launch(self, spec: SandboxSpec, name: str, channel_dir: Path) -> None:
        ours = profile_to_apply(spec.security_opt, self.seccomp, self.seccomp_problem)
        try:
            image = await self._cli.inspect("image", spec.source)
        except NoSuchObject:
            checked = f" (checked as {spec.image_id})" if spec.image_id else ""
            raise SandboxStartError(
                f"sandbox image {spec.image!r}{checked} is not in docker's image store: build it "
                f"with `{IMAGE_BUILD_COMMAND}` (it builds with podman) and load it into docker "
                f"(podman save {spec.image} | docker load), or set MCP_BRIDGE_IMAGE to an image "
                "you have"
            ) from None
        except CommandRefused as exc:
            raise SandboxStartError(f"docker cannot look up image {spec.image!r}: {exc}") from None
        # Created from the image just inspected, by its ID: its environment is what the check
        # below allows, and a name re-tagged meanwhile cannot swap it.
        found = str(image.get("Id") or "")
        args = create_args(
            dataclasses.replace(spec, image_id=found) if found else spec,
            name=name,
            labels=container_labels(spec, self.owner),
            channel_dir=channel_dir,
            seccomp_profile=None if ours is None else ours.path,
            cgroup_parent=_oom.cgroup_parent(name) if self.track_oom else None,
        )
        try:
            await self._cli.run(*args, finish=True)  # the cleanup of a cancelled start finds it
            inspect = await self._cli.inspect("container", name)
        except CommandRefused as exc:
            raise SandboxStartError(
                f"docker could not create sandbox container {name}: {exc}"
            ) from None
        problems = hardening_violations(
            inspect, spec, image_env=(image.get("Config") or {}).get("Env") or []
        ) + lifecycle_violations(inspect)
        if ours is not None:
            problems += seccomp_violations(applied_seccomp(inspect), ours.content)
        if problems:
            await self._remove(name)
            raise SandboxStartError(
                f"docker did not apply {'; '.join(problems)} to sandbox container {name}; "
                "refusing to run it (the container was removed)"
            )
        try:
            await self._cli.run("start", name)
        except CommandRefused as exc:
            raise SandboxStartError(
                f"docker could not start sandbox container {name}: {exc}"
            ) from None

    async def _last_output(self, name: str) -> str:
        try:
            return (await self._cli.run("logs", "--tail", "20", name)).strip()
        except CommandRefused as exc:
            return f"(logs unavailable: {exc})"

    async def _check_peer(self, name: str, peer: PeerCredentials) -> str | None:
        """Why ``peer`` is not a process of container ``name`` (None: it is)."""
        try:
            inspect = await self._cli.inspect("container", name)
        except (CommandRefused, DaemonUnavailable) as exc:
            return f"docker cannot say which processes are the sandbox's ({exc})"
        container_pid = int((inspect.get("State") or {}).get("Pid") or 0)
        return await anyio.to_thread.run_sync(container_peer_problem, peer, container_pid)

    async def _state(self, name: str) -> dict[str, Any] | None:
        try:
            inspect = await self._cli.inspect("container", name)
        except NoSuchObject:
            return None
        except CommandRefused as exc:
            raise RuntimeUnavailable(f"docker cannot inspect sandbox {name}: {exc}") from None
        state: dict[str, Any] = inspect.get("State") or {}
        return state

    async def _remove(self, name: str) -> None:
        """Kill and remove ``name``; a failure is logged, never raised (cleanup paths: the
        daemon being down is often why we are here, and the next start's sweep retries)."""
        try:
            await self._cli.remove(name)
        except (CommandRefused, DaemonUnavailable) as exc:
            logger.warning("could not remove sandbox %s: %s", name, exc)

    async def _stop_and_remove(self, name: str, grace: float) -> None:
        try:
            await self._cli.run("stop", "--time", str(max(1, round(grace))), name)
        except (CommandRefused, DaemonUnavailable) as exc:
            logger.debug("stop of %s failed (%s); removing it by force", name, exc)
        await self._remove(name)

    async def _kill_many(self, names: Sequence[str]) -> None:
        """One ``docker rm --force`` per :data:`KILL_BATCH` sandboxes, concurrently: a CLI
        process per sandbox would cost ~0.3 s of CPU each (docker's auto-removal deletes those
        whose client exited first)."""
        with anyio.move_on_after(CLEANUP_TIMEOUT):
            async with anyio.create_task_group() as kills:
                for first in range(0, len(names), KILL_BATCH):
                    kills.start_soon(self._remove_many, names[first : first + KILL_BATCH])

    async def _remove_many(self, names: Sequence[str]) -> None:
        try:
            await self._cli.run("rm", "--force", *names)
        except CommandRefused:
            # Some were gone already (auto-removed): the others were removed all the same,
            # except one that exited as it was killed, which the daemon refused to remove, and
            # one whose auto-removal was under way, which the daemon answered at once while the
            # container was still there (it stayed listed after the bridge had exited). Those
            # still listed are removed one by one, each waited for (DockerCLI.remove).
            async with anyio.create_task_group() as removals:
                for name in await self._still_there(names):
                    removals.start_soon(self._remove, name)
        except DaemonUnavailable as exc:
            logger.warning("could not remove sandboxes %s: %s", ", ".join(names), exc)

    async def _still_there(self, names: Sequence[str]) -> list[str]:
        """Those of ``names`` the daemon still lists (one ``docker ps``; all when it fails)."""
        try:
            listed = await self._cli.run(
                "ps",
                "--all",
                f"--filter=label={OWNER_LABEL}={self.owner.label}",
                "--format={{.Names}}",
            )
        except (CommandRefused, DaemonUnavailable):
            return list(names)
        there = set(listed.split())
        return [name for name in names if name in there]

    async def _remove_leftover_containers(self) -> int:
        # One label per template (``{{.Labels}}`` joins them with commas, which values may hold).
        template = "\t".join(f'{{{{.Label "{label}"}}}}' for label in _OWNERSHIP)
        listed = await self._cli.run(
            "ps", "--all", f"--filter=label={PRODUCT_LABEL}", "--format={{.Names}}\t" + template
        )
        records = []
        for line in listed.splitlines():
            name, *values = line.split("\t")
            records.append(ContainerRecord(name, dict(zip(_OWNERSHIP, values, strict=False))))
        names = select_leftovers(records)
        async with anyio.create_task_group() as removals:
            for name in names:
                removals.start_soon(self._remove, name)
        return len(names)


def _rootless(info: dict[str, Any]) -> bool:
    return any("rootless" in str(option) for option in info.get("SecurityOptions") or ())
