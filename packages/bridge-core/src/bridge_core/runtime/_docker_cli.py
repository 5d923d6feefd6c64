"""Every docker CLI command the docker backend runs, and what its failures mean.

The docker SDK is deliberately not a dependency: the CLI is what users have, it reads a seccomp
profile file and sends its content (so a daemon elsewhere gets the filter too), and it runs as
a child process, so nothing here blocks the event loop.

A failed command is one of three things, told apart here and nowhere else:

* :class:`NoSuchObject` — the daemon answered that the container or image does not exist
  (gone, already removed);
* :class:`DaemonUnavailable` — the daemon did not answer (not running, socket refused, or no
  answer within the command's timeout): the container's fate is unknown, never "gone";
* :class:`CommandRefused` — the daemon answered and refused (e.g. an invalid option).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
from bridge_protocol.paths import SANDBOX_CHANNEL_DIR

from bridge_core.errors import RuntimeUnavailable
from bridge_core.runtime._hardening import LOG_MAX_BYTES, SANDBOX_USER, TMPFS_MODE, ulimits
from bridge_core.runtime._seccomp import user_seccomp_option
from bridge_core.runtime._verify import parse_size
from bridge_core.runtime.base import SandboxSpec

__all__ = [
    "COMMANDS_AT_ONCE",
    "COMMAND_TIMEOUT",
    "CommandRefused",
    "DaemonUnavailable",
    "DockerCLI",
    "LOG_ROTATE_AT",
    "NoSuchObject",
    "applied_seccomp",
    "create_args",
    "lifecycle_violations",
]

COMMAND_TIMEOUT = 60.0
"""Seconds any single docker command may take: a hung daemon must not hang the bridge."""
COMMANDS_AT_ONCE = 16
"""docker CLI processes at once per backend: each is a Go process of ~30 MB and some CPU, and a
burst (shutdown of many sessions, a status poll per starting sandbox) must stay bounded."""
_LOG_DRIVER = "json-file"
LOG_ROTATE_AT = LOG_MAX_BYTES - 128 * 1024
"""``max-size`` of the json-file log. Docker rotates after the write that crosses it (measured:
1,052,992 bytes with max-size 1 MiB), so the file's true bound is this plus one record: at most
16 KiB of output, JSON-escaped at most 6 bytes per byte (``\\u00XX``), plus the envelope:
under 128 KiB. The file then stays within :data:`LOG_MAX_BYTES`, like podman's."""
_MISSING = (
    "no such container",
    "no such object",
    "no such image",
    "is already in progress",
)
"""How the daemon says an object does not exist (docker 20.10 to 28: "Error: No such object",
"Error response from daemon: No such container: NAME"; "removal of container NAME is already
in progress" when auto-removal got there first)."""
_IN_PROGRESS = "is already in progress"
RACED_EXIT = "is not running"
"""How ``rm --force`` fails when the container exited between the daemon's check and its kill
(measured on docker 20.10: "Could not kill running container NAME, cannot remove - Container
NAME is not running"); the container is still there and the next ``rm`` removes it."""
_REMOVAL_POLL = 0.05
REMOVAL_WAIT = 10.0
"""Seconds :meth:`DockerCLI.remove` waits for a container to go (removed again, or its
auto-removal finished) before it gives up: a daemon that never lets it go cannot hold a caller."""
"""Seconds between checks that an auto-removal under way has finished (no event to wait on
without a second events stream)."""
_UNREACHABLE = (
    "cannot connect to the docker daemon",
    "is the docker daemon running",
    "error during connect",
    "connection refused",
)


class CommandRefused(Exception):
    """The daemon answered and refused the command (the message is its stderr)."""


class NoSuchObject(CommandRefused):
    """The daemon says the container or image does not exist."""


class DaemonUnavailable(RuntimeUnavailable):
    """The docker daemon did not answer; whatever was asked about is in an unknown state."""


