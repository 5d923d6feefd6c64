"""The MCP-session gate of ``serve --http``, in process, in front of a stand-in for the SDK's app.

The stand-in answers like the SDK's streamable-HTTP session manager (a session id for each
initialize, 404 for an unknown id, DELETE ends a session, a GET stream stays open); the real
SDK behind the real gate is what ``integration-tests/battery/test_http_clients.py`` drives.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
import pytest
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp_code_execution_mode._clients import anonymous_client
from mcp_code_execution_mode._http_sessions import McpSessionGate
from starlette.datastructures import Headers
from starlette.types import Message, Receive, Scope, Send


@dataclass
class FakeSdk:
    """Answers as the SDK's session manager does, and records what reached it."""

    sessions: dict[str, str | None] = field(default_factory=dict)
    """Open session id → the principal that opened it."""
    deleted: list[str] = field(default_factory=list)
    streams_open: anyio.Event = field(default_factory=anyio.Event)
    close_streams: anyio.Event = field(default_factory=anyio.Event)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = Headers(scope=scope)
        session_id = headers.get("mcp-session-id")
        user = scope.get("user")
        principal = user.access_token.client_id if isinstance(user, AuthenticatedUser) else None
        if session_id is None:
            session_id = uuid.uuid4().hex
            self.sessions[session_id] = principal
            await _answer(send, 200, [(b"mcp-session-id", session_id.encode())])
        elif session_id not in self.sessions or self.sessions[session_id] != principal:
            await _answer(send, 404)
        elif scope["method"] == "DELETE":
            del self.sessions[session_id]
            self.deleted.append(session_id)
            await _answer(send, 200)
        elif scope["method"] == "GET":  # a standalone SSE stream: open until told
            self.streams_open.set()
            await self.close_streams.wait()
            await _answer(send, 200)
        else:
            await _answer(send, 202)


async def _answer(
    send: Send, status: int, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers or []})
    await send({"type": "http.response.body", "body": b""})


@dataclass
class FakeSessions:
    """The session manager as the gate sees it: which clients hold sandboxes."""

    holding: set[str] = field(default_factory=set)
    closed: list[str] = field(default_factory=list)

    def holds_sessions(self, client: str | None) -> bool:
        return client in self.holding

    async def close_client(self, client: str | None) -> list[str]:
        assert client is not None
        self.closed.append(client)
        return ["default"] if client in self.holding else []


def _user(name: str) -> AuthenticatedUser:
    token = AccessToken(token="t-" + name, client_id=name, subject=name, scopes=[])
    return AuthenticatedUser(token)


@dataclass
class Rig:
    gate: McpSessionGate
    sdk: FakeSdk
    sessions: FakeSessions
    now: list[float]

    async def request(
        self, method: str, session_id: str | None = None, user: object = None
    ) -> tuple[int, str | None]:
        headers = [(b"host", b"127.0.0.1:8765")]
        if session_id is not None:
            headers.append((b"mcp-session-id", session_id.encode()))
        scope: Scope = {
            "type": "http", "method": method, "path": "/mcp", "raw_path": b"/mcp",
            "headers": headers, "query_string": b"", "root_path": "", "scheme": "http",
        }  # fmt: skip
        if user is not None:
            scope["user"] = user
        answer: dict[str, object] = {}

        async def receive() -> Message:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: Message) -> None:
            if message["type"] == "http.response.start":
                answer["status"] = message["status"]
                answer["id"] = Headers(raw=message["headers"]).get("mcp-session-id")

        await self.gate.middleware(self.sdk)(scope, receive, send)
        return int(str(answer["status"])), answer.get("id")  # type: ignore[return-value]

    async def open(self, user: object = None) -> str:
        status, session_id = await self.request("POST", user=user)
        assert status == 200
        assert session_id is not None
        self.now[0] += 1
        return session_id


@asynccontextmanager
async def rig(per_client: int = 3, requires_auth: bool = False) -> AsyncIterator[Rig]:
    now = [1000.0]
    gate = McpSessionGate(
        path="/mcp",
        per_client=per_client,
        anonymous_ttl=60,
        idle_ttl=1800,
        requires_auth=requires_auth,
        clock=lambda: now[0],
    )
    sessions = FakeSessions()
    with anyio.fail_after(5):
        async with gate.serving(sessions):
            yield Rig(gate, FakeSdk(), sessions, now)


