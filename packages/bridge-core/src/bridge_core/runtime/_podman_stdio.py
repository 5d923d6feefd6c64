"""The podman backend's stdio channel and remote-engine steps (see :mod:`.podman`).

Attaching to a sandbox's stdio before it starts and waiting for its first frame
(:mod:`._attach`); putting the bridge's seccomp profile on an engine's machine and reading back
the filter podman wrote there, through the ssh link (:mod:`._ssh`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import podman
from anyio.abc import SocketStream

from bridge_core.errors import RuntimeUnavailable, SandboxStartError
from bridge_core.runtime import _podman_api as api
from bridge_core.runtime._attach import AttachedStream, AttachError, attach
from bridge_core.runtime._seccomp import PROFILE_NAME, SeccompProfile
from bridge_core.runtime._ssh import SshLink, parse_ssh_url

__all__ = ["open_attach", "open_ssh_engine", "remote_seccomp", "upload_profile", "wait_spoken"]


async def open_ssh_engine(
    url: str, identity: Path | None, known_hosts: Path | None
) -> tuple[podman.PodmanClient, SshLink]:
    """Open the ssh link to the engine at ``url`` and a podman-py client over its forward."""
    target = parse_ssh_url(url, identity, known_hosts)
    link = await SshLink.open(target)
    client = await anyio.to_thread.run_sync(api.connect, link.url)
    if client is None:
        await link.aclose()
        raise RuntimeUnavailable(
            f"ssh to {target.destination} works, but no podman API service answers at "
            f"{target.socket_path} there: start it on that machine (podman system service "
            f"--time=0 unix://{target.socket_path}, or enable podman.socket)"
        )
    return client, link


async def open_attach(url: str, name: str) -> AttachedStream:
    """A new connection to the API at ``url`` (``unix://`` or ``tcp://``), attached to
    container ``name``'s stdio. SandboxStartError when that fails."""
    try:
        if url.startswith("tcp://"):
            host, _, port = url.removeprefix("tcp://").rpartition(":")
            connection: SocketStream = await anyio.connect_tcp(host, int(port))
        else:
            connection = await anyio.connect_unix(url.removeprefix("unix://"))
        return await attach(connection, name)
    except (OSError, AttachError) as exc:
        raise SandboxStartError(
            f"cannot attach to sandbox container {name} through {url}: {exc}"
        ) from exc


EXIT_VERDICT_WAIT = 3.0
"""How long a container whose stdio ended gets to be recorded as exited (its status and exit
code name why it ended)."""
EXIT_POLL_INTERVAL = 0.05


async def wait_spoken(
    stream: AttachedStream,
    name: str,
    connect_timeout: float,
    death: Callable[[], Awaitable[str | None]],
) -> None:
    """Wait for the sandbox client's first bytes on ``stream``; SandboxStartError naming how
    the container ended (``death``) and the end of its stderr when it ends first, or the
    timeout (the spec's ``connect_timeout``)."""
    with anyio.move_on_after(connect_timeout) as waited:
        try:
            await stream.wait_started()
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            # The stream can end before the engine has recorded the exit: ask again, briefly
            # (the engine offers nothing to wait on for that record).
            how = None
            with anyio.move_on_after(EXIT_VERDICT_WAIT):
                while (how := await death()) is None:  # noqa: ASYNC110
                    await anyio.sleep(EXIT_POLL_INTERVAL)
            how = how or "it ended"
            tail = stream.stderr_tail.strip()
            raise SandboxStartError(
                f"sandbox container {name} exited before speaking on its stdio channel: {how}"
                + (f"; last output:\n{tail}" if tail else "")
            ) from None
    if waited.cancelled_caught:
        raise SandboxStartError(
            f"sandbox container {name} did not speak on its stdio channel within "
            f"{connect_timeout:g} s (does the image's ENTRYPOINT run the sandbox client, "
            "which takes --stdio?)"
        )


async def upload_profile(link: SshLink, local: SeccompProfile) -> SeccompProfile:
    """Write the profile on the engine's machine, named by its digest (bridges sharing that
    machine write the same file for the same content); the same profile, at the path podman
    reads there."""
    name = f"{PROFILE_NAME.removesuffix('.json')}-{local.digest[:16]}.json"
    script = (
        'set -e; umask 077; dir="$HOME/.local/state/mcp-code-execution-mode"; '
        'mkdir -p "$dir"; cat > "$dir/$1.tmp"; mv -f "$dir/$1.tmp" "$dir/$1"; '
        'printf %s "$dir/$1"'
    )
    data = await anyio.to_thread.run_sync(local.path.read_bytes)
    path = await link.run(script, name, stdin=data)
    return SeccompProfile(Path(path.decode()), local.content, local.base)


def remote_seccomp(client: podman.PodmanClient, link: SshLink, name: str) -> dict[str, Any] | None:
    """:func:`api.applied_seccomp` on the engine's machine: the OCI spec is read there (at most
    :data:`api.MAX_OCI_SPEC_BYTES`). Runs in a worker thread of the event loop."""
    path = api.inspect(client, name).get("OCIConfigPath")
    if not path:
        raise FileNotFoundError(f"podman reports no OCI spec for container {name}")
    script = f'head -c {api.MAX_OCI_SPEC_BYTES} -- "$1"'
    data = anyio.from_thread.run(partial(link.run, script, str(path)))
    return api.seccomp_of_spec(data)
