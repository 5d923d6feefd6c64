"""Which session hibernates when a session needs a container and the live limit is reached.

The limit is on live containers, not on sessions: an idle session whose state is saved makes
room (its next call restores it), the requester's own before another client's, each the least
recently used first; one whose snapshot is still in flight only once it is saved. A session
whose state after its last execution could not be saved (too large, the disk budget, an I/O
error) is never stopped to make room: that would throw its work away for somebody else's start.
When no session can make room, the call is refused, naming the limit and its setting (see
``docs/decisions/0090``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection

import anyio

from bridge_core.errors import SessionLimitExceeded
from bridge_core.sessions._session import Session
from bridge_core.sessions.types import SessionConfig

__all__ = ["next_to_hibernate", "saved", "unsaved_work"]

MAX_NAMES_QUOTED = 8
"""The caller's own sessions named in a refusal (the rest are counted)."""


async def next_to_hibernate(
    sessions: Collection[Session],
    sess: Session,
    config: SessionConfig,
    ephemeral: Counter[str | None],
    *,
    wait: float,
) -> Session | None:
    """The session to hibernate so that ``sess`` may have a container, or None if there is room.

    Only a session whose state is saved is chosen. When none is yet (the session that just ran
    is seldom saved by the time another needs its container: its snapshot follows by
    milliseconds), the first whose snapshot ends within ``wait`` seconds, if that one saved it.
    A sandbox that never ends its snapshot holds up nobody else's start for longer than that.

    Raises :class:`SessionLimitExceeded` when every live session that could make room is busy
    or holds work that could not be saved.
    """
    idle, over_client = _candidates(sessions, sess, config, ephemeral)
    if idle and not any(saved(s) for s in idle):
        await _first_settled([s for s in idle if not _settled(s)], wait)
        idle, over_client = _candidates(sessions, sess, config, ephemeral)
    if not idle:
        return None
    ready = [s for s in idle if saved(s)]
    if not ready:
        raise _refusal(sess, config, over_client, idle)
    # The requester's own sessions first: on a shared bridge, one client's new sessions cost the
    # others a restore only when it has no idle session of its own to put away.
    return min(ready, key=lambda s: (s.client != sess.client, s.last_used))


def _candidates(
    sessions: Collection[Session],
    sess: Session,
    config: SessionConfig,
    ephemeral: Counter[str | None],
) -> tuple[list[Session], bool]:
    """The idle live sessions one of which must hibernate ([] if there is room), and whether
    the client's own limit is the one reached."""
    client, per_client = sess.client, config.max_sessions_per_client
    holding = [s for s in sessions if s.live is not None and s is not sess]
    own = [s for s in holding if s.client == client]
    over_total = len(holding) + ephemeral.total() >= config.max_sessions
    over_client = (
        client is not None and per_client is not None and len(own) + ephemeral[client] >= per_client
    )
    if not over_total and not over_client:
        return [], False
    idle = [s for s in (own if over_client else holding) if not s.busy]
    if not idle:
        raise _refusal(sess, config, over_client, [])
    return idle, over_client


def _refusal(
    sess: Session, config: SessionConfig, over_client: bool, idle: list[Session]
) -> SessionLimitExceeded:
    what = (
        f"this client's {config.max_sessions_per_client} live sessions "
        "([sessions] max_per_client in bridge.toml)"
        if over_client
        else f"all {config.max_sessions} live sessions ([sessions] max in bridge.toml)"
    )
    if not idle:
        return SessionLimitExceeded(
            f"{what} are running code right now, so none can hibernate to make room: "
            "try again when one finishes, or raise the limit"
        )
    # Only the caller's own session names are quoted: other clients' names are theirs.
    mine = sorted(s.name for s in idle if s.client == sess.client)
    shown = ", ".join(mine[:MAX_NAMES_QUOTED]) + (
        f" and {len(mine) - MAX_NAMES_QUOTED} more" if len(mine) > MAX_NAMES_QUOTED else ""
    )
    yours = f" (yours: {shown})" if mine else ""
    return SessionLimitExceeded(
        f"{what} are taken by sessions running code or holding work whose state could not be "
        f"saved{yours}; a session is never stopped while that would lose its work: reset a "
        "session you no longer need, make its state fit the disk limits, or raise the limit"
    )


def _settled(sess: Session) -> bool:
    link = sess.live.durable if sess.live is not None else None
    return link is None or link.settled.is_set()


def unsaved_work(sess: Session) -> str:
    """Why the state of ``sess`` after its last execution is not saved ("" when it is, or when
    its snapshot is still in flight)."""
    link = sess.live.durable if sess.live is not None else None
    return "" if link is None else link.lost


def saved(sess: Session) -> bool:
    """Whether ``sess`` may hibernate now without losing anything: no snapshot in flight, and
    the last one saved."""
    return _settled(sess) and not unsaved_work(sess)


async def _first_settled(sessions: list[Session], wait: float) -> None:
    events = [s.live.durable.settled for s in sessions if s.live and s.live.durable]
    if not events:
        return
    with anyio.move_on_after(wait):
        async with anyio.create_task_group() as waits:

            async def first(event: anyio.Event) -> None:
                await event.wait()
                waits.cancel_scope.cancel()

            for event in events:
                waits.start_soon(first, event)
