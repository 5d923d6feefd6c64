"""``snapshot_copy`` (protocol version 2): a snapshot's parts the link copies from the state it
committed last, only from that file while it is still the one written, inside it, within the
size limits; any other copy fails the snapshot and keeps the last good state."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from bridge_core.sessions import StoreSettings
from bridge_core.sessions._durable import DurableLink, PendingFork
from bridge_core.sessions._state_writer import StateWriter
from bridge_protocol import FORK_SNAPSHOT_PREFIX, Snapshot, SnapshotCopy

from .conftest import STATE, asked, disk_of, link_on, saved_path, take_snapshot

pytestmark = pytest.mark.anyio


BIG = bytes(range(256)) * 4096  # 1 MiB that is not all one byte


async def _saved_big(link: DurableLink) -> bytes:
    """Commit ``STATE + BIG`` as snapshot s-1-1; return it."""
    whole = STATE + BIG
    await take_snapshot(link, Snapshot("s-1-1", data=whole, last=True))
    assert link.notices == []
    return whole


async def test_a_copy_takes_its_bytes_from_the_state_committed_last(link: DurableLink) -> None:
    first = await _saved_big(link)
    link.expect_snapshot()
    await link.on_snapshot(Snapshot("s-1-2", data=b"HEAD"))
    await link.on_snapshot_copy(SnapshotCopy("s-1-2", "s-1-1", len(STATE), len(BIG)))
    await link.on_snapshot(Snapshot("s-1-2", data=b"TAIL", last=True))
    assert link.notices == []
    path = saved_path(link)
    assert path is not None
    assert path.read_bytes() == b"HEAD" + first[len(STATE) :] + b"TAIL"
    # That state is the one the next copies come from.
    link.expect_snapshot()
    await link.on_snapshot_copy(SnapshotCopy("s-1-3", "s-1-2", 0, 4))
    await link.on_snapshot(Snapshot("s-1-3", last=True))
    assert link.notices == []
    assert path.read_bytes() == b"HEAD"


@pytest.mark.parametrize(
    ("base", "offset", "length"),
    [
        ("s-1-0", 0, 10),  # not the state it holds
        ("s-1-1", 0, len(STATE + BIG) + 1),  # past its end
        ("s-1-1", len(STATE + BIG), 1),
        ("s-1-1", 2**63, 2**63),  # a hostile range
    ],
)
async def test_a_copy_from_elsewhere_fails_the_save_and_keeps_the_last_state(
    link: DurableLink, base: str, offset: int, length: int
) -> None:
    first = await _saved_big(link)
    link.expect_snapshot()
    await link.on_snapshot(Snapshot("s-1-2", data=b"HEAD"))
    await link.on_snapshot_copy(SnapshotCopy("s-1-2", base, offset, length))
    await link.on_snapshot(Snapshot("s-1-2", data=b"TAIL", last=True))
    assert "could not be saved" in link.notices[0]
    assert asked(link)  # the next comes whole
    path = saved_path(link)
    assert path is not None
    assert path.read_bytes() == first
    assert not list(link.store.root.glob("*.tmp"))
    # A copy from the refused state is refused too: it was never committed.
    link.resave_asked()
    link.expect_snapshot()
    await link.on_snapshot_copy(SnapshotCopy("s-1-3", "s-1-2", 0, 4))
    await link.on_snapshot(Snapshot("s-1-3", last=True))
    assert "does not hold" in link.notices[0]


async def test_a_copy_from_a_state_replaced_on_disk_is_refused(link: DurableLink) -> None:
    await _saved_big(link)
    path = saved_path(link)
    assert path is not None
    other = path.with_name("other")
    other.write_bytes(b"X" * len(STATE + BIG))
    other.replace(path)  # the same size, another file: not the one it saved
    link.expect_snapshot()
    await link.on_snapshot_copy(SnapshotCopy("s-1-2", "s-1-1", 0, 10))
    await link.on_snapshot(Snapshot("s-1-2", last=True))
    assert "gone or was replaced" in link.notices[0]


async def test_copied_bytes_count_against_the_largest_state(tmp_path: Path) -> None:
    link = link_on(tmp_path, StoreSettings(max_bytes=len(STATE + BIG) + 10))
    await _saved_big(link)
    link.expect_snapshot()
    for number in (1, 2):
        await link.on_snapshot_copy(SnapshotCopy("s-1-2", "s-1-1", 0, len(BIG)))
        assert number == 1 or link._writer is None or link._writer.error
    await link.on_snapshot(Snapshot("s-1-2", last=True))
    assert "[sessions] state_max" in link.notices[0]
    assert not asked(link)  # too large: it would only fail again


async def test_a_forks_state_with_a_copy_is_refused(link: DurableLink) -> None:
    await _saved_big(link)
    fork = PendingFork(f"{FORK_SNAPSHOT_PREFIX}1-1", "trial", link.store.epoch(None, "trial"))
    link.forks._fork = fork
    await link.on_snapshot(Snapshot(fork.snapshot_id, data=b"HEAD"))
    await link.on_snapshot_copy(SnapshotCopy(fork.snapshot_id, "s-1-1", 0, 4))
    await link.on_snapshot(Snapshot(fork.snapshot_id, last=True))
    assert fork.done.is_set()
    assert "sent whole" in fork.error
    assert link.store.saved(None, "trial") is None


async def test_a_copy_after_the_snapshot_ended_writes_nothing(link: DurableLink) -> None:
    first = await _saved_big(link)
    await link.on_snapshot_copy(SnapshotCopy("s-1-1", "s-1-1", 0, 10))  # none expected
    assert link._writer is None
    # One of a new snapshot is taken like a ``snapshot`` chunk would be (see the test below):
    # nothing is left of it once the sandbox ends, and the saved state is kept.
    await link.on_snapshot_copy(SnapshotCopy("s-1-9", "s-1-1", 0, 10))
    link.end()
    assert link._writer is None
    assert not list(link.store.root.glob("*.tmp"))
    assert link.store._reserved[link.store._owner(None)] == 0
    path = saved_path(link)
    assert path is not None
    assert path.read_bytes() == first


async def test_a_snapshot_after_one_that_outlasted_the_settle_wait_keeps_its_copies(
    link: DurableLink,
) -> None:
    # The next call ran on while s-1-1 was still streaming (settle is bounded): its result came
    # before s-1-1's last frame, so no new snapshot is "expected" when s-1-2's copies arrive.
    # The host must not drop them and commit what is left as the state.
    link.expect_snapshot()
    whole = STATE + BIG
    await link.on_snapshot(Snapshot("s-1-1", data=whole))
    link.expect_snapshot()  # the next execution's result: the snapshot before is still open
    await link.on_snapshot(Snapshot("s-1-1", last=True))
    assert link.settled.is_set()
    await link.on_snapshot(Snapshot("s-1-2", data=b"HEAD"))
    await link.on_snapshot_copy(SnapshotCopy("s-1-2", "s-1-1", len(STATE), len(BIG)))
    await link.on_snapshot(Snapshot("s-1-2", data=b"TAIL", last=True))
    path = saved_path(link)
    assert path is not None
    saved = path.read_bytes()
    if link.notices:  # refused: the last good state is kept
        assert saved == whole
    else:  # saved: what the sandbox meant, byte for byte
        assert saved == b"HEAD" + BIG + b"TAIL"


async def test_refused_bytes_count_the_copies_after_the_refusal(tmp_path: Path) -> None:
    # Like sent bytes (see test_refused_bytes_are_the_whole_state_held_or_streamed), copied
    # bytes the disk limits refused are part of the state's size: it is asked for again only
    # once the whole of it would fit, not a part.
    whole = STATE + BIG
    link = link_on(
        tmp_path, StoreSettings(disk_limit=disk_of(tmp_path, len(whole)) + len(BIG) // 2)
    )
    await _saved_big(link)
    link.expect_snapshot()
    for _ in range(3):  # the second is refused; the third is part of the state all the same
        await link.on_snapshot_copy(SnapshotCopy("s-1-2", "s-1-1", 0, len(whole)))
    await link.on_snapshot(Snapshot("s-1-2", last=True))
    assert "[sessions] state_disk" in link.notices[0]
    assert link._refused == 3 * len(whole)
    assert not list(link.store.root.glob("*.tmp"))


async def test_a_long_copy_is_made_in_bounded_steps(
    link: DurableLink, monkeypatch: pytest.MonkeyPatch
) -> None:
    # docs/decisions/0082: "in steps of at most 64 MiB per worker-thread call" (a copy of a
    # 512 MiB state in one call holds the reader, and a stop, until it ends).
    from bridge_core.sessions import _durable

    monkeypatch.setattr(_durable, "COPY_STEP", 100_000)
    calls: list[int] = []
    copy = StateWriter.copy

    def counted(self: StateWriter, source: Any, offset: int, length: int) -> None:
        calls.append(length)
        copy(self, source, offset, length)

    monkeypatch.setattr(StateWriter, "copy", counted)
    first = await _saved_big(link)
    link.expect_snapshot()
    await link.on_snapshot_copy(SnapshotCopy("s-1-2", "s-1-1", 0, len(first)))
    await link.on_snapshot(Snapshot("s-1-2", last=True))
    assert link.notices == []
    path = saved_path(link)
    assert path is not None
    assert path.read_bytes() == first
    assert len(calls) > 1
    assert max(calls) <= 100_000
