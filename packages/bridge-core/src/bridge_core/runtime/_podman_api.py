"""Every podman-py call the podman backend makes, with the library's gaps worked around here.

podman-py 5.8 against podman 4.3 (measured, see the project's FACTS notes) — one comment per gap:

* ``tmpfs=`` raises TypeError → /tmp is a ``type: tmpfs`` entry in ``mounts=``.
* ``security_opt=`` is sent as SELinux ``selinux_opts`` only, so ``no-new-privileges`` there is
  silently NOT applied → ``no_new_privileges=True``; other ``--security-opt`` forms are translated
  to their specgen fields by :func:`security_opt_fields`.
* ``nano_cpus`` (``--cpus``) is silently dropped → ``cpu_period`` / ``cpu_quota``.
* ``containers.run()`` returns None with the k8s-file log driver → create, then start.
* ``remove=True`` is silently dropped by ``containers.create`` (only ``run()`` reads it) →
  ``auto_remove=True``, which becomes the specgen's ``remove`` (inspect: ``AutoRemove``).
* ``attach()`` is not implemented and ``exec_run`` leaks frame headers and conmon processes →
  the channel is our own unix socket, or the container's stdio attached by :mod:`._attach`.

Everything here is synchronous (``requests``): callers run it in ``anyio.to_thread``.
"""

from __future__ import annotations

import errno
import json
import math
import tarfile
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import podman
from bridge_protocol.paths import SANDBOX_CHANNEL_DIR
from podman.errors import APIError, ImageNotFound, NotFound, PodmanError

from bridge_core.errors import ConfigError
from bridge_core.runtime._hardening import LOG_MAX_BYTES, SANDBOX_USER, TMPFS_MODE, ulimits
from bridge_core.runtime.base import PRODUCT_LABEL, SandboxSpec

__all__ = [
    "API_TIMEOUT",
    "LOG_MAX_BYTES",
    "APIError",
    "FAILURES",
    "applied_seccomp",
    "seccomp_of_spec",
    "start",
    "ImageNotFound",
    "NotFound",
    "PodmanError",
    "close",
    "connect",
    "copy_in_read_only",
    "create_kwargs",
    "inspect",
    "kill",
    "limits_support",
    "list_ours",
    "log_tail",
    "remove_killed",
    "remove_quietly",
    "security_opt_fields",
    "socket_candidates",
    "stop_and_remove",
]

_EMPTY_ANSWER_RETRIES = 3
COPIED_IN_BYTES = 48 * 1024 * 1024
"""Size of the stdio channel's ``SANDBOX_CHANNEL_DIR`` tmpfs: one execution's full output at
most (``sessions._spill.EXECUTION_LIMIT``). Its pages are the engine's, outside the sandbox's
memory limit (podman writes them), so this bounds what one sandbox can make the engine hold."""
COPIED_IN_MODE = "0755"
_COPY_TIMEOUT = 120.0
"""Seconds for the engine to take one copied-in file (48 MiB at most, over ssh)."""
_NO_SUCH_CONTAINER = "no such container"
_EXITING_PROCESS = "no such process"
"""podman's 500 when it reads ``/proc/<pid>/cgroup`` of a container process that exits meanwhile."""
_EXITING_RETRY_DELAY = 0.05
_LOG_TAIL_BYTES = 64 * 1024
API_TIMEOUT = 60
"""Seconds any single API call may take; bounds a hung service (stop adds its grace on top)."""
API_CONNECTIONS = 40
"""Connections to the API kept open for reuse: as many as blocking API calls can run at once (each
in one of anyio's 40 worker threads). podman-py keeps 10 by default, so under a burst of starts
or kills the rest were opened, used once and discarded, each with a urllib3 warning in the log."""
FAILURES: tuple[type[Exception], ...] = (PodmanError, OSError)
"""Everything a podman-py call raises when podman or its socket fails, the one boundary the backend
catches at: podman-py's own errors, and OSError, which covers its APIError (an HTTP error), the
socket's connection errors and timeouts. Only the not-found answers are told apart (NotFound,
ImageNotFound), by catching them before this."""
MAX_OCI_SPEC_BYTES = 4 * 1024 * 1024
"""Most bytes of an OCI spec read back from a remote engine's machine (they are ~20 KiB)."""


