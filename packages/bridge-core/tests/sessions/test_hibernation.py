"""Making room under the live-container limit never costs a session work that is not saved: a
session whose last state could not be saved keeps its container (the requester is refused,
naming the setting), the requester's own idle sessions go before another client's, and idle
expiry of an unsaved session says on its next call what was lost."""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import anyio
import pytest
from bridge_core.errors import SessionLimitExceeded
from bridge_core.sessions import SessionConfig, SessionStore, StoreSettings
from bridge_core.sessions._durable import DurableLink, RestoreOutcome
from bridge_core.sessions._hibernation import next_to_hibernate
from bridge_core.sessions._lifecycle import DurableSessions
from bridge_core.sessions._session import Session
from bridge_protocol import Snapshot

from .conftest import STATE, take_snapshot

pytestmark = pytest.mark.anyio

SMALL = StoreSettings(max_bytes=len(STATE))
"""A store whose largest state is STATE: a longer one is refused (too large)."""
SNAPSHOT_IDS = itertools.count()


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    store = SessionStore(tmp_path, SMALL)
    store.open()
    return store


def live_session(store: SessionStore, client: str | None, name: str, used: float) -> Session:
    """An idle session of ``client`` with a live sandbox serving it durably."""
    sess = Session(name, used, client=client)
    link = DurableLink(store, client, name)
    sess.live = cast(Any, SimpleNamespace(durable=link, alive=True))
    return sess


def link_of(sess: Session) -> DurableLink:
    assert sess.live is not None
    assert sess.live.durable is not None
    return sess.live.durable


async def save(sess: Session, *, fits: bool = True) -> None:
    """The session's execution ended and its state was saved (or refused: too large)."""
    data = STATE if fits else STATE + b"past the largest state kept"
    snapshot_id = f"s-{sess.name}-{next(SNAPSHOT_IDS)}"
    await take_snapshot(link_of(sess), Snapshot(snapshot_id, data=data, last=True))


def config(max_sessions: int) -> SessionConfig:
    return SessionConfig(image="unused", max_sessions=max_sessions)


async def test_a_session_whose_state_was_refused_never_hibernates_for_another_clients_start(
    store: SessionStore,
) -> None:
    # Before, "saved" meant only "no snapshot in flight": another client opening a session
    # within its own limit hibernated this one, which came back empty and without a notice.
    notes = live_session(store, "alice", "alices-notes", used=1.0)
    await save(notes, fits=False)
    assert link_of(notes).lost
    newcomer = Session("mine", 2.0, client="bob")
    with pytest.raises(SessionLimitExceeded) as refused:
        await next_to_hibernate([notes, newcomer], newcomer, config(1), Counter(), wait=5)
    assert "[sessions] max" in str(refused.value)
    assert "alices-notes" not in str(refused.value)  # another client's session names are not told


async def test_the_requesters_own_idle_session_hibernates_before_another_clients(
    store: SessionStore,
) -> None:
    theirs = live_session(store, "alice", "theirs", used=1.0)  # least recently used
    mine = live_session(store, "bob", "mine", used=5.0)
    for sess in (theirs, mine):
        await save(sess)
    newcomer = Session("new", 6.0, client="bob")
    sessions = [theirs, mine, newcomer]
    victim = await next_to_hibernate(sessions, newcomer, config(2), Counter(), wait=5)
    assert victim is mine


async def test_a_session_whose_snapshot_in_flight_fails_is_not_stopped_to_make_room(
    store: SessionStore,
) -> None:
    dropped: list[Session] = []
    work = live_session(store, None, "work", used=1.0)
    newcomer = Session("new", 2.0)
    sessions: dict[tuple[str | None, str], Session] = {
        (None, "work"): work,
        (None, "new"): newcomer,
    }
    saved = DurableSessions(
        store,
        config(1),
        sessions=sessions,
        ephemeral=Counter(),
        drop=dropped.append,
        replace=lambda *args, **kwargs: None,
        forget_if_empty=lambda sess: None,
    )
    link_of(work).expect_snapshot()  # its execution just ended: its state is on its way
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:

            async def fail_the_save() -> None:
                await anyio.wait_all_tasks_blocked()
                await link_of(work).on_snapshot(
                    Snapshot("s-1-1", data=STATE + b"too large", last=True)
                )

            tg.start_soon(fail_the_save)
            with pytest.raises(SessionLimitExceeded) as refused:
                await saved.make_room(newcomer)
    assert dropped == []
    assert "yours: work" in str(refused.value)  # the caller's own session is named
    # Picked while saved, its next state failing before its turn came: it keeps its container.
    await save(work)
    link_of(work).expect_snapshot()
    await link_of(work).on_snapshot(Snapshot("s-1-2", data=STATE + b"too large", last=True))
    assert not await saved.hibernate(work, to_make_room=True)
    assert dropped == []


async def test_idle_expiry_of_an_unsaved_session_says_on_its_next_call_that_the_work_is_lost(
    store: SessionStore,
) -> None:
    dropped: list[Session] = []
    work = live_session(store, None, "work", used=1.0)
    await save(work)
    await save(work, fits=False)
    saved = DurableSessions(
        store,
        config(1),
        sessions={(None, "work"): work},
        ephemeral=Counter(),
        drop=dropped.append,
        replace=lambda *args, **kwargs: None,
        forget_if_empty=lambda sess: None,
    )
    assert await saved.hibernate(work)
    assert dropped == [work]
    (notice,) = work.notices
    assert "[sessions] idle_ttl" in notice
    assert "[sessions] state_max" in notice  # why it was not saved
    assert work.stale
    state = store.saved(None, "work")
    assert state is not None
    restored = RestoreOutcome(state).notice("work", latest=not work.stale)
    assert "last successful execution" not in restored
