"""Saved states leave the disk they share with the bridge's own files some free space: a state
that would eat into it is refused with a notice naming the reserve, whatever the disk limit."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from bridge_core.sessions import SessionStore, StoreSettings, _free_space
from bridge_core.sessions._durable import DurableLink
from bridge_protocol import Snapshot

from .conftest import STATE, asked, take_snapshot

KiB, MiB, GiB = 1024, 1024**2, 1024**3


class Disk:
    """A file system of ``total`` bytes with ``free`` of them free, as ``shutil.disk_usage``
    answers for it (the store's seam); the test moves ``free``."""

    def __init__(self, total: int, free: int) -> None:
        self.total = total
        self.free = free
        self.asked: list[Path] = []

    def __call__(self, path: Path) -> tuple[int, int, int]:
        self.asked.append(path)
        return self.total, self.total - self.free, self.free


def _save(store: SessionStore, data: bytes, name: str) -> str:
    writer = store.writer(None, name)
    writer.write(data)
    return writer.commit(())


def test_the_reserve_is_five_percent_of_the_disk_and_at_least_one_gib() -> None:
    assert _free_space.free_space_reserve(10 * GiB) == GiB
    assert _free_space.free_space_reserve(100 * GiB) == 5 * GiB


def test_a_state_that_would_eat_into_the_free_space_reserve_is_refused_naming_it(
    tmp_path: Path,
) -> None:
    reserve = 5 * GiB  # of 100 GiB; the disk limit (4 GiB) is not what binds here
    disk = Disk(100 * GiB, 50 * GiB)
    store = SessionStore(tmp_path, StoreSettings(), disk_usage=disk)
    store.open()
    disk.free = reserve + store.disk_cost(1000)
    assert _save(store, b"x" * 1000, "fits") == ""
    disk.free -= 1
    error = _save(store, b"x" * 1000, "short")
    assert "FREE_SPACE_RESERVE" in error
    assert f"{disk.free:,} bytes free" in error
    assert f"{reserve:,}" in error
    assert "[sessions] state_disk" not in error
    assert store.saved(None, "short") is None
    assert not list(store.root.glob("*.tmp"))
    assert not store.fits(None, "short", 1000)
    disk.free += 1  # room made on the disk
    assert store.fits(None, "short", 1000)
    assert store.root in disk.asked  # the store's own file system, not another's
    store.close()


async def test_a_state_refused_for_the_reserve_is_a_notice_and_is_asked_for_once_there_is_room(
    tmp_path: Path,
) -> None:
    disk = Disk(10 * GiB, GiB)  # exactly the reserve free: no room for any state
    store = SessionStore(tmp_path, StoreSettings(), disk_usage=disk)
    store.open()
    link = DurableLink(store, None, "default")
    await take_snapshot(link, Snapshot("s-1-1", data=STATE, last=True))
    assert len(link.notices) == 1
    assert "FREE_SPACE_RESERVE" in link.notices[0]
    assert not asked(link)  # no room: the sandbox is not asked to send it again
    disk.free += store.disk_cost(len(STATE))
    assert asked(link)
    link.resave_asked()
    await take_snapshot(link, Snapshot("s-1-2", data=STATE, last=True))
    assert link.notices == []
    assert store.saved(None, "default") is not None
    store.close()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of 8 MiB mounted for the test (root only), unmounted after it."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if not sys.platform.startswith("linux") or shutil.which("mount") is None:
        pytest.skip("mounting a small file system needs Linux and mount(8)")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8m,mode=0700", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        pytest.skip(f"a tmpfs cannot be mounted here (needs root): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        # Lazily: a file a failed test left open must not leave the mount behind.
        subprocess.run(["umount", "--lazy", str(mount)], check=True)


def test_on_a_small_disk_states_stop_at_the_reserve_and_the_bridges_own_files_still_fit(
    small_disk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before, the disk budget never looked at the disk: within the default limit (4 GiB) states
    # filled it, the last one failed with "No space left on device", and so would the bridge's
    # log, its sandboxes' channel directories and full outputs on the same disk.
    monkeypatch.setattr(_free_space, "FREE_SPACE_RESERVE", 2 * MiB)
    store = SessionStore(small_disk / "sessions", StoreSettings())
    store.open()
    saved, error = 0, ""
    while not error and saved < 16:  # 8 MiB offered in all
        error = _save(store, b"x" * (512 * KiB), f"s{saved}")
        saved += not error
    store.close()
    assert "FREE_SPACE_RESERVE" in error
    assert saved >= 8
    assert shutil.disk_usage(small_disk).free >= 2 * MiB
    runtime = small_disk / "runtime"  # what the bridge writes beside its saved states
    (runtime / "sandboxes" / "a-channel").mkdir(parents=True)
    (runtime / "bridge.log").write_bytes(b"l" * MiB)
    (runtime / "sandboxes" / "a-channel" / "output.txt").write_bytes(b"o" * (512 * KiB))
    assert (runtime / "bridge.log").stat().st_size == MiB
