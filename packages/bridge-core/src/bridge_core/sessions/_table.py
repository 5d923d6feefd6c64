"""The manager's table of sessions: which are open, whose they are, and how many may be.

A session is known by its client and its name (:data:`Key`). The table holds the open sessions,
the executions running without one (``persist=false``, each holding a sandbox), and the names of
sessions that expired while idle, to tell their next caller; it enforces ``max_sessions`` and
``max_sessions_per_client`` when a session opens. What a session's sandbox and saved state do is
the manager's (:mod:`.manager`) and the durable lifecycle's (:mod:`._lifecycle`).
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Callable

from bridge_core.errors import SessionLimitExceeded
from bridge_core.sessions._session import Session
from bridge_core.sessions.types import SessionConfig

__all__ = ["EXPIRED_NAMES_KEPT", "Key", "SessionTable"]

Key = tuple[str | None, str]
"""A session's identity: (the client it belongs to, its name). Client None is the one client of a
stdio bridge; over HTTP each client (an MCP session, or an authenticated principal) has its own
names, so two clients' ``default`` sessions are two sessions."""

EXPIRED_NAMES_KEPT = 1024
"""Names of expired sessions remembered to tell their next caller; bounded against churn."""


class SessionTable:
    """The open sessions of one manager, per client, and the limits on opening more."""

    def __init__(self, config: SessionConfig) -> None:
        self.config = config
        self.sessions: dict[Key, Session] = {}
        self.expired: OrderedDict[Key, float] = OrderedDict()
        """Sessions whose sandbox expired while idle, and when (see :data:`EXPIRED_NAMES_KEPT`)."""
        self.ephemeral: Counter[str | None] = Counter()
        """Executions running with ``persist=false``, per client (each holds a sandbox)."""

    def names(self, client: str | None) -> list[str]:
        """Names of ``client``'s open sessions, sorted."""
        return sorted(name for owner, name in self.sessions if owner == client)

    def holds(self, client: str | None) -> bool:
        """Whether ``client`` has an open session or a running ``persist=false`` execution."""
        return any(owner == client for owner, _ in self.sessions) or self.ephemeral[client] > 0

    def remember_expired(self, key: Key, now: float) -> None:
        """Session ``key`` expired at ``now``: its next caller is told its state was dropped."""
        self.expired[key] = now
        while len(self.expired) > EXPIRED_NAMES_KEPT:
            self.expired.popitem(last=False)

    def check_capacity(self, client: str | None) -> None:
        """Raise :class:`SessionLimitExceeded` if ``client`` may not open one more session."""
        # Only the caller's own session names are quoted: other clients' names are theirs.
        own = self.names(client)
        listed = ", ".join(own) or "none"
        per_client = self.config.max_sessions_per_client
        held = len(own) + self.ephemeral[client]
        if client is not None and per_client is not None and held >= per_client:
            raise SessionLimitExceeded(
                f"this client already has the maximum of {per_client} sessions "
                f"(yours: {listed}): reuse or reset one, wait for idle ones to expire, "
                "or raise [sessions] max_per_client in bridge.toml"
            )
        limit = self.config.max_sessions
        if len(self.sessions) + self.ephemeral.total() >= limit:
            raise SessionLimitExceeded(
                f"the maximum of {limit} concurrent sessions is reached "
                f"({'yours' if client is not None else 'open'}: {listed}): reuse or reset one, "
                "wait for idle ones to expire, or raise [sessions] max in bridge.toml"
            )

    def session(
        self,
        client: str | None,
        name: str,
        clock: Callable[[], float],
        *,
        durable: bool,
        refusal: str,
    ) -> Session:
        """``client``'s session ``name``, opened if it is not (its first notices say why it is
        fresh or unsaved); ``refusal``: why sessions are not saved although a store was set."""
        key = (client, name)
        sess = self.sessions.get(key)
        if sess is not None:
            return sess
        if not durable:  # durable: the limit is on live containers (see make_room)
            self.check_capacity(client)
        sess = self.sessions[key] = Session(name, clock(), client=client)
        if refusal and self.config.persist:
            sess.notices.append(f"session {name!r} is not saved: {refusal}")
        if self.expired.pop(key, None) is not None:
            sess.notices.append(
                f"session {name!r} was idle for more than {self.config.idle_ttl:g} s, so its "
                "sandbox was stopped and its state (variables, imports, /tmp files) was dropped: "
                "this is a fresh session"
            )
        return sess

    def forget_if_empty(self, sess: Session) -> None:
        # A session with no sandbox, nothing to tell and nobody waiting holds no state: it must
        # not take a slot of max_sessions (e.g. after its sandbox could not start, or a reset).
        empty = sess.live is None and not sess.notices and not sess.busy
        key = (sess.client, sess.name)
        if empty and self.sessions.get(key) is sess:
            del self.sessions[key]

    def closed_by_client(self, sess: Session) -> bool:
        # A session an execution is using leaves the table only through close_client: expiry and
        # forget_if_empty skip busy sessions.
        return self.sessions.get((sess.client, sess.name)) is not sess