def socket_candidates(env: Mapping[str, str], euid: int) -> list[str]:
    """API URLs to try, in order: ``CONTAINER_HOST``, then the socket for our uid, then the other.

    A non-root user normally cannot open the rootful socket, and root has no rootless one, so the
    order only saves a failed attempt.
    """
    urls: list[str] = []
    if env.get("CONTAINER_HOST"):
        urls.append(env["CONTAINER_HOST"])
    rootful = "unix:///run/podman/podman.sock"
    runtime_dir = env.get("XDG_RUNTIME_DIR") or f"/run/user/{euid}"
    rootless = f"unix://{runtime_dir}/podman/podman.sock"
    urls.extend([rootful, rootless] if euid == 0 else [rootless, rootful])
    return list(dict.fromkeys(urls))


def connect(url: str) -> podman.PodmanClient | None:
    """A client for ``url`` if a podman service answers there, else None."""
    if url.startswith("unix://") and not Path(url.removeprefix("unix://")).exists():
        return None
    client = podman.PodmanClient(base_url=url, timeout=API_TIMEOUT, max_pool_size=API_CONNECTIONS)
    try:
        if client.ping():
            return client
    except FAILURES:
        pass
    close(client)
    return None


def close(client: podman.PodmanClient) -> None:
    """Close the client's HTTP session (podman-py leaves ``close`` untyped)."""
    client.close()  # type: ignore[no-untyped-call]


def security_opt_fields(options: Sequence[str]) -> dict[str, Any]:
    """Translate extra ``--security-opt`` values into the specgen fields podman-py passes through.

    Raises :class:`ConfigError` for a form podman-py cannot express, instead of dropping it.
    """
    fields: dict[str, Any] = {}
    for option in options:
        # "key=value", or docker's legacy "key:value" when there is no "=".
        key, _, value = option.partition("=" if "=" in option else ":")
        if key == "no-new-privileges" and value in ("", "true"):
            continue  # always on anyway
        if key == "seccomp" and value:
            fields["seccomp_profile_path"] = value
        elif key == "apparmor" and value:
            fields["apparmor_profile"] = value
        elif key == "label" and value:
            fields.setdefault("security_opt", []).append(value)  # sent as selinux_opts
        elif key == "mask" and value:
            fields.setdefault("masked_paths", []).extend(value.split(":"))
        elif key == "unmask" and value:
            fields.setdefault("unmasked_paths", []).extend(value.split(":"))
        else:
            raise ConfigError(
                f"security option {option!r} is not supported with the podman runtime "
                "(supported: seccomp=, apparmor=, label=, mask=, unmask=, no-new-privileges)"
            )
    return fields


