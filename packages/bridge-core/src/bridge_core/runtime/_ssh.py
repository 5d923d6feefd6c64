"""A podman engine on another machine, reached over one ssh connection of our own.

``MCP_BRIDGE_RUNTIME_URL=ssh://user@host[:port]/run/podman/podman.sock`` starts two ``ssh``
clients per backend: one forwards the remote API socket to a private local one
(``-L local:remote``), the other is the control master for the few commands the backend runs on
that machine (writing the seccomp profile there, reading back the OCI spec podman wrote), so a
command costs no new handshake. podman-py and the attach channels (:mod:`._attach`) then use the
local socket exactly as they use a local engine's. Two, not one: OpenSSH turns Nagle's algorithm
off (``TCP_NODELAY``) for a ``-N`` client only when it is not a control master, and with Nagle on
a proxied call's small frames waited for delayed ACKs (7.9 ms per call instead of 1.9, measured
by bench/channel_transports.py).

Why not podman-py's own ssh support (``PodmanClient(base_url="ssh://...")``, podman/api/ssh.py in
containers/podman-py 5.8): it starts one ``ssh`` per HTTP connection with ``-o
"StrictHostKeyChecking no"`` hard-coded (a first connection trusts any host key, and a changed key
makes OpenSSH disable the forward, after which the library waits 300 s for a socket that never
comes), and it cannot attach. Here host keys are checked (``StrictHostKeyChecking=yes``, the
user's known_hosts or ``[engine] known_hosts``), authentication never prompts
(``BatchMode``), a forward that cannot be set up is an error (``ExitOnForwardFailure``), and a
link that dies is noticed within :data:`ALIVE_INTERVAL` times :data:`ALIVE_COUNT` seconds.

A dropped link ends every attach stream: each session sees its sandbox gone and takes the same
path as a crashed sandbox. On the remote side the attach connections end too, conmon closes
each sandbox's stdin, the sandbox client exits and podman's auto-removal deletes the container.
The next start opens a new link (:meth:`SshLink.ensure`).

The ssh client dies with the bridge (``setpriv --pdeathsig``), and its files live in a private
temporary directory (unix socket paths must stay short).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

import anyio
from anyio.abc import Process

from bridge_core.errors import ConfigError, RuntimeUnavailable

__all__ = ["ALIVE_COUNT", "ALIVE_INTERVAL", "SshLink", "SshTarget", "parse_ssh_url"]

CONNECT_TIMEOUT = 20
"""Seconds for the TCP connection and ssh handshake."""
ALIVE_INTERVAL = 5
ALIVE_COUNT = 3
"""Keep-alives: a link silent for ``ALIVE_INTERVAL * ALIVE_COUNT`` seconds is declared dead."""
_READY_POLL = 0.05
COMMAND_TIMEOUT = 60.0
"""Bound on one remote command (they move a few hundred KiB at most)."""
MAX_COMMAND_OUTPUT = 16 * 1024 * 1024
"""Most bytes read back from one remote command (an OCI spec is ~20 KiB)."""


@dataclass(frozen=True, slots=True)
class SshTarget:
    """Where the engine is: ``user@host``, the port, and the API socket's path there."""

    destination: str
    port: int | None
    socket_path: str
    identity: Path | None = None
    known_hosts: Path | None = None

    def options(self, control: Path) -> list[str]:
        """The ssh options every invocation shares."""
        options = [
            "-o", "BatchMode=yes",
            "-o", "StrictHostKeyChecking=yes",
            "-o", f"ConnectTimeout={CONNECT_TIMEOUT}",
            "-o", f"ServerAliveInterval={ALIVE_INTERVAL}",
            "-o", f"ServerAliveCountMax={ALIVE_COUNT}",
            "-o", f"ControlPath={control}",
        ]  # fmt: skip
        if self.identity is not None:
            options += ["-i", str(self.identity), "-o", "IdentitiesOnly=yes"]
        if self.known_hosts is not None:
            options += ["-o", f"UserKnownHostsFile={self.known_hosts}"]
        if self.port is not None:
            options += ["-p", str(self.port)]
        return options


def parse_ssh_url(url: str, identity: Path | None, known_hosts: Path | None) -> SshTarget:
    """``ssh://[user@]host[:port]/path/to/podman.sock`` → :class:`SshTarget`; ConfigError
    naming the setting for anything else."""
    parts = urllib.parse.urlsplit(url)
    problem = ""
    if parts.scheme != "ssh":
        problem = "the scheme must be ssh://"
    elif not parts.hostname:
        problem = "it names no host"
    elif not parts.path.startswith("/") or len(parts.path) < 2:
        problem = "it names no API socket path (e.g. /run/podman/podman.sock)"
    elif parts.query or parts.fragment or parts.password:
        problem = "it may not carry a query, a fragment or a password (use a key)"
    try:
        port = parts.port
    except ValueError:
        problem = problem or "its port is not a number"
        port = None
    if problem:
        raise ConfigError(
            f"MCP_BRIDGE_RUNTIME_URL={url!r}: {problem}; write it as "
            "ssh://user@host[:port]/run/podman/podman.sock"
        )
    for key, path in (("identity", identity), ("known_hosts", known_hosts)):
        if path is not None and not path.is_file():
            raise ConfigError(f"[engine] {key} = {str(path)!r} (bridge.toml) is not a file")
    user = f"{parts.username}@" if parts.username else ""
    return SshTarget(f"{user}{parts.hostname}", port, parts.path, identity, known_hosts)


