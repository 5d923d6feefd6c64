"""How the sandbox saves its state: a small one at once in one frame (or as "unchanged" when its
bytes are those sent last), a large one, or one with user threads running, by a forked child in
the background; what is saved loads back, states of the first format too; a state names the
modules it needs (bounded)."""

from __future__ import annotations

import contextlib
import io
import mmap
import os
import pickle
import struct
import sys
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from bridge_protocol import UNCHANGED_SNAPSHOT_PREFIX, Snapshot
from bridge_sandbox_client import _saving_child, _tmpfiles
from bridge_sandbox_client._preimport import (
    MAX_HINT_BYTES,
    MAX_HINT_MODULES,
    EarlyImports,
    decode_hint,
    encode_hint,
)
from bridge_sandbox_client._restoring import restore_state, state_hint
from bridge_sandbox_client._snapshot import INLINE_LIMIT

from .conftest import SnapshotHost, frames_data  # type: ignore[import-not-found]  # pytest (importlib mode) resolves it

WAIT = 20.0


def test_a_small_state_is_sent_at_once_in_one_frame_and_loads_back(tmp: Path) -> None:
    (tmp / "note.txt").write_text("kept")
    host = SnapshotHost()
    frames, at_once = host.snapshot({"x": 41, "words": ["a", "b"]})
    assert at_once
    assert len(frames) == 1
    assert not frames[0].error
    (tmp / "note.txt").unlink()
    namespace: dict[str, Any] = {}
    assert restore_state(frames[0].data, namespace) == ""
    assert namespace == {"x": 41, "words": ["a", "b"]}
    assert (tmp / "note.txt").read_text() == "kept"


def test_the_same_state_again_is_sent_as_unchanged_and_a_change_whole(tmp: Path) -> None:
    host = SnapshotHost()
    namespace: dict[str, Any] = {"x": 1}
    first, _ = host.snapshot(namespace)
    again, at_once = host.snapshot(namespace)
    assert at_once
    assert [(f.snapshot_id.startswith(UNCHANGED_SNAPSHOT_PREFIX), f.data) for f in again] == [
        (True, b"")
    ]
    (tmp / "new.txt").write_text("a file counts as a change")
    changed, _ = host.snapshot(namespace)
    assert not changed[0].snapshot_id.startswith(UNCHANGED_SNAPSHOT_PREFIX)
    assert changed[0].data != first[0].data


def test_a_file_rewritten_with_the_same_size_and_times_is_saved_anew(tmp: Path) -> None:
    # A reused tar header must never stand for content: here only the bytes differ.
    note = tmp / "note.bin"
    note.write_bytes(b"first")
    host = SnapshotHost()
    host.snapshot({"x": 1})
    times = note.stat()
    note.write_bytes(b"secnd")
    os.utime(note, ns=(times.st_atime_ns, times.st_mtime_ns))
    again, _ = host.snapshot({"x": 1})
    assert not again[0].snapshot_id.startswith(UNCHANGED_SNAPSHOT_PREFIX)
    note.unlink()
    assert restore_state(again[0].data, {}) == ""
    assert note.read_bytes() == b"secnd"


def test_a_file_written_through_a_shared_mapping_is_saved_anew(tmp: Path) -> None:
    # On tmpfs a page already written through a mapping takes more writes without any change
    # of the file's times (measured): the content is read at every save, never assumed.
    data = tmp / "mapped.bin"
    data.write_bytes(bytes(4096))
    host = SnapshotHost()
    with data.open("r+b") as file, mmap.mmap(file.fileno(), 4096) as mapping:
        mapping[:5] = b"first"
        host.snapshot({"x": 1})
        mapping[:5] = b"secnd"
        again, _ = host.snapshot({"x": 1})
    assert not again[0].snapshot_id.startswith(UNCHANGED_SNAPSHOT_PREFIX)
    data.unlink()
    assert restore_state(again[0].data, {}) == ""
    assert data.read_bytes()[:5] == b"secnd"