def create_kwargs(
    spec: SandboxSpec,
    *,
    name: str,
    labels: Mapping[str, str],
    channel_dir: Path | None,
    log_path: Path | None = None,
    seccomp_profile: Path | None = None,
) -> dict[str, Any]:
    """Keyword arguments for ``containers.create`` giving the full hardening of the sandbox.

    ``channel_dir`` is bind-mounted for the unix-socket channel; None: the channel is the
    container's stdio (kept open for the attach, see :mod:`._attach`), nothing from this
    machine is mounted and the container has no log (it would copy every frame to disk; a
    start failure's stderr comes over the attach stream instead). ``log_path`` is where the
    container's own output goes (capped at :data:`LOG_MAX_BYTES`): in the bridge's state
    directory, so it outlives the auto-removed container for start-failure messages (None:
    podman's default place). ``seccomp_profile`` (see :mod:`._seccomp`; a path on the engine's
    machine) replaces the runtime's default filter unless the spec's own ``seccomp=`` option
    names another.
    """
    limits = spec.limits
    kwargs: dict[str, Any] = {
        "name": name,
        "labels": dict(labels),
        "user": SANDBOX_USER,
        "cap_drop": ["ALL"],
        "read_only": True,
        # The CLI's --read-only-tmpfs defaults to true and adds writable /run and /var/tmp; the
        # 4.3 API adds them for neither value (measured), later versions may. Verified by
        # inspection afterwards either way.
        "read_write_tmpfs": False,
        "no_new_privileges": True,
        "network_mode": "none",
        "mem_limit": limits.memory_bytes,
        "memswap_limit": limits.memory_bytes,
        "pids_limit": limits.pids,
        "init": True,
        # A sandbox that ends (by itself, killed, or because its bridge is gone and it exited on
        # EOF) leaves no container: conmon's exit command removes it, with or without a bridge.
        "auto_remove": True,
        # Nothing from the host: podman adds only container=, TERM and the image's own variables.
        "environment": {},
        "ulimits": [{"Name": u.name, "Soft": u.soft, "Hard": u.hard} for u in ulimits(limits)],
        "mounts": [
            {
                "type": "tmpfs",
                "source": "tmpfs",
                "target": "/tmp",
                "size": limits.tmpfs_bytes,
                "mode": TMPFS_MODE,
            },
        ],
    }
    if channel_dir is None:
        kwargs["stdin_open"] = True
        kwargs["command"] = ["--stdio"]  # arguments of the image's sandbox-client entrypoint
        kwargs["log_config"] = {"Type": "none"}
        # Where the channel directory would be: root's and read-only to the sandbox's user,
        # for the files the host copies in (:func:`copy_in_read_only`: full outputs).
        kwargs["mounts"].append(
            {
                "type": "tmpfs",
                "source": "tmpfs",
                "target": SANDBOX_CHANNEL_DIR,
                "size": COPIED_IN_BYTES,
                "mode": COPIED_IN_MODE,
            }
        )
    else:
        # Read-only is enough: connect(2) on a socket is not refused by a read-only mount.
        kwargs["mounts"].append(
            {
                "type": "bind",
                "source": str(channel_dir),
                "target": SANDBOX_CHANNEL_DIR,
                "read_only": True,
            }
        )
    if log_path is not None and channel_dir is not None:
        kwargs["log_config"] = {
            "Type": "k8s-file",
            "Config": {"path": str(log_path), "size": LOG_MAX_BYTES},
        }
    if limits.cpu_quota is not None:
        kwargs["cpu_quota"] = limits.cpu_quota
        kwargs["cpu_period"] = limits.cpu_period
    if seccomp_profile is not None:
        kwargs["seccomp_profile_path"] = str(seccomp_profile)
    kwargs.update(security_opt_fields(spec.security_opt))  # a seccomp= option of the user wins
    return kwargs


def inspect(client: podman.PodmanClient, name: str) -> dict[str, Any]:
    """The container's full inspect data (``containers.get`` already fetches it: one call).

    Gaps: while a container is being removed (auto-removal makes that common), podman 4.3 can
    answer 200 with an empty body, which podman-py fails to parse (measured under load): that is
    retried, and persisting means gone; or 500 "... does not exist in database: no such
    container" instead of 404: that is :class:`NotFound` too. While the container's process
    exits, podman 4.3 can answer 500 "read /proc/<pid>/cgroup: no such process" (met in a CI
    run): that is retried after a moment, and persisting raises the APIError.
    """
    for attempt in range(_EMPTY_ANSWER_RETRIES):
        try:
            attrs: dict[str, Any] = client.containers.get(name).attrs
        except ValueError:  # requests' JSONDecodeError
            continue
        except APIError as exc:
            if _NO_SUCH_CONTAINER in str(exc):
                raise NotFound(str(exc)) from exc
            if _EXITING_PROCESS in str(exc) and attempt + 1 < _EMPTY_ANSWER_RETRIES:
                time.sleep(_EXITING_RETRY_DELAY * (attempt + 1))
                continue
            raise
        return attrs
    raise NotFound(f"container {name} is being removed (podman answered with an empty body)")


