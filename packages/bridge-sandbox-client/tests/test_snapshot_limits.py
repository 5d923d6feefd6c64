"""A state is never made larger than a sandbox could load back: a sparse file in ``/tmp`` (free
in the sandbox, its holes written whole into a state) fails the save before anything is sent,
a file growing past the limit while it is saved stops the save, and a state the host refuses
while it is still being sent (``resave``) stops the saving child."""

from __future__ import annotations

import os
import queue
import threading
from pathlib import Path
from typing import Any

import pytest
from bridge_protocol import Snapshot
from bridge_sandbox_client import _saving_child, _snapshot
from bridge_sandbox_client._saving_pipe import CHUNK
from bridge_sandbox_client._snapshot import SnapshotTaker

from .conftest import SnapshotHost  # type: ignore[import-not-found]  # pytest (importlib mode) resolves it

WAIT = 20.0
LIMIT = 16 * 1024 * 1024
"""The memory limit the sandbox reads (its cgroup's), in these tests."""


@pytest.fixture
def limited(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_snapshot, "state_limit", lambda: LIMIT)


def data_of(frames: list[Snapshot]) -> int:
    return sum(len(frame.data) for frame in frames)


def test_a_sparse_file_past_the_limit_fails_the_save_before_anything_is_sent(
    tmp: Path, limited: None
) -> None:
    # Before, the saving child streamed the file's holes as zeros, all 8 GiB of them, at every
    # call, and the bridge read them all before refusing the state.
    with open(tmp / "hole.img", "wb") as file:
        file.truncate(8 * 1024 * 1024 * 1024)
    host = SnapshotHost()
    frames, _ = host.snapshot({"kept": 1})
    assert data_of(frames) == 0
    error = frames[-1].error
    assert "hole.img" in error
    assert "sparse" in error
    assert f"{LIMIT:,}" in error


def test_a_file_that_grows_past_the_limit_while_it_is_saved_stops_the_save(
    tmp: Path, limited: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp / "grown.bin").write_bytes(os.urandom(LIMIT + CHUNK))
    # The child's look before writing saw a small /tmp: the file grew right after it.
    monkeypatch.setattr(_saving_child, "tar_size", lambda: (0, None))
    host = SnapshotHost()
    frames, _ = host.snapshot({"kept": 1})
    assert data_of(frames) <= LIMIT
    assert "grew past" in frames[-1].error


def test_a_resave_while_a_state_is_sent_stops_its_saving_child(tmp: Path) -> None:
    size = 8 * CHUNK
    (tmp / "large.bin").write_bytes(os.urandom(size))
    frames: queue.Queue[Any] = queue.Queue()
    refused = threading.Event()

    def send(frame: Any) -> None:
        frames.put(frame)
        if frame.data:  # the host is reading its first frame: the child waits on the pipe
            refused.wait(WAIT)

    taker = SnapshotTaker(send, lambda line: None)
    taker.take({"kept": 1}, lambda name, value: False)
    received = [frames.get(timeout=WAIT)]
    taker.resend()  # the host refused it (past its largest state kept)
    refused.set()
    while not received[-1].last:
        received.append(frames.get(timeout=WAIT))
    assert received[-1].error
    assert data_of(received) < size
