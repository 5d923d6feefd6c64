"""The store of saved session states: one bridge per store, atomic replacement, bounds."""

from __future__ import annotations

import ast
import os
import stat
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from bridge_core.sessions import SessionStore, StoreSettings, _store
from bridge_core.sessions._state_files import (
    MAX_META_BYTES,
    META_SUFFIX,
    STATE_SUFFIX,
    block_size,
)

from .conftest import disk_of


def _save(
    store: SessionStore, data: bytes, name: str = "default", *, client: str | None = None
) -> str:
    writer = store.writer(client, name)
    writer.write(data)
    return writer.commit(())


def test_a_second_bridge_on_the_same_store_is_refused_until_the_first_is_gone(
    tmp_path: Path,
) -> None:
    first, second = SessionStore(tmp_path, StoreSettings()), SessionStore(tmp_path, StoreSettings())
    first.open()
    second.open()
    assert first.usable
    assert not second.usable
    assert "[sessions] store" in second.refusal
    first.close()
    third = SessionStore(tmp_path, StoreSettings())
    third.open()
    assert third.usable
    third.close()


def test_an_oversized_state_keeps_the_last_good_one_and_leaves_no_temp_file(
    tmp_path: Path,
) -> None:
    store = SessionStore(tmp_path, StoreSettings(max_bytes=100))
    store.open()
    assert _save(store, b"good") == ""
    error = _save(store, b"x" * 101)
    saved = store.saved(None, "default")
    assert "[sessions] state_max" in error
    assert saved is not None
    assert saved.path.read_bytes() == b"good"
    assert stat.S_IMODE(saved.path.stat().st_mode) == 0o600
    assert not list(store.root.glob("*.tmp"))
    store.close()


def test_the_disk_limit_counts_every_saved_state(tmp_path: Path) -> None:
    block = block_size(tmp_path)
    store = SessionStore(tmp_path, StoreSettings(disk_limit=disk_of(tmp_path, 2 * block, 1) - 1))
    store.open()
    assert _save(store, b"x" * (2 * block), "a") == ""
    # Replacing a state does not count it twice.
    assert _save(store, b"x" * (2 * block), "a") == ""
    error = _save(store, b"1", "b")
    assert "[sessions] state_disk" in error
    assert store.saved(None, "b") is None
    store.close()


def test_states_past_the_retention_and_half_written_files_go_when_the_store_opens(
    tmp_path: Path,
) -> None:
    store = SessionStore(tmp_path, StoreSettings(retention=60))
    store.open()
    _save(store, b"old", "old")
    _save(store, b"new", "new")
    old = store.saved(None, "old")
    assert old is not None
    os.utime(old.path, (time.time() - 120, time.time() - 120))
    (store.root / ".half.tmp").write_bytes(b"half")
    store.close()
    store.open()
    assert store.saved(None, "old") is None
    assert store.saved(None, "new") is not None
    assert not (store.root / ".half.tmp").exists()
    store.close()


def test_a_state_in_use_keeps_its_metadata_past_the_retention(tmp_path: Path) -> None:
    # Before: the sweep judged the metadata by its own mtime (its last save), so a state that was
    # used (restored, or saved unchanged) but not changed for longer than the retention kept its
    # bytes and lost its unsaved names and its time.
    store = SessionStore(tmp_path, StoreSettings(retention=60))
    store.open()
    writer = store.writer(None, "used")
    writer.write(b"state")
    assert writer.commit(("f (file): no",)) == ""
    saved = store.saved(None, "used")
    assert saved is not None
    long_ago = time.time() - 120
    os.utime(saved.path.with_suffix(".meta"), (long_ago, long_ago))
    store.touch(saved)  # used now
    _save(store, b"gone", "old")
    old = store.saved(None, "old")
    assert old is not None
    os.utime(old.path, (long_ago, long_ago))
    store.close()
    store.open()
    kept = store.saved(None, "used")
    assert kept is not None
    assert kept.unsaved == ("f (file): no",)
    assert abs(kept.saved_at - long_ago) < 1
    assert store.saved(None, "old") is None
    assert not list(store.root.glob("*.meta"))[1:]  # the old state's went with it
    store.close()