def _tree(root: Path) -> None:
    (root / "note.txt").write_text("kept")
    (root / "empty").write_bytes(b"")
    (root / "block").write_bytes(b"b" * tarfile.BLOCKSIZE)
    (root / "d" / "e").mkdir(parents=True)
    (root / "d" / "e" / "deep.txt").write_text("deep")
    (root / "d" / ("long-" * 30)).write_text("a name past ustar's 100 characters")
    (root / "snowman-\u2603").write_text("unicode name")
    os.symlink("note.txt", root / "link")
    os.symlink("/nowhere", root / "dangling")
    os.link(root / "note.txt", root / "hard")
    os.mkfifo(root / "fifo")
    os.chmod(root / "empty", 0o600)
    (root / ".matplotlib").mkdir()  # the image's cache: left out
    (root / ".matplotlib" / "cache").write_text("not saved")


def _tarfile_bytes() -> bytes:
    out = io.BytesIO()
    _saving_child.write_tar(out)
    return out.getvalue()


def test_the_inline_tar_is_byte_for_byte_what_tarfile_writes(tmp: Path) -> None:
    _tree(tmp)
    small = _tmpfiles.SmallTar()
    assert small.tar(INLINE_LIMIT) == _tarfile_bytes()
    # Again with headers reused, and after changes of content, mode, names and links.
    assert small.tar(INLINE_LIMIT) == _tarfile_bytes()
    (tmp / "note.txt").write_text("changed")
    os.chmod(tmp / "block", 0o640)
    (tmp / "d" / "e" / "deep.txt").rename(tmp / "d" / "moved.txt")
    (tmp / "hard").unlink()
    os.link(tmp / "block", tmp / "hard2")
    assert small.tar(INLINE_LIMIT) == _tarfile_bytes()
    with tarfile.open(fileobj=io.BytesIO(small.tar(INLINE_LIMIT))) as tar:
        names = tar.getnames()
    assert ".matplotlib" not in names
    assert "d/moved.txt" in names


def test_the_inline_tar_of_a_tmp_with_nothing_to_save_is_what_tarfile_writes(tmp: Path) -> None:
    # Written without tarfile, which a sandbox then never loads (see _tmpfiles).
    (tmp / ".matplotlib").mkdir()  # the image's cache: left out
    assert _tmpfiles.SmallTar().tar(INLINE_LIMIT) == _tmpfiles.EMPTY_TAR == _tarfile_bytes()


def test_the_inline_tar_refuses_a_large_tmp_before_reading_it(tmp: Path) -> None:
    (tmp / "big").write_bytes(b"x" * (INLINE_LIMIT + 1))
    with pytest.raises(_tmpfiles.TooLarge):
        _tmpfiles.SmallTar().tar(INLINE_LIMIT)
    (tmp / "big").unlink()
    for n in range(_tmpfiles.MAX_ENTRIES + 1):
        (tmp / f"f{n}").write_bytes(b"")
    with pytest.raises(_tmpfiles.TooLarge):
        _tmpfiles.SmallTar().tar(INLINE_LIMIT)


def _swapped_after_the_walk(monkeypatch: pytest.MonkeyPatch, swap: Any) -> None:
    """/tmp changes between the walk's lstat and the read (as a process the code left running
    can make it): ``swap`` runs once the walk is done."""
    walk = _tmpfiles._small_tree

    def walk_then_swap(limit: int) -> list[tuple[str, str, os.stat_result]]:
        found = walk(limit)
        swap()
        return found

    monkeypatch.setattr(_tmpfiles, "_small_tree", walk_then_swap)


def test_a_file_replaced_by_a_fifo_while_tarred_fails_the_save_instead_of_hanging(
    tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    note = tmp / "note.txt"
    note.write_text("kept")

    def to_fifo() -> None:
        note.unlink()
        os.mkfifo(note)

    _swapped_after_the_walk(monkeypatch, to_fifo)
    outcome: list[BaseException | bytes] = []

    def tar() -> None:
        try:
            outcome.append(_tmpfiles.SmallTar().tar(INLINE_LIMIT))
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=tar, daemon=True)
    thread.start()
    thread.join(30)  # a bound on a hang, not a speed check: it ends at once or never
    if thread.is_alive():  # let the blocked open through, so the thread ends
        os.close(os.open(note, os.O_WRONLY | os.O_NONBLOCK))
    assert len(outcome) == 1
    assert isinstance(outcome[0], OSError)
    assert "note.txt" in str(outcome[0])