def seccomp_of_spec(data: bytes) -> dict[str, Any] | None:
    """The ``linux.seccomp`` of an OCI spec's bytes (None: no filter); ValueError if not JSON."""
    spec = json.loads(data)
    seccomp = (spec.get("linux") or {}).get("seccomp") if isinstance(spec, dict) else None
    return seccomp if isinstance(seccomp, dict) else None


def applied_seccomp(client: podman.PodmanClient, name: str) -> dict[str, Any] | None:
    """The system-call filter in the OCI spec of an initialised container (None: no filter).

    Gap: podman 4.3 shows a profile path in inspect's ``SecurityOpt`` only when the CLI set it
    (an annotation), never for the API's ``seccomp_profile_path``; and a path says nothing about
    what was in the file when podman read it. The spec podman wrote for crun is the truth; it
    exists once the container is initialised, at ``OCIConfigPath``. Raises OSError or
    ValueError when it cannot be read (e.g. a service whose storage this user cannot read).
    """
    path = inspect(client, name).get("OCIConfigPath")
    if not path:
        raise FileNotFoundError(f"podman reports no OCI spec for container {name}")
    return seccomp_of_spec(Path(path).read_bytes())


def log_tail(path: Path, lines: int = 20) -> str:
    """The last ``lines`` lines a container wrote, from its k8s-file log at ``path``.

    Read from the file, not the API: the container may already be auto-removed. Only the file's
    end is read (bounded memory whatever the container wrote). A record is ``<time> <stream>
    <P|F> <text>``; ``P`` marks a partial line continued by the next record.
    """
    try:
        with path.open("rb") as log:
            log.seek(0, 2)
            log.seek(max(0, log.tell() - _LOG_TAIL_BYTES))
            data = log.read()
    except OSError as exc:
        return f"(logs unavailable: {exc})"
    text, partial = [], ""
    for record in data.decode("utf-8", errors="replace").splitlines():
        parts = record.split(" ", 3)
        if len(parts) < 3:
            continue  # the first record may be cut by the seek
        content = parts[3] if len(parts) == 4 else ""
        if parts[2] == "P":
            partial += content
            continue
        text.append(partial + content)
        partial = ""
    if partial:
        text.append(partial)
    return "\n".join(line for line in text[-lines:]).strip()


