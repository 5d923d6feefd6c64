"""A version-2 host's large snapshots: only the numpy/pandas buffers that changed are sent, the
others named as ranges of the state the host holds; whole after a resave or with a version-1
host; a format-3 state cut short is refused whole."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from bridge_protocol import Snapshot, SnapshotCopy
from bridge_sandbox_client._restoring import restore_state

from .conftest import (  # type: ignore[import-not-found]  # pytest (importlib mode) resolves it
    CopyingHost,
    SnapshotHost,
    frames_data,
)


def _sent(frames: list[Any]) -> int:
    return sum(len(frame.data) for frame in frames if isinstance(frame, Snapshot))


def test_with_copies_only_the_buffers_that_changed_are_sent(tmp: Path) -> None:
    numpy = pytest.importorskip("numpy")  # the standard image's; not in the bare sandbox env
    host = CopyingHost()
    size = 4 * 1024 * 1024
    namespace: dict[str, Any] = {
        "kept": numpy.arange(size // 8, dtype=numpy.int64),
        "changed": numpy.ones(size // 8, dtype=numpy.int64),
        "n": 1,
    }
    first, state = host.saved(namespace)
    assert not any(isinstance(frame, SnapshotCopy) for frame in first)  # nothing to copy from
    assert _sent(first) > 2 * size
    namespace["changed"][0] = 7
    namespace["n"] = 2
    second, state = host.saved(namespace)
    copies = [frame for frame in second if isinstance(frame, SnapshotCopy)]
    assert [(c.base, c.length) for c in copies] == [(first[-1].snapshot_id, size)]
    assert size < _sent(second) < size + 64 * 1024  # the changed array and the small rest
    loaded: dict[str, Any] = {}
    assert restore_state(state, loaded) == ""
    assert loaded.keys() == namespace.keys()
    assert all((loaded[k] == namespace[k]).all() for k in ("kept", "changed"))
    assert loaded["n"] == 2
    loaded["kept"][0] = -1  # a restored array is the session's own, writable
    # The state the copies came from is the one the next copies name.
    namespace["n"] = 3
    third, state = host.saved(namespace)
    assert {c.base for c in third if isinstance(c, SnapshotCopy)} == {second[-1].snapshot_id}
    assert _sent(third) < 64 * 1024
    assert restore_state(state, loaded) == ""
    assert loaded["n"] == 3


def test_without_copies_or_after_a_resave_a_large_state_is_sent_whole(tmp: Path) -> None:
    numpy = pytest.importorskip("numpy")
    namespace: dict[str, Any] = {"a": numpy.zeros(1024 * 1024), "n": 1}
    old = SnapshotHost()  # a version-1 host
    old.snapshot(namespace)
    namespace["n"] = 2
    frames, _ = old.snapshot(namespace)
    assert not any(isinstance(frame, SnapshotCopy) for frame in frames)
    assert frames_data(frames).startswith(b"MCPSNAP2")  # no out-of-band buffers for it
    host = CopyingHost()
    host.saved(namespace)
    host.taker.resend()  # the host could not save it: nothing may be copied from it
    namespace["n"] = 3
    frames, state = host.saved(namespace)
    assert not any(isinstance(frame, SnapshotCopy) for frame in frames)
    assert state.startswith(b"MCPSNAP3")
    loaded: dict[str, Any] = {}
    assert restore_state(state, loaded) == ""
    assert loaded["n"] == 3


def test_a_format_3_state_cut_short_is_refused_whole(tmp: Path) -> None:
    numpy = pytest.importorskip("numpy")
    host = CopyingHost()
    _, state = host.saved({"a": numpy.zeros(1024 * 1024), "n": 1})
    namespace: dict[str, Any] = {"before": 1}
    for cut in (len(state) // 2, 200, 160):  # in the buffer, the table, the pickle
        assert restore_state(state[:cut], namespace) == "it is truncated"
        assert namespace == {"before": 1}