class SshLink:
    """One ssh client: the forwarded API socket and the control master for commands."""

    def __init__(self, target: SshTarget, directory: Path) -> None:
        self.target = target
        self._directory = directory
        self.socket = directory / "engine.sock"
        self._control = directory / "control"
        self._log = directory / "ssh.log"
        self._process: Process | None = None
        self._master: Process | None = None

    @property
    def url(self) -> str:
        """The forwarded API socket, as a podman-py URL."""
        return f"unix://{self.socket}"

    @property
    def alive(self) -> bool:
        return all(p is not None and p.returncode is None for p in (self._process, self._master))

    @classmethod
    async def open(cls, target: SshTarget) -> SshLink:
        """Connect; RuntimeUnavailable (with ssh's own words) when that fails."""
        directory = Path(await anyio.to_thread.run_sync(tempfile.mkdtemp, "", "mcp-bridge-ssh-"))
        link = cls(target, directory)
        try:
            await link.ensure()
        except BaseException:
            await link.aclose()
            raise
        return link

    async def ensure(self) -> None:
        """(Re)connect if the link is down; return once the forwarded socket exists."""
        if self.alive:
            return
        await self._stop()
        await anyio.Path(self.socket).unlink(missing_ok=True)
        await anyio.Path(self._control).unlink(missing_ok=True)
        self._process = await self._spawn(
            "-o", "ExitOnForwardFailure=yes",
            "-o", "ControlMaster=no",
            "-o", "StreamLocalBindUnlink=yes",
            "-L", f"{self.socket}:{self.target.socket_path}",
        )  # fmt: skip
        await self._wait_for(self.socket, self._process, f"forward {self.target.socket_path}")
        self._master = await self._spawn("-o", "ControlMaster=yes")
        await self._wait_for(self._control, self._master, "open its control socket")

    async def _spawn(self, *options: str) -> Process:
        command = ["ssh", "-N", *options, *self.target.options(self._control)]
        command.append(self.target.destination)
        if (setpriv := shutil.which("setpriv")) is not None:
            command = [setpriv, "--pdeathsig", "TERM", "--", *command]
        log_fd = os.open(self._log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            return await anyio.open_process(
                command, stdin=subprocess.DEVNULL, stdout=log_fd, stderr=log_fd
            )
        except OSError as exc:
            raise RuntimeUnavailable(
                f"cannot run ssh (is openssh-client installed?): {exc}"
            ) from exc
        finally:
            os.close(log_fd)

    async def _wait_for(self, path: Path, process: Process, what: str) -> None:
        with anyio.move_on_after(CONNECT_TIMEOUT + 5):
            while not await anyio.Path(path).exists():
                if process.returncode is not None:
                    raise RuntimeUnavailable(
                        f"ssh to {self.target.destination} failed (status {process.returncode}): "
                        f"{self._log_tail()}"
                    )
                await anyio.sleep(_READY_POLL)
            return
        raise RuntimeUnavailable(
            f"ssh to {self.target.destination} did not {what} within {CONNECT_TIMEOUT + 5} s: "
            f"{self._log_tail()}"
        )

    def _log_tail(self) -> str:
        try:
            return self._log.read_text(errors="replace").strip()[-1000:] or "(no output)"
        except OSError:
            return "(no output)"

    async def run(self, script: str, *args: str, stdin: bytes = b"") -> bytes:
        """Run ``sh -c script sh args...`` on the engine's machine through the link; its stdout
        (at most :data:`MAX_COMMAND_OUTPUT` bytes). RuntimeUnavailable when it fails."""
        remote = " ".join(shlex.quote(part) for part in ("sh", "-c", script, "sh", *args))
        command = [
            "ssh", "-o", "ControlMaster=no", *self.target.options(self._control),
            self.target.destination, "--", remote,
        ]  # fmt: skip
        with anyio.move_on_after(COMMAND_TIMEOUT) as scope:
            result = await anyio.run_process(command, input=stdin, check=False)
        if scope.cancelled_caught:
            raise RuntimeUnavailable(
                f"a command on {self.target.destination} took more than {COMMAND_TIMEOUT:g} s"
            )
        if result.returncode != 0:
            said = result.stderr.decode(errors="replace").strip()[-500:]
            raise RuntimeUnavailable(
                f"a command on {self.target.destination} failed (status {result.returncode}): "
                f"{said}"
            )
        return bytes(result.stdout[:MAX_COMMAND_OUTPUT])

    async def drop(self) -> None:
        """Kill the ssh clients (tests): every stream through the link ends."""
        for process in (self._process, self._master):
            if process is not None and process.returncode is None:
                process.kill()
                await process.wait()

    async def _stop(self) -> None:
        for process in (self._process, self._master):
            if process is None:
                continue
            if process.returncode is None:
                process.terminate()
                with anyio.move_on_after(5):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
            await process.aclose()
        self._process = self._master = None

    async def aclose(self) -> None:
        """Stop the ssh clients and remove their directory. Idempotent."""
        with anyio.CancelScope(shield=True):
            await self._stop()
            await anyio.to_thread.run_sync(
                lambda: shutil.rmtree(self._directory, ignore_errors=True)
            )
