"""A private ``podman system service`` for hosts where no podman API socket answers.

Typical on machines without systemd (no ``podman.socket`` unit). The service listens on a socket
in the bridge's state dir and lives exactly as long as the backend: :meth:`PrivateService.aclose`
stops it, and ``setpriv --pdeathsig`` (where available) makes the kernel kill it if the bridge
itself is killed, so it can never outlive us. Whoever reaches that socket commands podman with the
bridge's rights: its directory is private (podman itself creates the socket 0600), and so is its
log.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import anyio
from anyio.abc import Process

from bridge_core.errors import RuntimeUnavailable
from bridge_core.private_files import PRIVATE_FILE_MODE, private_dir

__all__ = ["SERVICE_START_TIMEOUT", "SERVICE_STOP_TIMEOUT", "PrivateService"]

SERVICE_START_TIMEOUT = 20.0
"""Seconds for the service to answer a ping; it migrates storage on first use, which is slow."""
SERVICE_STOP_TIMEOUT = 5.0
"""Seconds between SIGTERM and SIGKILL when stopping the service."""
_READY_POLL_INTERVAL = 0.05
_MAX_SOCKET_PATH = 100


class PrivateService:
    """One ``podman system service --time=0`` child process."""

    def __init__(
        self, process: Process, socket: Path, log: Path, short_dir: Path | None = None
    ) -> None:
        self._process = process
        self.socket = socket
        self.log = log
        self._short_dir = short_dir

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    @classmethod
    async def start(cls, podman_binary: str, socket: Path) -> PrivateService:
        """Start the service and return once its socket exists (pinging is the caller's job)."""
        await anyio.to_thread.run_sync(private_dir, socket.parent)
        log = socket.with_suffix(".log")
        short_dir = None
        if len(os.fsencode(str(socket))) > _MAX_SOCKET_PATH:
            # Unix socket paths are limited to 107 bytes; deep state dirs get a short private dir.
            short_dir = Path(await anyio.to_thread.run_sync(tempfile.mkdtemp, "", "mcp-bridge-"))
            socket = short_dir / "podman.sock"
        await anyio.Path(socket).unlink(missing_ok=True)
        command = [podman_binary, "system", "service", "--time=0", f"unix://{socket}"]
        setpriv = shutil.which("setpriv")
        if setpriv is not None:
            command = [setpriv, "--pdeathsig", "TERM", "--", *command]
        # A log file, not a pipe: nobody reads a pipe during the bridge's life, and a full pipe
        # would block the service.
        log_fd = await anyio.to_thread.run_sync(_open_log, log)
        try:
            # cwd: conmon 2.1 drops an ``oom`` marker file into its working directory, which
            # it inherits from the service; keep that out of the user's directories.
            process = await anyio.open_process(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log_fd,
                stderr=log_fd,
                cwd=socket.parent,
            )
        finally:
            os.close(log_fd)
        service = cls(process, socket, log, short_dir)
        try:
            with anyio.fail_after(SERVICE_START_TIMEOUT):
                while not await anyio.Path(socket).exists():
                    if process.returncode is not None:
                        raise RuntimeUnavailable(
                            f"`podman system service` exited with status {process.returncode}: "
                            f"{service.log_tail()}"
                        )
                    await anyio.sleep(_READY_POLL_INTERVAL)
        except TimeoutError:
            await service.aclose()
            raise RuntimeUnavailable(
                f"`podman system service` did not create {socket} within "
                f"{SERVICE_START_TIMEOUT:g} s"
            ) from None
        except BaseException:
            await service.aclose()
            raise
        return service

    def log_tail(self, limit: int = 2000) -> str:
        """The end of the service's own log (its stderr)."""
        try:
            return self.log.read_text(errors="replace").strip()[-limit:]
        except OSError:
            return ""

    async def aclose(self) -> None:
        """Stop the service (SIGTERM, SIGKILL after a bound) and remove its socket. Idempotent."""
        with anyio.CancelScope(shield=True):
            if self._process.returncode is None:
                self._process.terminate()
                with anyio.move_on_after(SERVICE_STOP_TIMEOUT):
                    await self._process.wait()
                if self._process.returncode is None:
                    self._process.kill()
                    await self._process.wait()
            await self._process.aclose()
            self.socket.unlink(missing_ok=True)
            if self._short_dir is not None:
                shutil.rmtree(self._short_dir, ignore_errors=True)


def _open_log(path: Path) -> int:
    # The log of an earlier service with this pid may be there with an older, looser mode.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, PRIVATE_FILE_MODE)
    os.fchmod(fd, PRIVATE_FILE_MODE)
    return fd
