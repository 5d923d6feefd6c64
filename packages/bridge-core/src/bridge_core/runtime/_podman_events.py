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
import threading
import time
from typing import Any

import podman

from bridge_core.runtime._exit_records import EVENTS_KEPT, ExitRecords
from bridge_core.runtime.base import OWNER_LABEL

__all__ = ["EVENTS_KEPT", "ContainerEvents"]

logger = logging.getLogger(__name__)

STREAM_IDLE = 60.0
"""Read timeout of the stream: an idle stream is reopened (replaying from the last event seen)."""
RETRY_FIRST = 0.1
RETRY_MAX = 5.0
"""Back-off between failed reconnects (the API service may be restarting)."""
REPLAY_MARGIN = 2
"""Seconds replayed before the last event seen: event times are whole seconds."""


class ContainerEvents(ExitRecords):
    """Exit codes of the containers named by :meth:`follow`."""

    def __init__(self, url: str, owner_label: str) -> None:
        self._url = url
        self._filters = json.dumps(
            {
                "label": [f"{OWNER_LABEL}={owner_label}"],
                "type": ["container"],
                "event": ["died"],
            }
        )
        super().__init__()
        self._closed = threading.Event()
        self._response: Any = None
        self._since = int(time.time()) - REPLAY_MARGIN
        self._thread = threading.Thread(target=self._run, name="podman-events", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        """Stop reading; the thread ends at once (or at its next read timeout on old urllib3)."""
        self._closed.set()
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

    def _run(self) -> None:
        delay = RETRY_FIRST
        while not self._closed.is_set():
            try:
                if self._read_stream():
                    delay = RETRY_FIRST
            except Exception as exc:  # top-level handler of the thread: reconnect, never die
                if self._closed.is_set():
                    return
                logger.debug("podman event stream broke (%r); reconnecting", exc)
            if self._closed.wait(delay):
                return
            delay = min(delay * 2, RETRY_MAX)

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

    def _record(self, event: dict[str, Any]) -> None:
        actor = event.get("Actor") or {}
        attributes = actor.get("Attributes") or {}
        name = str(attributes.get("name", ""))
        when = event.get("time")
        if isinstance(when, int):
            self._since = max(self._since, when - REPLAY_MARGIN)
        code = str(attributes.get("containerExitCode", ""))
        if event.get("Action") != "died" or not code.lstrip("-").isdigit():
            return
        self._died(name, int(code))