def test_a_file_replaced_by_a_symlink_while_tarred_is_not_read_through_it(
    tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp / "other").write_text("not this file's bytes")
    note = tmp / "note.txt"
    note.write_text("kept")

    def to_link() -> None:
        note.unlink()
        note.symlink_to(tmp / "other")

    _swapped_after_the_walk(monkeypatch, to_link)
    with pytest.raises(OSError, match=r"note\.txt"):
        _tmpfiles.SmallTar().tar(INLINE_LIMIT)


def test_a_large_state_is_saved_by_a_child_and_the_next_small_one_inline_again(
    tmp: Path,
) -> None:
    host = SnapshotHost()
    large = {"blob": b"x" * (INLINE_LIMIT + 1)}
    frames, at_once = host.snapshot(large)
    assert not at_once
    assert frames[-1].last
    assert not frames[-1].error
    namespace: dict[str, Any] = {}
    assert restore_state(frames_data(frames), namespace) == ""
    assert namespace == large
    frames, _ = host.snapshot({"x": 1})  # by a child (the last state was large), found small
    assert not frames[-1].error
    _, at_once = host.snapshot({"x": 2})
    assert at_once


def _unchanged(frames: list[Snapshot]) -> bool:
    return [(f.snapshot_id.startswith(UNCHANGED_SNAPSHOT_PREFIX), f.data) for f in frames] == [
        (True, b"")
    ]


def test_a_large_state_unchanged_since_the_last_is_not_sent_again(tmp: Path) -> None:
    (tmp / "big.bin").write_bytes(b"f" * (INLINE_LIMIT + 1))
    host = SnapshotHost()
    namespace: dict[str, Any] = {"blob": b"x" * (INLINE_LIMIT + 1), "n": 1}
    first, _ = host.snapshot(namespace)
    assert len(frames_data(first)) > 2 * INLINE_LIMIT
    again, _ = host.snapshot(namespace)  # a child made and hashed it: the bytes were not sent
    assert _unchanged(again)
    assert _unchanged(host.snapshot(namespace)[0])
    # A changed name, a changed file: sent whole, and what is sent is what loads back.
    namespace["n"] = 2
    changed, _ = host.snapshot(namespace)
    assert not changed[-1].snapshot_id.startswith(UNCHANGED_SNAPSHOT_PREFIX)
    assert not changed[-1].error
    loaded: dict[str, Any] = {}
    assert restore_state(frames_data(changed), loaded) == ""
    assert loaded == namespace
    assert _unchanged(host.snapshot(namespace)[0])
    (tmp / "big.bin").write_bytes(b"g" * (INLINE_LIMIT + 1))
    changed, _ = host.snapshot(namespace)
    assert not changed[-1].snapshot_id.startswith(UNCHANGED_SNAPSHOT_PREFIX)
    (tmp / "big.bin").unlink()
    assert restore_state(frames_data(changed), {}) == ""
    assert (tmp / "big.bin").read_bytes() == b"g" * (INLINE_LIMIT + 1)


def test_a_large_file_written_through_a_mapping_is_saved_anew(tmp: Path) -> None:
    # Its times do not change (see the inline test above): the child reads /tmp to compare.
    data = tmp / "mapped.bin"
    data.write_bytes(bytes(INLINE_LIMIT + 1))
    host = SnapshotHost()
    with data.open("r+b") as file, mmap.mmap(file.fileno(), INLINE_LIMIT + 1) as mapping:
        mapping[:5] = b"first"
        host.snapshot({"x": 1})
        assert _unchanged(host.snapshot({"x": 1})[0])
        mapping[:5] = b"secnd"
        again, _ = host.snapshot({"x": 1})
    assert not again[-1].snapshot_id.startswith(UNCHANGED_SNAPSHOT_PREFIX)
    data.unlink()
    assert restore_state(frames_data(again), {}) == ""
    assert data.read_bytes()[:5] == b"secnd"


