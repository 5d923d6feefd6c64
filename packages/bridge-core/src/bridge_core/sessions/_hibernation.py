"""Which session hibernates when a session needs a container and the live limit is reached.

The limit is on live containers, not on sessions: the least recently used idle session makes
room (its state is saved; its next call restores it). Only when every live session is running
code is the call refused.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from bridge_core.errors import SessionLimitExceeded
from bridge_core.sessions._session import Session
from bridge_core.sessions.types import SessionConfig

__all__ = ["next_to_hibernate"]


def next_to_hibernate(
    sessions: Iterable[Session],
    sess: Session,
    config: SessionConfig,
    ephemeral: Counter[str | None],
) -> Session | None:
    """The session to hibernate so that ``sess`` may have a container, or None if there is room.

    Raises :class:`SessionLimitExceeded` when every live session that could make room is busy.
    """
    client, per_client = sess.client, config.max_sessions_per_client
    holding = [s for s in sessions if s.live is not None and s is not sess]
    own = [s for s in holding if s.client == client]
    over_total = len(holding) + ephemeral.total() >= config.max_sessions
    over_client = (
        client is not None and per_client is not None and len(own) + ephemeral[client] >= per_client
    )
    if not over_total and not over_client:
        return None
    idle = [s for s in (own if over_client else holding) if not s.busy]
    if not idle:
        what = (
            f"this client's {per_client} live sessions (MCP_BRIDGE_MAX_SESSIONS_PER_CLIENT)"
            if over_client
            else f"all {config.max_sessions} live sessions (MCP_BRIDGE_MAX_SESSIONS)"
        )
        raise SessionLimitExceeded(
            f"{what} are running code right now, so none can hibernate to make room: "
            "try again when one finishes, or raise the limit"
        )
    return min(idle, key=lambda s: s.last_used)