def test_names_are_per_client_and_a_client_s_states_go_with_it(tmp_path: Path) -> None:
    store = SessionStore(tmp_path, StoreSettings())
    store.open()
    for client in ("alice", "bob"):
        writer = store.writer(client, "default")
        writer.write(client.encode())
        assert writer.commit(()) == ""
    alice = store.saved("alice", "default")
    assert alice is not None
    assert alice.path.read_bytes() == b"alice"
    store.delete_client("alice")
    assert store.saved("alice", "default") is None
    assert store.saved("bob", "default") is not None
    store.close()


def test_a_fork_is_saved_only_under_a_free_name_and_never_replaces_a_state(
    tmp_path: Path,
) -> None:
    limit = disk_of(tmp_path, len(b"original"), len(b"abc")) - 1
    store = SessionStore(tmp_path, StoreSettings(disk_limit=limit))
    store.open()
    assert _save(store, b"original", "kept") == ""
    onto_existing = store.writer(None, "kept")
    onto_existing.write(b"fork")
    assert "exists" in onto_existing.commit_new((), "origin")
    assert store.saved(None, "kept") is not None
    assert (store.root / next(p.name for p in store.root.glob("*.state"))).read_bytes() == (
        b"original"
    )
    over_budget = store.writer(None, "fresh")
    over_budget.write(b"abc")
    assert "[sessions] state_disk" in over_budget.commit_new((), "origin")
    assert not store.has_saved(None, "fresh")
    assert sorted(p.suffix for p in store.root.iterdir() if p.name != "lock") == [".meta", ".state"]
    store.close()


def test_many_small_forks_are_refused_at_the_disk_budget_counting_blocks_and_metadata(
    tmp_path: Path,
) -> None:
    # Before, a state counted its bytes only: 30 forks of 3,000 bytes passed a budget of 90,000
    # bytes while each took a block for its state and one for its metadata, 245,760 bytes with
    # 4 KiB blocks (2.7 times the budget).
    size, limit = 3000, 90_000
    store = SessionStore(tmp_path, StoreSettings(disk_limit=limit))
    store.open()
    made, error = 0, ""
    while not error and made < limit // size:
        fork = store.writer(None, f"trial-{made}")
        fork.write(b"x" * size)
        error = fork.commit_new(("f (file): no",), "main")
        made += not error
    assert "[sessions] state_disk" in error
    assert made == limit // store.disk_cost(size)
    files = [p for p in store.root.iterdir() if p.suffix in (STATE_SUFFIX, META_SUFFIX)]
    assert len(files) == 2 * made
    assert sum(p.stat().st_blocks * 512 for p in files) <= store.total_bytes() <= limit
    store.close()


def test_states_still_being_written_count_against_the_disk_limit(tmp_path: Path) -> None:
    store = SessionStore(tmp_path, StoreSettings(disk_limit=disk_of(tmp_path, 10)))
    store.open()
    never_ending = store.writer(None, "a")
    never_ending.write(b"123456")
    other = store.writer(None, "b")
    other.write(b"12345")
    assert "[sessions] state_disk" in other.commit(())
    never_ending.abort()  # its bytes leave the budget
    assert _save(store, b"1234567890", "b") == ""
    store.delete(None, "b")  # and a deleted state's too
    assert _save(store, b"1234567890", "c") == ""
    store.close()


def test_writers_at_the_same_time_never_pass_the_disk_limit_together(tmp_path: Path) -> None:
    three = disk_of(tmp_path, 30, 30, 30)
    store = SessionStore(tmp_path, StoreSettings(disk_limit=three + disk_of(tmp_path, 30) - 1))
    store.open()
    writers = [store.writer(None, str(n)) for n in range(10)]
    with ThreadPoolExecutor(10) as pool:
        errors = list(pool.map(lambda w: (w.write(b"x" * 30), w.commit(()))[1], writers))
    assert errors.count("") == 3
    assert store.total_bytes() == three
    store.close()