def test_after_a_small_state_or_a_failed_one_a_large_state_is_sent_whole(tmp: Path) -> None:
    host = SnapshotHost()
    large: dict[str, Any] = {"blob": b"x" * (INLINE_LIMIT + 1)}
    host.snapshot(large)
    host.snapshot({"x": 1})  # small: by a child (the last was large), then inline again
    host.snapshot({"x": 1})
    frames, _ = host.snapshot(large)  # the host holds the small state now
    assert not frames[-1].snapshot_id.startswith(UNCHANGED_SNAPSHOT_PREFIX)
    assert len(frames_data(frames)) > INLINE_LIMIT
    failed, _ = host.snapshot({**large, "bad": _Exits()})
    assert failed[-1].error or failed[-1].unsaved  # the name left out, or the save failed
    frames, _ = host.snapshot(large)
    assert not frames[-1].snapshot_id.startswith(UNCHANGED_SNAPSHOT_PREFIX)


@pytest.mark.parametrize("size", [1, INLINE_LIMIT + 1], ids=["inline", "by-a-child"])
def test_after_a_resave_the_same_state_is_sent_whole_once(tmp: Path, size: int) -> None:
    host = SnapshotHost()
    namespace: dict[str, Any] = {"blob": b"x" * size}
    host.snapshot(namespace)
    assert _unchanged(host.snapshot(namespace)[0])
    host.taker.resend()  # the host could not save it
    again, _ = host.snapshot(namespace)
    assert not again[-1].snapshot_id.startswith(UNCHANGED_SNAPSHOT_PREFIX)
    loaded: dict[str, Any] = {}
    assert restore_state(frames_data(again), loaded) == ""
    assert loaded == namespace
    assert _unchanged(host.snapshot(namespace)[0])


def test_a_fork_of_an_unchanged_large_state_is_sent_whole(tmp: Path) -> None:
    host = SnapshotHost()
    large: dict[str, Any] = {"blob": b"x" * (INLINE_LIMIT + 1)}
    host.snapshot(large)
    host.taker.take(large, lambda name, value: False, host.taker.fork_id())
    frames: list[Snapshot] = []
    while not frames or not frames[-1].last:
        frames.append(host.frames.get(timeout=WAIT))
    loaded: dict[str, Any] = {}
    assert restore_state(frames_data(frames), loaded) == ""
    assert loaded == large
    assert _unchanged(host.snapshot(large)[0])  # the session's own copy is still the same


def test_a_running_user_thread_leaves_the_state_to_a_child(tmp: Path) -> None:
    host = SnapshotHost()
    stop = threading.Event()
    worker = threading.Thread(target=stop.wait, name="user-worker")
    worker.start()
    try:
        frames, at_once = host.snapshot({"x": 1})
    finally:
        stop.set()
        worker.join()
    assert not at_once
    assert not frames[-1].error
    namespace: dict[str, Any] = {}
    assert restore_state(frames_data(frames), namespace) == ""
    assert namespace == {"x": 1}


class _Exits:
    def __reduce__(self) -> Any:
        raise SystemExit("user code's __reduce__ exits")


def test_a_reduce_that_exits_is_a_failed_snapshot_not_an_exit(tmp: Path) -> None:
    host = SnapshotHost()
    frames, at_once = host.snapshot({"bad": _Exits()})
    assert at_once
    assert "SystemExit" in frames[-1].error
    # Nothing was sent whole: the same state again is not "unchanged".
    frames, _ = host.snapshot({"bad": _Exits()})
    assert not frames[-1].snapshot_id.startswith(UNCHANGED_SNAPSHOT_PREFIX)


def test_a_state_names_the_modules_its_pickle_needs_and_not_the_builtins(tmp: Path) -> None:
    import decimal
    import fractions
    import json

    host = SnapshotHost()
    state = {"codec": json, "price": [decimal.Decimal("1.5")], "kind": fractions.Fraction}
    frames, _ = host.snapshot(state)
    hint = state_hint(frames_data(frames))
    assert hint is not None
    assert {"json", "decimal", "fractions"} <= set(hint)
    assert "builtins" not in hint
    namespace: dict[str, Any] = {}
    assert restore_state(frames_data(frames), namespace) == ""
    assert namespace == state


