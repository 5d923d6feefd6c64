"""How this bridge's containers ended, from podman's event stream.

Sandboxes are created with auto-removal (a sandbox that ends, or whose bridge is gone, leaves no
container), so podman removes an exited sandbox within a fraction of a second — and with it the
exit status that ``inspect`` would have shown. One streaming ``GET /events`` per backend,
filtered on this bridge's owner label, keeps what the bridge still needs: the exit code of each
sandbox that died ("container exited with status 137", the OOM check). Measured on podman 4.3.1:
the ``died`` event carries ``containerExitCode`` and comes before the removal, and ``since``
replays missed events on reconnect.

A thread reads the stream (podman-py is synchronous); readers only look up dictionaries.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import podman

from bridge_core.runtime._exit_records import EVENTS_KEPT, EventFollower
from bridge_core.runtime.base import OWNER_LABEL

__all__ = ["EVENTS_KEPT", "ContainerEvents"]

logger = logging.getLogger(__name__)

STREAM_IDLE = 60.0
"""Read timeout of the stream: an idle stream is reopened (replaying from the last event seen)."""


class ContainerEvents(EventFollower):
    """Exit codes of the containers named by :meth:`follow`."""

    died, exit_code_key = "died", "containerExitCode"

    def __init__(self, url: str, owner_label: str) -> None:
        self._url = url
        self._filters = json.dumps(
            {
                "label": [f"{OWNER_LABEL}={owner_label}"],
                "type": ["container"],
                "event": ["died"],
            }
        )
        super().__init__("podman")
        self._response: Any = None

    def _interrupt(self) -> None:
        """The thread's read ends at once (or at its next read timeout on old urllib3)."""
        response = self._response
        if response is not None:
            # urllib3 >= 2.3 can shut the socket down under a read blocked in another thread.
            shutdown = getattr(response.raw, "shutdown", None)
            try:
                if shutdown is not None:
                    shutdown()
            except (OSError, ValueError, RuntimeError):
                pass

    # --- the reader thread -------------------------------------------------------------------

    def _read_stream(self) -> bool:
        """Follow the stream until it ends; True if it was open (then reconnecting is urgent:
        an idle timeout or a restarted service, not a refusal)."""
        client = podman.PodmanClient(base_url=self._url, timeout=STREAM_IDLE)
        try:
            params = {"stream": "true", "filters": self._filters, "since": str(self._since)}
            response = client.api.get("/events", params=params, stream=True)
            if response.status_code != 200:
                logger.debug("podman events answered %s", response.status_code)
                return False
            self._response = response
            if self._closed.is_set():  # closed while connecting: nobody shut this one down
                return True
            try:
                for line in response.iter_lines():
                    if line:
                        self._record(json.loads(line))
            except Exception as exc:  # the read timed out, the service went away, or close()
                logger.debug("podman event stream ended: %r", exc)
            return True
        finally:
            self._response = None
            client.close()  # type: ignore[no-untyped-call]