def test_an_http_client_has_its_share_of_the_disk_and_a_stdio_client_the_whole(
    tmp_path: Path,
) -> None:
    share = 2 * block_size(tmp_path)  # a state of its size takes one block more (metadata)
    settings = StoreSettings(disk_limit=3 * disk_of(tmp_path, share), client_share=share)
    store = SessionStore(tmp_path, settings)
    store.open()
    fits = share - store.disk_cost(0)  # the largest state within the share
    hog = store.writer("hog", "a")
    hog.write(b"x" * (fits + 1))
    assert "[sessions] state_disk_per_client" in hog.commit(())
    assert _save(store, b"x" * fits, "b", client="hog") == ""
    assert "state_disk_per_client" in _save(store, b"", "c", client="hog")  # its metadata's block
    assert _save(store, b"x" * fits, "a", client="other") == ""  # another client's share is its own
    assert _save(store, b"x" * fits, "b", client="hog") == ""  # replacing one's own state fits
    store.delete("hog", "b")
    assert _save(store, b"x" * fits, "c", client="hog") == ""  # a deleted state's disk comes back
    store.close()
    single = SessionStore(tmp_path / "stdio", settings)
    single.open()
    assert _save(single, b"x" * (2 * share), "a") == ""
    single.close()


def test_a_state_begun_before_a_reset_is_never_installed_after_it(tmp_path: Path) -> None:
    store = SessionStore(tmp_path, StoreSettings())
    store.open()
    assert _save(store, b"before") == ""
    epoch = store.epoch(None, "default")  # the old sandbox's snapshot begins
    store.delete(None, "default")  # the session is reset meanwhile
    late = store.writer(None, "default", epoch)
    late.write(b"the old sandbox's last state")
    assert "reset" in late.commit(())
    assert store.saved(None, "default") is None
    assert not list(store.root.glob("*.tmp"))
    fresh = store.writer(None, "default", store.epoch(None, "default"))
    fresh.write(b"after")
    assert fresh.commit(()) == ""
    assert store.total_bytes() == disk_of(tmp_path, len(b"after"))
    store.close()


def test_a_state_or_fork_begun_before_its_client_left_is_never_installed(tmp_path: Path) -> None:
    store = SessionStore(tmp_path, StoreSettings())
    store.open()
    epochs = store.epoch("a", "s"), store.epoch("a", "copy"), store.epoch("b", "s")
    store.delete_client("a")
    own, fork, other = (
        store.writer("a", "s", epochs[0]),
        store.writer("a", "copy", epochs[1]),
        store.writer("b", "s", epochs[2]),
    )
    for writer in (own, fork, other):
        writer.write(b"state")
    assert "reset" in own.commit(())
    assert "reset" in fork.commit_new((), "origin")
    assert other.commit(()) == ""  # another client's state is not touched
    assert store.saved("a", "s") is None
    assert store.saved("a", "copy") is None
    assert store.saved("b", "s") is not None
    assert store.total_bytes() == disk_of(tmp_path, len(b"state"))
    store.close()


def test_deleting_what_never_saved_leaves_no_trace_in_the_bridge(tmp_path: Path) -> None:
    store = SessionStore(tmp_path, StoreSettings())
    store.open()
    for n in range(1000):  # resets of names never run, HTTP clients leaving without a session
        store.delete(None, f"never-{n}")
        store.delete_client(f"client-{n}")
    assert len(store._deletions) == 0
    store.epoch("a", "s")
    store.delete("a", "s")
    assert len(store._deletions) == 2  # the session and its client, counted once each
    store.close()


def _state(hint: bytes, declared: int | None = None) -> bytes:
    length = len(hint) if declared is None else declared
    return b"MCPSNAP2" + length.to_bytes(2, "big") + hint + b"\0" * 8 + b"pickle-never-read"


def test_a_states_module_hint_is_read_from_its_head(tmp_path: Path) -> None:
    store = SessionStore(tmp_path, StoreSettings())
    store.open()
    assert _save(store, _state(b"numpy\npandas\npyarrow"), "data") == ""
    assert store.hint(None, "data") == ("numpy", "pandas", "pyarrow")
    assert store.hint(None, "never-saved") == ()
    store.close()