def _format_1(values: dict[str, Any], tar: bytes) -> bytes:
    """A state as the first format wrote it (MCPSNAP1, no hint): still on users' disks."""
    data = pickle.dumps(values, protocol=5)
    return b"MCPSNAP1" + struct.pack(">Q", len(data)) + data + tar


def _tar(name: str, content: bytes) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w|") as tar:
        info = tarfile.TarInfo(name)
        info.size = len(content)
        tar.addfile(info, io.BytesIO(content))
    return out.getvalue()


def test_a_state_of_the_first_format_still_loads(tmp: Path) -> None:
    state = _format_1({"x": 41, "words": ["a"]}, _tar("note.txt", b"kept"))
    assert state_hint(state) == []
    namespace: dict[str, Any] = {}
    assert restore_state(state, namespace) == ""
    assert namespace == {"x": 41, "words": ["a"]}
    assert (tmp / "note.txt").read_text() == "kept"


def test_a_hint_is_bounded_and_only_plain_module_names_are_read() -> None:
    names = [f"m{i}" for i in range(MAX_HINT_MODULES + 10)]
    assert len(encode_hint(names).split(b"\n")) == MAX_HINT_MODULES
    assert len(encode_hint(["x" * 99 + str(i) for i in range(100)])) <= MAX_HINT_BYTES
    assert encode_hint(["numpy.core.multiarray", "numpy", "builtins", "__main__"]) == b"numpy"
    hostile = b"os\n../../etc\nos.path\n\x00bad\n" + b"a" * 500 + b"\nsys"
    assert decode_hint(hostile) == ["os", "sys"]
    assert len(decode_hint(b"\n".join([b"ok"] * 1000))) == MAX_HINT_MODULES
    too_long = b"MCPSNAP2" + struct.pack(">H", MAX_HINT_BYTES + 1) + b"x" * (MAX_HINT_BYTES + 1)
    assert state_hint(too_long) == []
    assert state_hint(b"MCPSNAP2" + struct.pack(">H", 10) + b"json") is None  # not all here yet
    assert state_hint(b"MCPS") is None
    assert state_hint(b"garbage!") == []


def test_a_snapshot_taken_while_the_last_one_is_forwarded_follows_it_whole(tmp: Path) -> None:
    host = SnapshotHost()
    host.taker.take({"blob": b"x" * (INLINE_LIMIT + 1)}, lambda name, value: False)
    host.taker._inline = True  # the next state is small: tried inline while the child works
    host.taker.take({"x": 1}, lambda name, value: False)
    ids: list[tuple[str, bool]] = []
    while len([frame for frame in ids if frame[1]]) < 2:
        frame = host.frames.get(timeout=WAIT)
        ids.append((frame.snapshot_id, frame.last))
    order = [snapshot_id for snapshot_id, _ in ids]
    first = order[0]
    assert first.endswith("-1")  # the one taken first comes first, and whole
    assert order[-1].endswith("-2")
    assert order == [first] * order.count(first) + [order[-1]] * (len(order) - order.count(first))


def test_the_modules_named_before_start_are_read_bounded_and_imported_by_a_thread(
    tmp_path: Path,
) -> None:
    named = tmp_path / "preimport"
    named.write_bytes(b"colorsys\n../x\nos.path\nno_such_module_here")
    early = EarlyImports(str(named))
    assert early.modules == ["colorsys", "no_such_module_here"]
    sys.modules.pop("colorsys", None)
    early.start()
    errors = early.join()
    assert "colorsys" in sys.modules
    assert len(errors) == 1
    assert "no_such_module_here" in errors[0]
    named.write_bytes(b"colorsys\n" * 300)  # past the size limit: nothing at all
    assert EarlyImports(str(named)).modules == []
    assert EarlyImports(str(tmp_path / "absent")).modules == []
    assert EarlyImports(str(tmp_path / "absent")).join() == []  # nothing started: no wait


