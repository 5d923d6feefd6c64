"""The host's own limit on ``Progress`` frames, which sandbox code can forge.

The sandbox client already limits ``runtime.progress`` (a token bucket), but the channel socket is
a descriptor of the sandbox process: code can write ``Progress`` frames for its execution straight
to it, and every one would become a ``notifications/progress`` to the MCP client. So the host
applies its own bucket, twice as generous as the client's so that legitimate updates bunched up in
transit are never dropped, and cuts each message.
"""

from __future__ import annotations

import time

__all__ = ["MAX_PROGRESS_MESSAGE", "PROGRESS_BURST", "PROGRESS_RATE", "ProgressGate", "cut_message"]

PROGRESS_BURST = 40
"""Progress frames relayed at once before the rate applies (the sandbox client allows 20)."""
PROGRESS_RATE = 40.0
"""Progress frames relayed per second once the burst is spent (the sandbox client sends 20)."""
MAX_PROGRESS_MESSAGE = 1000
"""Characters of one progress message relayed; the rest is cut."""


class ProgressGate:
    """Decides which progress frames of one execution are relayed: a token bucket, and only
    values that increase (the MCP spec requires ``progress`` to increase with each notification,
    and a client may reject or misdraw one that goes back)."""

    def __init__(self) -> None:
        self._tokens = float(PROGRESS_BURST)
        self._last = time.monotonic()
        self._highest: float | None = None
        self.dropped = 0
        """Frames refused by the rate so far (logged once the execution ends)."""
        self.not_increasing = 0
        """Frames refused because their value did not increase."""

    def admit(self, progress: float) -> bool:
        """Admit ``progress`` if it is higher than every value relayed before and a token is
        left; count the frame as refused otherwise."""
        if self._highest is not None and not progress > self._highest:
            self.not_increasing += 1
            return False
        now = time.monotonic()
        self._tokens = min(PROGRESS_BURST, self._tokens + (now - self._last) * PROGRESS_RATE)
        self._last = now
        if self._tokens < 1:
            self.dropped += 1
            return False
        self._tokens -= 1
        self._highest = progress
        return True


def cut_message(message: str | None) -> str | None:
    """``message`` cut to :data:`MAX_PROGRESS_MESSAGE` characters."""
    if message is None or len(message) <= MAX_PROGRESS_MESSAGE:
        return message
    return message[: MAX_PROGRESS_MESSAGE - 1] + "…"
