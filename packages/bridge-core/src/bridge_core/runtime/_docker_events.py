"""How this bridge's docker containers ended, from ``docker events``.

Docker sandboxes are auto-removed (``--rm``), like podman's: a sandbox that ends, or whose
bridge is gone (the sandbox client exits on EOF), leaves no container. The exit status that
``inspect`` would have shown goes with it; one ``docker events`` process per backend, filtered
on this bridge's owner label, keeps it. Docker sends ``die`` (with ``exitCode``) before
``destroy``; ``--since`` replays what a restarted stream missed.

A thread reads the CLI's output (blocking reads, off the event loop); readers only look up a
dictionary. The same shape as :mod:`._podman_events`.
"""

from __future__ import annotations

import json
import logging
import subprocess

from bridge_core.runtime._exit_records import EVENTS_KEPT, EventFollower
from bridge_core.runtime.base import OWNER_LABEL

__all__ = ["EVENTS_KEPT", "DockerEvents"]

logger = logging.getLogger(__name__)

_MAX_LINE = 64 * 1024
"""One event is a few hundred bytes; a longer line is not an event we read."""


class DockerEvents(EventFollower):
    """Exit codes of the containers named by :meth:`follow`."""

    died, exit_code_key = "die", "exitCode"

    def __init__(self, command: list[str], owner_label: str) -> None:
        self._command = command
        self._owner_label = owner_label
        super().__init__("docker")
        self._process: subprocess.Popen[bytes] | None = None

    def _interrupt(self) -> None:
        """The ``docker events`` process is killed: the thread's read ends."""
        process = self._process
        if process is not None:
            process.kill()

    def _read_stream(self) -> bool:
        """Follow ``docker events`` until it ends; True if it delivered anything."""
        command = [
            *self._command,
            "events",
            f"--since={self._since}",
            "--filter=type=container",
            "--filter=event=die",
            f"--filter=label={OWNER_LABEL}={self._owner_label}",
            "--format={{json .}}",
        ]
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        self._process = process
        delivered = False
        try:
            if self._closed.is_set():
                return False
            assert process.stdout is not None
            while line := process.stdout.readline(_MAX_LINE):
                delivered = True
                try:
                    self._record(json.loads(line))
                except ValueError:
                    continue
            return delivered
        finally:
            self._process = None
            process.kill()
            process.wait()