def _open_fds() -> set[int]:
    return {int(name) for name in os.listdir("/proc/self/fd")}


def test_no_fd_is_left_open_when_the_second_pipe_cannot_be_made(
    tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # User code holding all but two fds: the state pipe is made, the report pipe is not.
    host = SnapshotHost()
    made: list[tuple[int, int]] = []
    real_pipe = os.pipe

    def pipe() -> tuple[int, int]:
        if made:
            raise OSError(24, "Too many open files")
        made.append(real_pipe())
        return made[-1]

    before = _open_fds()
    monkeypatch.setattr(os, "pipe", pipe)
    frames, _ = host.snapshot({"blob": b"x" * (INLINE_LIMIT + 1)})
    monkeypatch.undo()
    assert frames[-1].error
    assert _open_fds() - before == set()


def test_a_fork_taken_by_a_user_thread_as_the_execution_ends_never_loses_a_forwarder(
    tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # runtime.fork_session_sync() from a thread user code left running: its take runs while the
    # main thread takes the session's own snapshot. Neither forwarder may be lost (the next take
    # joins it): otherwise two snapshots' frames interleave and the host commits a mix.
    host = SnapshotHost()
    large: dict[str, Any] = {"blob": b"x" * (INLINE_LIMIT + 1)}
    release = threading.Event()

    def send(frame: Any) -> None:
        if threading.current_thread() is not host.taker._forwarder:
            release.wait(3.0)  # a forwarder no take would join: slow (bounded)
        host.frames.put(frame)

    host.taker._send = send
    both = threading.Barrier(2)
    real_fork = os.fork
    forwarders: list[bool] = []

    def fork() -> int:
        pid = real_fork()
        if pid and forwarders == [] and both.n_waiting < 2 and not both.broken:
            with contextlib.suppress(threading.BrokenBarrierError):
                both.wait(1.0)  # the two takes forked: both now set their forwarder
        return pid

    monkeypatch.setattr(os, "fork", fork)
    user = threading.Thread(
        target=host.taker.take,
        args=(large, lambda name, value: False, host.taker.fork_id()),
        name="user-forker",
    )
    user.start()
    host.taker.take(large, lambda name, value: False)
    user.join()

    def checked_fork() -> int:
        pid = real_fork()
        if pid:
            running = [t for t in threading.enumerate() if t.name == "bridge-snapshot"]
            forwarders.append(any(t.is_alive() for t in running))
        return pid

    monkeypatch.setattr(os, "fork", checked_fork)
    host.taker.take({**large, "n": 1}, lambda name, value: False)
    release.set()
    host.taker.take({"x": 1}, lambda name, value: False)  # joins the last forwarder
    assert forwarders[:1] == [False]  # no earlier forwarder still running at the fork


def test_a_child_forked_by_a_user_thread_does_not_hold_the_snapshot_up(tmp: Path) -> None:
    # A thread of user code forks workers that live a while (multiprocessing's "fork"): one
    # forked while a saving child's pipes are open must not keep their write ends, or the
    # forwarder waits for that worker to exit (for ever, for a pool's), and every later take.
    host = SnapshotHost()
    large: dict[str, Any] = {"blob": b"x" * (INLINE_LIMIT + 1)}
    stop = threading.Event()
    workers: list[int] = []

    def forker() -> None:
        while not stop.is_set():
            pid = os.fork()
            if pid == 0:  # pragma: no cover (the worker)
                time.sleep(120)  # far past WAIT: a worker keeping a write end fails the test
                os._exit(0)
            workers.append(pid)
            stop.wait(0.001)

    thread = threading.Thread(target=forker, name="user-forker", daemon=True)
    thread.start()
    try:
        for n in range(6):
            frames, _ = host.snapshot({**large, "n": n})  # waits at most WAIT for each frame
            assert not frames[-1].error
    finally:
        stop.set()
        thread.join()
        for pid in workers:
            with contextlib.suppress(OSError):
                os.kill(pid, 9)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