class DockerCLI:
    """Runs ``docker`` commands against one daemon, each bounded in time and in number."""

    def __init__(
        self, binary: str, *, host: str | None = None, timeout: float = COMMAND_TIMEOUT
    ) -> None:
        self.binary = binary
        self.host = host
        """``--host`` for every command (None: the CLI's own choice, ``$DOCKER_HOST``)."""
        self.timeout = timeout
        self._limiter = anyio.CapacityLimiter(COMMANDS_AT_ONCE)

    @property
    def prefix(self) -> list[str]:
        """The command line every docker command starts with."""
        return [self.binary, *(("--host", self.host) if self.host else ())]

    @property
    def where(self) -> str:
        """The daemon, as messages name it."""
        return self.host or os.environ.get("DOCKER_HOST") or "the docker CLI's default daemon"

    async def run(self, *args: str, finish: bool = False) -> str:
        """Run ``docker ARGS``; its stdout. Raises one of the module's three failures.

        ``finish``: run to the end even when the caller is cancelled (still bounded by the
        timeout), for commands that create something. A ``docker create`` killed mid-request
        can still create its container in the daemon a moment later, after the caller's
        cleanup looked for it: a container left behind, never started (measured at bridge
        shutdown with a warm-pool start in flight)."""
        command = [*self.prefix, *args]
        async with self._limiter:
            try:
                with anyio.fail_after(self.timeout, shield=finish):
                    result = await anyio.run_process(command, check=False)
            except TimeoutError:
                raise DaemonUnavailable(
                    f"the docker daemon at {self.where} did not answer `docker {args[0]}` "
                    f"within {self.timeout:g} s"
                ) from None
            except OSError as exc:
                raise DaemonUnavailable(f"cannot run {self.binary}: {exc}") from exc
        if result.returncode == 0:
            return result.stdout.decode(errors="replace")
        stderr = result.stderr.decode(errors="replace").strip()
        lowered = stderr.lower()
        if any(sign in lowered for sign in _UNREACHABLE):
            raise DaemonUnavailable(f"the docker daemon at {self.where} does not answer: {stderr}")
        if any(sign in lowered for sign in _MISSING):
            raise NoSuchObject(stderr)
        raise CommandRefused(stderr or f"`docker {args[0]}` exited with {result.returncode}")

    async def inspect(self, kind: str, name: str) -> dict[str, Any]:
        """``docker KIND inspect NAME`` as a dict; :class:`NoSuchObject` when it does not exist."""
        out = await self.run(kind, "inspect", name)
        try:
            items = json.loads(out)
        except ValueError as exc:
            raise CommandRefused(f"docker answered inspect with no JSON: {exc}") from None
        if not isinstance(items, list) or not items or not isinstance(items[0], dict):
            raise NoSuchObject(f"docker knows no {kind} {name}")
        return items[0]

    async def remove(self, name: str) -> None:
        """SIGKILL and remove container ``name`` (``rm --force`` kills at once); gone is fine.

        Returns once the container is gone: when auto-removal is already under way (the
        sandbox exited as its channel closed), ``rm`` returns at once, so this waits for it;
        when the container exited during the kill, the daemon refuses the removal, so this
        removes it again. Raises :class:`CommandRefused` when it is still there after
        :data:`REMOVAL_WAIT` seconds.
        """
        try:
            with anyio.fail_after(REMOVAL_WAIT):
                await self._remove(name)
        except TimeoutError:
            raise CommandRefused(
                f"container {name} was still there {REMOVAL_WAIT:g} s after `docker rm --force`"
            ) from None

    async def _remove(self, name: str) -> None:
        while True:
            try:
                await self.run("rm", "--force", name)
            except NoSuchObject as exc:
                if _IN_PROGRESS not in str(exc).lower():
                    return
                break
            except CommandRefused as exc:
                if RACED_EXIT not in str(exc).lower():
                    raise
                await anyio.sleep(_REMOVAL_POLL)  # it exited as we killed it: remove it again
            else:
                return
        while True:
            try:
                await self.inspect("container", name)
            except NoSuchObject:
                return
            await anyio.sleep(_REMOVAL_POLL)


