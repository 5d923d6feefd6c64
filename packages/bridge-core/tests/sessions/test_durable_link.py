"""A sandbox's link to its saved state: whole snapshots are committed, an unchanged one keeps the
last committed state without writing, and an unchanged one the link cannot vouch for says so; a
restore sends the state's head first, and a fork's says where it comes from."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from bridge_core.sessions import SessionStore, StoreSettings
from bridge_core.sessions._durable import HELD_STATE, DurableLink
from bridge_core.sessions._restore_stream import FIRST_CHUNK
from bridge_core.sessions._state_writer import StateWriter
from bridge_core.sessions._store import READ_CHUNK
from bridge_protocol import (
    UNCHANGED_SNAPSHOT_PREFIX,
    Restore,
    Restored,
    Snapshot,
)

from .conftest import STATE, asked, disk_of, link_on, saved_path, take_snapshot

pytestmark = pytest.mark.anyio


async def test_an_unchanged_snapshot_keeps_the_saved_state_and_writes_nothing(
    link: DurableLink,
) -> None:
    await take_snapshot(link, Snapshot("s-1-1", data=STATE, last=True))
    path = saved_path(link)
    assert path is not None
    assert path.read_bytes() == STATE
    written = path.stat().st_mtime_ns
    await take_snapshot(link, Snapshot(f"{UNCHANGED_SNAPSHOT_PREFIX}s-1-2", last=True))
    assert link.notices == []
    assert path.read_bytes() == STATE
    assert path.stat().st_mtime_ns == written
    assert not list(link.store.root.glob("*.tmp"))


async def test_unsaved_names_of_an_unchanged_state_are_still_named(link: DurableLink) -> None:
    await take_snapshot(link, Snapshot("s-1-1", data=STATE, last=True, unsaved=("f (file): no",)))
    await take_snapshot(
        link, Snapshot(f"{UNCHANGED_SNAPSHOT_PREFIX}s-1-2", last=True, unsaved=("f (file): no",))
    )
    assert len(link.notices) == 1
    assert "f (file): no" in link.notices[0]


async def test_unchanged_before_anything_was_saved_is_not_taken_as_saved(
    link: DurableLink,
) -> None:
    await take_snapshot(link, Snapshot(f"{UNCHANGED_SNAPSHOT_PREFIX}s-1-1", last=True))
    assert saved_path(link) is None
    assert len(link.notices) == 1
    assert "could not be saved" in link.notices[0]


async def test_unchanged_after_a_state_that_failed_to_save_still_says_it_is_not_saved(
    tmp_path: Path,
) -> None:
    link = link_on(tmp_path, StoreSettings(max_bytes=len(STATE) - 1))
    store = link.store
    await take_snapshot(link, Snapshot("s-1-1", data=STATE, last=True))
    assert "[sessions] state_max" in link.notices[0]
    await take_snapshot(link, Snapshot(f"{UNCHANGED_SNAPSHOT_PREFIX}s-1-2", last=True))
    assert "could not be saved" in link.notices[0]
    assert store.saved(None, "default") is None


async def test_a_state_past_the_disk_budget_is_asked_for_again_once_it_fits_and_one_too_large_never(
    tmp_path: Path,
) -> None:
    # The disk budget can be freed (another session reset), a state too large stays so: the
    # sandbox is told to send its next state whole (``resave``) only after the first kind, and
    # only once that state would fit (before: at every call, each one refused again).
    link = link_on(tmp_path, StoreSettings(disk_limit=disk_of(tmp_path, len(STATE), 8) - 1))
    store = link.store
    other = DurableLink(store, None, "other")
    await take_snapshot(other, Snapshot("o-1-1", data=b"12345678", last=True))  # leaves too little
    asked = []  # lost_last, read after each step
    asked.append(link.lost_last)  # a new sandbox has sent nothing: nothing to ask for
    await take_snapshot(link, Snapshot("s-1-1", data=STATE, last=True))
    assert "[sessions] state_disk" in link.notices[0]
    asked.append(link.lost_last)  # no room: not asked for
    store.delete(None, "other")  # room again: asked for, and the resave lands
    asked.append(link.lost_last)
    link.resave_asked()
    asked.append(link.lost_last)
    await take_snapshot(link, Snapshot("s-1-2", data=STATE, last=True))
    assert link.notices == []
    asked.append(link.lost_last)
    assert asked == [False, False, True, False, False]
    assert store.saved(None, "default") is not None

    too_large = link_on(tmp_path / "small", StoreSettings(max_bytes=len(STATE) - 1))
    await take_snapshot(too_large, Snapshot("s-1-1", data=STATE, last=True))
    assert "[sessions] state_max" in too_large.notices[0]
    assert not too_large.lost_last


async def test_an_unchanged_snapshot_with_data_is_refused_and_nothing_is_vouched_for(
    link: DurableLink,
) -> None:
    await take_snapshot(link, Snapshot("s-1-1", data=STATE, last=True))
    await take_snapshot(link, Snapshot(f"{UNCHANGED_SNAPSHOT_PREFIX}s-1-2", data=b"x", last=True))
    assert "one frame without data" in link.notices[0]
    await take_snapshot(link, Snapshot(f"{UNCHANGED_SNAPSHOT_PREFIX}s-1-3", last=True))
    assert "could not be saved" in link.notices[0]
    path = saved_path(link)
    assert path is not None
    assert path.read_bytes() == STATE  # the last good state is never lost


class _Sandbox:
    """A channel whose sandbox answers a restore once its last frame has come."""

    def __init__(self, link: DurableLink) -> None:
        self.link = link
        self.frames: list[Restore] = []

    async def send(self, message: Restore) -> None:
        self.frames.append(message)
        if message.last:
            self.link.on_restored(Restored(message.restore_id))


async def test_a_restore_sends_the_head_of_the_state_ahead_of_the_bulk(link: DurableLink) -> None:
    # The head names the modules the sandbox imports while the rest arrives: it goes first, in a
    # small frame; the host only cuts the bytes, it never reads them.
    state = STATE + bytes(9 * 1024 * 1024)
    await take_snapshot(link, Snapshot("s-1-1", data=state, last=True))
    sandbox = _Sandbox(link)
    outcome = await link.restore(sandbox)  # type: ignore[arg-type]
    assert outcome.error == ""
    sizes = [len(frame.data) for frame in sandbox.frames]
    assert sizes[0] == FIRST_CHUNK
    assert max(sizes) == READ_CHUNK
    assert b"".join(frame.data for frame in sandbox.frames) == state
    assert sandbox.frames[-1].last


async def test_a_forks_first_restore_says_where_it_comes_from(tmp_path: Path) -> None:
    store = SessionStore(tmp_path, StoreSettings())
    store.open()
    writer = store.writer(None, "trial")
    writer.write(STATE)
    assert writer.commit_new((), "main") == ""
    link = DurableLink(store, None, "trial")
    notice = (await link.restore(_Sandbox(link))).notice("trial")  # type: ignore[arg-type]
    assert notice.startswith("session 'trial' was forked from session 'main' at ")
    await take_snapshot(link, Snapshot("s-1-1", data=STATE, last=True))  # its own state now
    notice = (await link.restore(_Sandbox(link))).notice("trial")  # type: ignore[arg-type]
    assert notice.startswith("session 'trial' was restored from its state saved at ")


async def test_the_last_snapshot_of_a_reset_session_s_old_sandbox_is_dropped(
    link: DurableLink,
) -> None:
    await take_snapshot(link, Snapshot("s-1-1", data=STATE, last=True))
    link.store.delete(None, "default")  # a reset: the old sandbox's final snapshot is in flight
    await take_snapshot(link, Snapshot("s-1-2", data=STATE + b"!", last=True))
    assert link.store.saved(None, "default") is None
    assert "reset" in link.notices[0]
    fresh = DurableLink(link.store, None, "default")  # the sandbox after the reset saves again
    await take_snapshot(fresh, Snapshot("s-2-1", data=STATE, last=True))
    assert fresh.notices == []
    assert link.store.saved(None, "default") is not None


async def test_an_unchanged_state_in_use_is_kept_past_a_short_retention(tmp_path: Path) -> None:
    # Before: the retention clock of an unchanged state was refreshed once an hour whatever the
    # retention; with [sessions] state_retention under an hour, a session in use the
    # whole time lost its state at the next bridge start.
    link = link_on(tmp_path, StoreSettings(retention=1e-6))  # a quarter: any later call
    await take_snapshot(link, Snapshot("s-1-1", data=STATE, last=True))
    path = saved_path(link)
    assert path is not None
    os.utime(path, (1, 1))  # saved long ago: only its use since keeps it
    await take_snapshot(link, Snapshot(f"{UNCHANGED_SNAPSHOT_PREFIX}s-1-2", last=True))
    assert path.stat().st_mtime > 1


async def test_unchanged_after_the_state_was_deleted_by_a_refused_restore_is_not_saved(
    link: DurableLink,
) -> None:
    # A sandbox that sends a state before it answers the restore, then refuses the restore: the
    # bridge deletes the saved state and keeps the sandbox; "unchanged" must not vouch for it.
    await take_snapshot(link, Snapshot("s-1-1", data=STATE, last=True))
    link.store.delete(None, "default")
    link.forgotten()
    await take_snapshot(link, Snapshot(f"{UNCHANGED_SNAPSHOT_PREFIX}s-1-2", last=True))
    assert "could not be saved" in link.notices[0]


def _meta(link: DurableLink) -> Path:
    state = saved_path(link)
    assert state is not None
    return state.with_suffix(".meta")


async def test_a_changed_state_with_the_same_unsaved_names_dates_its_metadata_in_place(
    link: DurableLink,
) -> None:
    # Before: every commit replaced the metadata file too (a second rename over a file, which
    # ext4 pays with a flush); now it is written only when what it says changes.
    await take_snapshot(link, Snapshot("s-1-1", data=STATE, last=True, unsaved=("f (file): no",)))
    meta = _meta(link)
    inode = meta.stat().st_ino
    os.utime(meta, (1, 1))  # as if saved long ago
    await take_snapshot(
        link, Snapshot("s-1-2", data=STATE + b"!", last=True, unsaved=("f (file): no",))
    )
    assert meta.stat().st_ino == inode
    saved = link.store.saved(None, "default")
    assert saved is not None
    assert saved.saved_at > 1  # the second commit's time, read from the metadata
    assert saved.unsaved == ("f (file): no",)
    await take_snapshot(link, Snapshot("s-1-3", data=STATE, last=True))  # no unsaved names now
    assert meta.stat().st_ino != inode
    saved = link.store.saved(None, "default")
    assert saved is not None
    assert saved.unsaved == ()


async def test_metadata_missing_at_a_commit_is_written_again(link: DurableLink) -> None:
    await take_snapshot(link, Snapshot("s-1-1", data=STATE, last=True, unsaved=("f (file): no",)))
    _meta(link).unlink()
    await take_snapshot(
        link, Snapshot("s-1-2", data=STATE + b"!", last=True, unsaved=("f (file): no",))
    )
    saved = link.store.saved(None, "default")
    assert saved is not None
    assert saved.unsaved == ("f (file): no",)
    assert link.notices[0].startswith(f"session {'default'!r}: these names could not be saved")


async def test_an_unchanged_state_with_a_new_unsaved_name_records_it_for_the_restore(
    link: DurableLink,
) -> None:
    # Before: binding an open file leaves the pickle byte for byte the same, so the snapshot was
    # "unchanged" and the saved metadata kept the old list: the notice after a restore did not
    # name the file that was lost.
    await take_snapshot(link, Snapshot("s-1-1", data=STATE, last=True))
    unsaved = ("fh (TextIOWrapper): cannot pickle",)
    unchanged = Snapshot(f"{UNCHANGED_SNAPSHOT_PREFIX}s-1-2", last=True, unsaved=unsaved)
    await take_snapshot(link, unchanged)
    saved = link.store.saved(None, "default")
    assert saved is not None
    assert saved.unsaved == unsaved
    assert "fh (TextIOWrapper)" in link.notices[0]
    assert "could not be saved and would not survive" in link.notices[0]


async def test_an_io_error_while_a_large_state_is_streamed_is_a_failed_save_asked_for_again(
    link: DurableLink, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The disk fills up (ENOSPC) while a state too large to hold is written: like a failed
    # commit, a notice and a resave; never an exception out of the reader (it ends the sandbox).
    class Full:
        def write(self, data: bytes) -> int:
            raise OSError(28, "No space left on device")

        def close(self) -> None:
            pass

    init = StateWriter.__init__

    def failing(self: StateWriter, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self._file.close()
        self._file = Full()  # type: ignore[assignment]

    monkeypatch.setattr(StateWriter, "__init__", failing)
    chunk = STATE + bytes(HELD_STATE)
    link.expect_snapshot()
    await link.on_snapshot(Snapshot("s-1-1", data=chunk))
    await link.on_snapshot(Snapshot("s-1-1", data=chunk))
    await link.on_snapshot(Snapshot("s-1-1", last=True))
    assert link.settled.is_set()
    assert "could not be saved" in link.notices[0]
    assert link.lost_last
    assert not list(link.store.root.glob("*.tmp"))


async def test_no_temp_file_for_a_large_state_is_a_failed_save_asked_for_again(
    link: DurableLink, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The state dir refuses a new file (quota, read-only remount, no fd left) as a state too
    # large to hold arrives: a failed save and a resave, not the end of the sandbox.
    def refused(*args: Any, **kwargs: Any) -> Any:
        raise OSError(122, "Disk quota exceeded")

    monkeypatch.setattr(tempfile, "mkstemp", refused)  # as _store calls it
    chunk = STATE + bytes(HELD_STATE)
    link.expect_snapshot()
    await link.on_snapshot(Snapshot("s-1-1", data=chunk))
    await link.on_snapshot(Snapshot("s-1-1", data=chunk))
    await link.on_snapshot(Snapshot("s-1-1", last=True))
    assert link.settled.is_set()
    assert "Disk quota exceeded" in link.notices[0]
    assert link.lost_last
    monkeypatch.undo()
    await take_snapshot(link, Snapshot("s-1-2", data=STATE, last=True))
    assert link.notices == []
    assert not link.lost_last


@pytest.mark.parametrize("found_by", ["retention clock", "new unsaved name"])
async def test_a_state_deleted_outside_the_bridge_frees_its_bytes_for_the_resave(
    tmp_path: Path, found_by: str
) -> None:
    # The store counted the deleted file's bytes as committed forever (until restart): the
    # resave the link asks for was refused by the disk limit for a file that no longer exists,
    # and, once a refused state waited for room, never asked for again.
    one = disk_of(tmp_path, len(STATE))
    link = link_on(tmp_path, StoreSettings(disk_limit=one, retention=1e-6))
    await take_snapshot(link, Snapshot("s-1-1", data=STATE, last=True))
    saved = link.store.saved(None, "default")
    assert saved is not None
    saved.path.unlink()  # by hand: e.g. to make room
    unsaved = ("fh (file): no",) if found_by == "new unsaved name" else ()
    if found_by == "new unsaved name":
        link.store.settings = StoreSettings(disk_limit=one)
    unchanged = Snapshot(f"{UNCHANGED_SNAPSHOT_PREFIX}s-1-2", last=True, unsaved=unsaved)
    await take_snapshot(link, unchanged)
    assert "no longer saved" in link.notices[0]
    assert asked(link)
    link.resave_asked()
    await take_snapshot(link, Snapshot("s-1-3", data=STATE, last=True, unsaved=unsaved))
    assert link.store.saved(None, "default") is not None, link.notices
    assert link.store.total_bytes() == one


async def test_a_budget_refused_state_past_the_largest_kept_is_not_asked_for_again(
    tmp_path: Path,
) -> None:
    # A state refused by the disk budget at its first frame never reaches the max_bytes check,
    # so it is taken as "may pass": once room is made it is asked for whole, only to be refused
    # as too large.
    chunk = b"x" * 60
    others = disk_of(tmp_path, 70, 70)
    limit = others + disk_of(tmp_path, 60) - 1
    link = link_on(tmp_path, StoreSettings(max_bytes=100, disk_limit=limit))
    store = link.store
    for other in ("a", "b"):
        other_link = DurableLink(store, None, other)
        await take_snapshot(other_link, Snapshot("o-1-1", data=b"y" * 70, last=True))
    assert store.total_bytes() == others  # leaves too little: the first 60 bytes are refused
    link.expect_snapshot()
    await link.on_snapshot(Snapshot("s-1-1", data=chunk))
    await link.on_snapshot(Snapshot("s-1-1", data=chunk))
    await link.on_snapshot(Snapshot("s-1-1", data=chunk, last=True))
    assert "[sessions] state_disk" in link.notices[0]
    assert not asked(link)  # no room
    store.delete(None, "a")
    store.delete(None, "b")  # room for 180 bytes now, but 180 > max_bytes: it would be refused
    assert store.fits(None, "default", 3 * len(chunk))
    assert not asked(link)


async def _send(link: DurableLink, snapshot_id: str, data: bytes, frame: int) -> None:
    link.expect_snapshot()
    chunks = [data[i : i + frame] for i in range(0, len(data), frame)]
    for number, chunk in enumerate(chunks, 1):
        await link.on_snapshot(Snapshot(snapshot_id, data=chunk, last=number == len(chunks)))


@pytest.mark.parametrize("size", [HELD_STATE // 2, HELD_STATE * 3])  # held, streamed
async def test_refused_bytes_are_the_whole_state_held_or_streamed(
    tmp_path: Path, size: int
) -> None:
    link = link_on(tmp_path, StoreSettings(disk_limit=disk_of(tmp_path, size, size)))
    store = link.store
    filler = DurableLink(store, None, "filler")
    await _send(filler, "f-1-1", b"f" * (size + size // 2), 256 * 1024)  # leaves about size // 2
    await _send(link, "s-1-1", b"s" * size, 256 * 1024)
    assert "[sessions] state_disk" in link.notices[0]
    assert link._refused == size
    assert not asked(link)
    await _send(filler, "f-1-2", b"f" * (size - 1), 256 * 1024)  # room for the whole state
    assert asked(link)
    link.resave_asked()
    assert not asked(link)
    await _send(link, "s-1-2", b"s" * size, 256 * 1024)
    assert link.notices == []
    assert not asked(link)
    assert store.total_bytes() == disk_of(tmp_path, size, size - 1)
    assert not list(store.root.glob("*.tmp"))


async def test_a_state_refused_by_the_client_share_waits_for_the_share(tmp_path: Path) -> None:
    share = disk_of(tmp_path, 60, 50) - 1
    settings = StoreSettings(disk_limit=10 * share, client_share=share)
    link = link_on(tmp_path, settings, client="c1")
    store = link.store
    other = DurableLink(store, "c1", "other")
    await take_snapshot(other, Snapshot("o-1-1", data=b"o" * 60, last=True))
    await take_snapshot(DurableLink(store, "c2", "x"), Snapshot("x-1-1", data=b"x" * 90, last=True))
    await take_snapshot(link, Snapshot("s-1-1", data=b"s" * 50, last=True))
    assert "[sessions] state_disk_per_client" in link.notices[0]
    assert not asked(link)
    store.delete("c2", "x")  # another client's room is not this client's
    assert not asked(link)
    store.delete("c1", "other")
    assert asked(link)


async def test_forgotten_and_a_later_good_save_clear_the_refusal(tmp_path: Path) -> None:
    small, large = 5, disk_of(tmp_path, 5) + 1  # large takes a block more than small
    link = link_on(tmp_path, StoreSettings(disk_limit=disk_of(tmp_path, small)))
    await take_snapshot(link, Snapshot("s-1-1", data=b"s" * large, last=True))
    assert (link._resend, link._refused) == (True, large)
    assert not asked(link)
    link.forgotten()
    assert asked(link)  # asked at once (nothing of the session is vouched for)
    link.resave_asked()
    await take_snapshot(link, Snapshot("s-1-2", data=b"s" * large, last=True))  # refused again
    assert not asked(link)
    await take_snapshot(link, Snapshot("s-1-3", data=b"s" * small, last=True))  # shrank: saved
    assert link.notices == []
    assert (link._resend, link._refused) == (False, 0)


async def test_an_error_frame_after_a_refusal_leaves_the_refusal(tmp_path: Path) -> None:
    link = link_on(tmp_path, StoreSettings(disk_limit=10))
    await take_snapshot(link, Snapshot("s-1-1", data=b"s" * 50, last=True))
    link.expect_snapshot()
    await link.on_snapshot(Snapshot("s-1-2", data=b"t" * 5))
    await link.on_snapshot(Snapshot("s-1-2", last=True, error="pickling failed"))
    assert not asked(link)  # still the 50 bytes: no room, not asked
    assert not list(link.store.root.glob("*.tmp"))
    assert link.store._reserved[link.store._owner(None)] == 0


async def test_a_reset_of_a_state_deleted_outside_the_bridge_frees_its_bytes(
    tmp_path: Path,
) -> None:
    link = link_on(tmp_path, StoreSettings(disk_limit=disk_of(tmp_path, len(STATE))))
    store = link.store
    await take_snapshot(link, Snapshot("s-1-1", data=STATE, last=True))
    saved = store.saved(None, "default")
    assert saved is not None
    saved.path.unlink()  # by hand, then the session is reset before its link noticed
    store.delete(None, "default")
    other = DurableLink(store, None, "other")
    await take_snapshot(other, Snapshot("o-1-1", data=STATE, last=True))
    assert other.notices == []
    assert store.total_bytes() == disk_of(tmp_path, len(STATE))


async def test_a_state_past_the_largest_kept_is_refused_as_it_passes_and_the_rest_costs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before, the bridge wrote (and hopped to a thread for) every frame of a refused state to
    # its end: an 8 GiB sparse file in /tmp cost it 26-31 s of CPU at every call.
    link = link_on(tmp_path, StoreSettings(max_bytes=HELD_STATE + 1))
    chunk = b"x" * (HELD_STATE // 2)
    link.expect_snapshot()
    sent = 0
    while not link.stop_wanted:
        await link.on_snapshot(Snapshot("s-1-1", data=chunk))
        sent += 1
    assert sent == 3  # the frame that passed the largest kept
    link.stop_wanted = False  # the reader told the sandbox to stop (resave)
    hops: list[object] = []

    async def counted(*args: Any, **kwargs: Any) -> None:
        hops.append(args[0])

    with monkeypatch.context() as patched:
        patched.setattr("anyio.to_thread.run_sync", counted)
        for _ in range(5):  # frames already on their way
            await link.on_snapshot(Snapshot("s-1-1", data=chunk))
    assert hops == []
    assert not link.stop_wanted  # told once
    # The sandbox stopped its saving child: the snapshot ends as failed, for the bridge's reason.
    await link.on_snapshot(Snapshot("s-1-1", last=True, error="the state could not be sent"))
    assert "[sessions] state_max" in link.notices[0]
    assert not link.lost_last  # too large: not asked for again
    assert link.lost
    assert not list(link.store.root.glob("*.tmp"))