def copy_in_read_only(client: podman.PodmanClient, name: str, source: Path, inside: str) -> None:
    """Copy host file ``source`` to ``inside`` in running container ``name``, owned by root and
    read-only (0444; new directories on the way 0755), through the engine's archive API.

    ``copyUIDGID=false``: podman's libpod endpoint otherwise gives the files to the container's
    user (65534), who could then make them writable. The tar is spooled to a temporary file, not
    held in memory. OSError when the engine refuses.
    """
    base, _, relative = inside.removeprefix(SANDBOX_CHANNEL_DIR).partition("/")
    if base or not relative:
        raise OSError(errno.EINVAL, f"{inside} is not under {SANDBOX_CHANNEL_DIR}")
    parts = relative.split("/")
    with tempfile.TemporaryFile() as archive:
        with tarfile.open(fileobj=archive, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for depth in range(1, len(parts)):
                entry = tarfile.TarInfo("/".join(parts[:depth]))
                entry.type, entry.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(entry)
            entry = tar.gettarinfo(str(source), arcname=relative)
            entry.uid = entry.gid = 0
            entry.uname = entry.gname = "root"
            entry.mode = 0o444
            with source.open("rb") as content:
                tar.addfile(entry, content)
        archive.seek(0)
        try:
            response = client.api.put(
                f"/containers/{name}/archive",
                params={"path": SANDBOX_CHANNEL_DIR, "copyUIDGID": "false"},
                data=archive,
                headers={"Content-Type": "application/x-tar"},
                timeout=_COPY_TIMEOUT,
            )
        except PodmanError as exc:
            raise OSError(errno.EIO, f"the engine did not take the file: {exc}") from exc
    if not response.ok:
        said = response.text.strip()[:300]
        raise OSError(errno.EIO, f"the engine refused the file ({response.status_code}: {said})")


def remove_quietly(client: podman.PodmanClient, name: str) -> None:
    """SIGKILL and remove a container by name; already stopped or gone is fine.

    The explicit kill matters: a forced remove alone first sends the stop signal and waits the
    container's stop timeout (10 s) before killing, and podman-py cannot pass a shorter one.
    """
    try:
        client.containers.get(name).kill(signal="SIGKILL")
    except NotFound:
        return
    except (APIError, ValueError):
        pass  # not running any more, or the empty-body answer of :func:`inspect`
    try:
        client.containers.remove(name, force=True)
    except NotFound:
        pass
    except APIError as exc:
        # Auto-removal got there first: podman 4.3 may say so with a 500 instead of a 404.
        if _NO_SUCH_CONTAINER not in str(exc):
            raise


def remove_killed(client: podman.PodmanClient, name: str, deadline: float) -> bool:
    """Remove a container already sent SIGKILL; True once it is gone, whoever removed it, False
    when podman had not answered by ``deadline`` (``time.monotonic()``: the thread ends by then).

    A DELETE waits for the container's lock: when podman's auto-removal (the cleanup process
    conmon runs on exit) holds it, the answer comes once that removal is done ("no such
    container"), so either way the container no longer exists when this returns True.
    """
    left = deadline - time.monotonic()
    if left <= 0:
        return False
    try:
        response = client.api.delete(
            f"/containers/{name}", params={"force": True}, timeout=(left, left)
        )
        response.raise_for_status()
    except NotFound:
        pass
    except (APIError, OSError) as exc:
        # podman-py reports a timed-out request as an APIError ("DELETE operation failed").
        if _NO_SUCH_CONTAINER in str(exc):
            return True
        if time.monotonic() >= deadline:
            return False
        raise
    return True


def limits_support(rootless: bool, cgroup_version: str, controllers: Sequence[str]) -> str:
    """Why resource limits are NOT enforced on this host ("" when they are).

    Rootless podman on cgroup v1 ignores memory/pids/cpu limits ("Resource limits are not
    supported and ignored on cgroups V1 rootless systems"); on cgroup v2 it needs the memory,
    pids and cpu controllers delegated to the user.
    """
    if not rootless:
        return ""
    if cgroup_version != "v2":
        return (
            "rootless podman on a cgroup v1 host ignores memory, pids and cpu limits; "
            "run podman as root (privileges are still dropped inside the container) or boot "
            "the host with cgroup v2 (systemd.unified_cgroup_hierarchy=1)"
        )
    missing = sorted({"memory", "pids", "cpu"} - set(controllers))
    if missing:
        return (
            f"the cgroup v2 controllers {', '.join(missing)} are not delegated to this user; "
            "enable them (systemd: Delegate=memory pids cpu in user@.service)"
        )
    return ""


def start(client: podman.PodmanClient, name: str) -> None:
    """Start a created (initialised) container."""
    client.containers.get(name).start()


def kill(client: podman.PodmanClient, name: str) -> None:
    """SIGKILL through the API (auto-removal then deletes the container); gone is fine."""
    try:
        client.containers.get(name).kill(signal="SIGKILL")
    except (NotFound, APIError, ValueError):
        pass  # gone, already stopped, or the empty-body answer of :func:`inspect`


def stop_and_remove(client: podman.PodmanClient, name: str, grace: float) -> None:
    """SIGTERM, SIGKILL after ``grace`` seconds (the API takes whole seconds), then remove."""
    try:
        client.containers.get(name).stop(timeout=max(1, math.ceil(grace)))
    except NotFound:
        return
    except (APIError, ValueError):
        pass  # e.g. already stopped; removal below forces it anyway
    remove_quietly(client, name)


def list_ours(client: podman.PodmanClient) -> list[tuple[str, dict[str, str]]]:
    """(name, labels) of every container carrying our product label, running or not."""
    # A one-element list here matches NOTHING against podman 4.3.1 (measured); a string works.
    found = client.containers.list(all=True, filters={"label": PRODUCT_LABEL})
    return [(c.name, dict(c.labels or {})) for c in found]