def create_args(
    spec: SandboxSpec,
    *,
    name: str,
    labels: Mapping[str, str],
    channel_dir: Path,
    seccomp_profile: Path | None = None,
    cgroup_parent: str | None = None,
) -> list[str]:
    """``docker create`` arguments giving the full hardening of the sandbox (pure).

    ``seccomp_profile`` (see :mod:`._seccomp`) replaces docker's default filter unless the
    spec's own ``seccomp=`` option names another. ``cgroup_parent`` (see :mod:`._oom`) lets the
    bridge tell an OOM kill apart after the container is gone.
    """
    limits = spec.limits
    ours = [] if seccomp_profile is None else [f"--security-opt=seccomp={seccomp_profile}"]
    args = [
        "create",
        f"--name={name}",
        # Auto-removal: a sandbox that ends (killed, or exited because its bridge is gone) leaves
        # no container, with or without a bridge (exit codes come from docker's events).
        "--rm",
        f"--user={SANDBOX_USER}",
        "--cap-drop=ALL",
        "--read-only",
        "--security-opt=no-new-privileges",
        *(ours if user_seccomp_option(spec.security_opt) is None else []),
        *(f"--security-opt={option}" for option in spec.security_opt),
        "--network=none",
        # Docker turns IPv6 off in a container's network namespace unless the daemon enables it;
        # podman leaves ::1 on lo. Code binding loopback servers must see the same on both.
        "--sysctl=net.ipv6.conf.lo.disable_ipv6=0",
        f"--memory={limits.memory_bytes}",
        f"--memory-swap={limits.memory_bytes}",
        f"--pids-limit={limits.pids}",
        f"--tmpfs=/tmp:rw,size={limits.tmpfs_bytes},mode={TMPFS_MODE}",
        "--init",
        *(f"--ulimit={u.name}={u.soft}:{u.hard}" for u in ulimits(limits)),
        f"--mount=type=bind,source={channel_dir},target={SANDBOX_CHANNEL_DIR},readonly",
        # Output sandbox code writes past its capture lands in the container log: capped, one
        # file (the daemon's default driver may be unbounded).
        f"--log-driver={_LOG_DRIVER}",
        f"--log-opt=max-size={LOG_ROTATE_AT}",
        "--log-opt=max-file=1",
        *(f"--label={key}={value}" for key, value in labels.items()),
    ]
    if cgroup_parent is not None:
        args.append(f"--cgroup-parent={cgroup_parent}")
    if limits.cpu_quota is not None:
        args += [f"--cpu-quota={limits.cpu_quota}", f"--cpu-period={limits.cpu_period}"]
    # The checked ID when there is one (a name re-tagged after the check must not swap it).
    return [*args, spec.source]


def lifecycle_violations(inspect: Mapping[str, Any]) -> list[str]:
    """Auto-removal and the capped container log, as missing options, if docker did not
    apply them."""
    problems = []
    if (inspect.get("HostConfig") or {}).get("AutoRemove") is not True:
        problems.append("auto-remove (--rm)")
    log = (inspect.get("HostConfig") or {}).get("LogConfig") or {}
    config = log.get("Config") or {}
    size = parse_size(str(config.get("max-size", "")))
    if (
        log.get("Type") != _LOG_DRIVER
        or size is None
        or not 0 < size <= LOG_ROTATE_AT
        or config.get("max-file") != "1"
    ):
        problems.append(f"log driver {_LOG_DRIVER} capped at {LOG_ROTATE_AT} bytes in one file")
    return problems


def applied_seccomp(inspect: Mapping[str, Any]) -> dict[str, Any] | None:
    """The profile docker keeps for the container (``seccomp=<JSON>`` in ``SecurityOpt``)."""
    options: Sequence[Any] = (inspect.get("HostConfig") or {}).get("SecurityOpt") or ()
    for option in options:
        if str(option).startswith("seccomp="):
            try:
                profile = json.loads(str(option).removeprefix("seccomp="))
            except ValueError:
                return None
            return profile if isinstance(profile, dict) else None
    return None