def test_a_hostile_module_hint_is_dropped_whole(tmp_path: Path) -> None:
    """The sandbox wrote the head: anything but plain module names within the limits, and the
    host passes nothing on (never a path, a dotted name, an option, or an endless list)."""
    store = SessionStore(tmp_path, StoreSettings())
    store.open()
    hostile = {
        "path": b"numpy\n../../etc/passwd",
        "dotted": b"numpy\nos.path",
        "option": b"numpy\n-c",
        "space": b"numpy\nimport os",
        "empty line": b"numpy\n\npandas",
        "non-ascii": "numpy\nnümpy".encode(),
        "repeated": b"numpy\nnumpy",
        "too many": b"\n".join(b"m%d" % i for i in range(65)),
        "too long": b"a" * 101,
        "over the size": b"\n".join([b"m" * 99] * 30),
        "NUL": b"numpy\x00",
    }
    for i, raw in enumerate(hostile.values()):
        assert _save(store, _state(raw), f"s{i}") == ""
    assert _save(store, _state(b"numpy", declared=2049), "declared") == ""
    assert _save(store, b"MCPSNAP1" + b"\0" * 8 + b"old", "format-1") == ""
    assert _save(store, b"not a state", "garbage") == ""
    for i, what in enumerate(hostile):
        assert store.hint(None, f"s{i}") == (), what
    for name in ("declared", "format-1", "garbage"):
        assert store.hint(None, name) == (), name
    store.close()


def test_the_pool_hint_merges_the_most_recent_states_of_one_client(tmp_path: Path) -> None:
    store = SessionStore(tmp_path, StoreSettings())
    store.open()
    for i, hint in enumerate((b"old_only", b"numpy\npandas", b"pandas\nsklearn")):
        assert _save(store, _state(hint), f"s{i}") == ""
        os.utime(store.saved(None, f"s{i}").path, (1000 + i, 1000 + i))  # type: ignore[union-attr]
    assert _save(store, _state(b"theirs"), "s", client="someone-else") == ""
    assert store.recent_hints(None, 2) == ("pandas", "sklearn", "numpy")
    assert "theirs" not in store.recent_hints(None, 8)
    store.close()


def test_a_client_keeps_at_most_max_saved_sessions_and_the_refusal_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before, forks and new names could add saved sessions without end: each costs a few KiB
    # of disk (blocks, metadata) that the byte limits did not see.
    monkeypatch.setattr(_store, "MAX_SAVED_SESSIONS", 2)
    store = SessionStore(tmp_path, StoreSettings())
    store.open()
    assert _save(store, b"a", "a", client="c1") == ""
    assert _save(store, b"b", "b", client="c1") == ""
    assert "MAX_SAVED_SESSIONS" in _save(store, b"c", "c", client="c1")
    empty = store.writer("c1", "empty")  # nothing written: refused at commit all the same
    assert "MAX_SAVED_SESSIONS" in empty.commit(())
    assert _save(store, b"again", "a", client="c1") == ""  # replacing one is no new session
    assert _save(store, b"other", "c", client="c2") == ""  # another client's count is its own
    store.delete("c1", "b")
    assert _save(store, b"c", "c", client="c1") == ""
    assert store.saved("c1", "empty") is None
    store.close()
    reopened = SessionStore(tmp_path, StoreSettings())
    reopened.open()  # counted again from the disk
    assert "MAX_SAVED_SESSIONS" in _save(reopened, b"d", "d", client="c1")
    reopened.close()


def test_the_unsaved_names_kept_in_metadata_are_bounded_in_bytes(tmp_path: Path) -> None:
    # Each name is cut to 300 characters, but escaped in JSON 50 of them took ~90 KB per state.
    store = SessionStore(tmp_path, StoreSettings())
    store.open()
    writer = store.writer(None, "default")
    writer.write(b"state")
    names = tuple(f"{n}" + "\x01" * 400 for n in range(60))
    assert writer.commit(names) == ""
    meta = next(store.root.glob(f"*{META_SUFFIX}"))
    assert meta.stat().st_size <= MAX_META_BYTES
    saved = store.saved(None, "default")
    assert saved is not None
    assert saved.unsaved[0].startswith("0")
    assert saved.unsaved[-1] == f"and {60 - (len(saved.unsaved) - 1)} more"
    store.close()


def test_no_module_of_the_sessions_package_imports_itself_back() -> None:
    # The store and its state writer imported each other (the writer under TYPE_CHECKING): the
    # shared names and the writer's view of its store now live in _state_files.
    package = Path(_store.__file__).parent
    imports: dict[str, set[str]] = {}
    for source in package.glob("*.py"):
        named = set()
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                prefix = "bridge_core.sessions."
                if node.module.startswith(prefix):
                    named.add(node.module.removeprefix(prefix))
        imports[source.stem] = named

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for module in imports.get(start, set()) - seen:
            if module == goal or reaches(module, goal, seen | {module}):
                return True
        return False

    circles = sorted(module for module in imports if reaches(module, module, set()))
    assert circles == []
