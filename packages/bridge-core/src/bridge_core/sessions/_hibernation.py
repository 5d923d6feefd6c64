"""Which session hibernates when a session needs a container and the live limit is reached.

The limit is on live containers, not on sessions: the least recently used idle session whose
state is saved makes room (its next call restores it); one whose snapshot is still in flight
only when no other can. Only when every live session is running code is the call refused.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection

import anyio

from bridge_core.errors import SessionLimitExceeded
from bridge_core.sessions._session import Session
from bridge_core.sessions.types import SessionConfig

__all__ = ["next_to_hibernate"]


async def next_to_hibernate(
    sessions: Collection[Session],
    sess: Session,
    config: SessionConfig,
    ephemeral: Counter[str | None],
    *,
    wait: float,
) -> Session | None:
    """The session to hibernate so that ``sess`` may have a container, or None if there is room.

    Hibernating waits for the victim's snapshot in flight, so one whose state is saved goes
    first; when none is yet (the session that just ran is seldom saved by the time another needs
    its container: its snapshot follows by milliseconds), the first to be saved within ``wait``
    seconds. A sandbox that never ends its snapshot holds up nobody else's start.

    Raises :class:`SessionLimitExceeded` when every live session that could make room is busy.
    """
    idle = _candidates(sessions, sess, config, ephemeral)
    if idle and not any(saved(s) for s in idle):
        await _first_saved(idle, wait)
        idle = _candidates(sessions, sess, config, ephemeral)
    return min(idle, key=lambda s: (not saved(s), s.last_used)) if idle else None


def _candidates(
    sessions: Collection[Session],
    sess: Session,
    config: SessionConfig,
    ephemeral: Counter[str | None],
) -> list[Session]:
    """The idle live sessions one of which must hibernate ([] if there is room)."""
    client, per_client = sess.client, config.max_sessions_per_client
    holding = [s for s in sessions if s.live is not None and s is not sess]
    own = [s for s in holding if s.client == client]
    over_total = len(holding) + ephemeral.total() >= config.max_sessions
    over_client = (
        client is not None and per_client is not None and len(own) + ephemeral[client] >= per_client
    )
    if not over_total and not over_client:
        return []
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
    return idle


def saved(sess: Session) -> bool:
    """Whether ``sess`` has no snapshot in flight (hibernating it waits for nothing)."""
    link = sess.live.durable if sess.live is not None else None
    return link is None or link.settled.is_set()


async def _first_saved(sessions: list[Session], wait: float) -> None:
    events = [s.live.durable.settled for s in sessions if s.live and s.live.durable]
    with anyio.move_on_after(wait):
        async with anyio.create_task_group() as waits:

            async def first(event: anyio.Event) -> None:
                await event.wait()
                waits.cancel_scope.cancel()

            for event in events:
                waits.start_soon(first, event)