async def test_past_the_bound_the_oldest_bare_session_makes_room_for_a_new_one() -> None:
    async with rig(per_client=3) as r:
        first, second, third = [await r.open() for _ in range(3)]
        await r.request("POST", second)  # second got past initialize: kept over bare ones
        fourth = await r.open()
        fifth = await r.open()
        assert r.sdk.deleted == [first, third]
        assert set(r.sdk.sessions) == {second, fourth, fifth}
        assert r.gate.open_sessions == 3


async def test_a_session_with_a_request_in_flight_is_never_ended_to_make_room() -> None:
    async with rig(per_client=2) as r:
        held = [await r.open() for _ in range(2)]
        async with anyio.create_task_group() as tg:
            for held_id in held:
                tg.start_soon(r.request, "GET", held_id)
            await anyio.wait_all_tasks_blocked()
            status, session_id = await r.request("POST")
            assert (status, session_id) == (429, None)
            assert r.sdk.deleted == []
            r.sdk.close_streams.set()
        # Once idle again, the oldest makes room.
        await r.open()
        assert r.sdk.deleted == [held[0]]


async def test_an_anonymous_session_holding_sandboxes_is_not_ended_to_make_room() -> None:
    async with rig(per_client=1) as r:
        holder = await r.open()
        r.sessions.holding.add(anonymous_client(holder))
        assert await r.request("POST") == (429, None)
        assert list(r.sdk.sessions) == [holder]


async def test_each_principal_has_its_own_bound_and_anonymous_clients_share_one() -> None:
    async with rig(per_client=1) as r:
        alice = await r.open(_user("alice"))
        bob = await r.open(_user("bob"))
        anonymous = await r.open()
        assert set(r.sdk.sessions) == {alice, bob, anonymous}
        newer = await r.open(_user("alice"))  # alice makes room among her own only
        assert r.sdk.deleted == [alice]
        assert set(r.sdk.sessions) == {bob, anonymous, newer}


async def test_idle_anonymous_sessions_end_first_and_take_their_sandboxes_with_them() -> None:
    async with rig(per_client=8) as r:
        bare = await r.open()
        working = await r.open()
        r.sessions.holding.add(anonymous_client(working))
        principal = await r.open(_user("alice"))
        r.now[0] += 60
        assert await r.gate.expire_idle() == 1
        assert r.sdk.deleted == [bare]
        # Sandboxes are stopped by background jobs, which run in no set order among themselves:
        # each sweep's are awaited before the next.
        await anyio.wait_all_tasks_blocked()
        assert r.sessions.closed == [anonymous_client(bare)]
        r.now[0] += 1800
        assert await r.gate.expire_idle() == 2
        assert set(r.sdk.deleted) == {bare, working, principal}
        await anyio.wait_all_tasks_blocked()
        # Anonymous sessions take their sandboxes with them; a principal's outlive them.
        assert r.sessions.closed == [anonymous_client(bare), anonymous_client(working)]


async def test_a_delete_by_the_client_stops_the_sandboxes_of_an_anonymous_session() -> None:
    async with rig() as r:
        session_id = await r.open()
        r.sessions.holding.add(anonymous_client(session_id))
        assert (await r.request("DELETE", session_id))[0] == 200
        await anyio.wait_all_tasks_blocked()
        assert r.sessions.closed == [anonymous_client(session_id)]
        assert r.gate.open_sessions == 0


async def test_another_principal_cannot_use_or_keep_alive_a_session() -> None:
    async with rig(requires_auth=True) as r:
        alice = await r.open(_user("alice"))
        assert (await r.request("POST", alice, user=_user("bob")))[0] == 404
        r.now[0] += 1800
        assert await r.gate.expire_idle() == 1


@pytest.mark.parametrize("method", ["POST", "GET", "DELETE"])
async def test_without_a_principal_an_authenticated_gate_opens_nothing(method: str) -> None:
    async with rig(requires_auth=True) as r:
        await r.request(method)
        assert r.gate.open_sessions == 0
