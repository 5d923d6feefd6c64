"""Which session hibernates when a session needs a container and the live limit is reached.

The limit is on live containers, not on sessions: the least recently used idle session whose
state is saved makes room (its next call restores it); one whose snapshot is still in flight
only when no other can. Only when every live session is running code is the call refused.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import anyio

from bridge_core.errors import SessionLimitExceeded
from bridge_core.sessions._session import Session
from bridge_core.sessions.types import SessionConfig

__all__ = ["next_to_hibernate", "saved", "wait_for_a_saved_one"]


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
    # Hibernating waits for the victim's snapshot in flight: one that is saved goes first, so a
    # sandbox that never ends its snapshot holds up nobody else's start (only its own next call).
    return min(idle, key=lambda s: (not saved(s), s.last_used))


def saved(sess: Session) -> bool:
    """Whether ``sess`` has no snapshot in flight (hibernating it waits for nothing)."""
    link = sess.live.durable if sess.live is not None else None
    return link is None or link.settled.is_set()


async def wait_for_a_saved_one(sessions: Iterable[Session], wait: float) -> None:
    """Wait, at most ``wait`` seconds, until one idle live session's snapshot in flight is saved.

    A snapshot follows each successful execution by milliseconds: the session that just ran is
    seldom saved yet when another needs its container, and waiting for whichever finishes first
    never waits on a sandbox that holds its snapshot open.
    """
    events = [
        s.live.durable.settled
        for s in sessions
        if s.live is not None and s.live.durable is not None and not s.busy and not saved(s)
    ]
    if not events:
        return
    with anyio.move_on_after(wait):
        async with anyio.create_task_group() as waits:

            async def first(event: anyio.Event) -> None:
                await event.wait()
                waits.cancel_scope.cancel()

            for event in events:
                waits.start_soon(first, event)
