"""A durable link's checkpoints: a fork-like snapshot kept in one of the session's slots (the
label's own, a free one, else the oldest's), listed oldest first, streamed back under the id the
sandbox named; labels, ids and a second restore at once are refused; a reset drops them; another
client's or session's checkpoints are never seen."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from bridge_core.gateway import CallFailed
from bridge_core.sessions import SessionStore, StoreSettings
from bridge_core.sessions._checkpoints import MAX_CHECKPOINTS, slot_names
from bridge_core.sessions._durable import DurableLink
from bridge_protocol import CHECKPOINT_RESTORE_PREFIX, ErrorCode, Restore, Snapshot

from .conftest import STATE

pytestmark = pytest.mark.anyio


class _Channel:
    """Records what the link sends; ``gate`` holds each send until it is set."""

    def __init__(self) -> None:
        self.frames: list[Restore] = []
        self.gate: anyio.Event | None = None

    async def send(self, message: Restore) -> None:
        if self.gate is not None:
            await self.gate.wait()
        self.frames.append(message)


def _link(root: Path, client: str | None = None, name: str = "default") -> DurableLink:
    store = SessionStore(root, StoreSettings())
    store.open()
    return DurableLink(store, client, name)


async def _checkpoint(link: DurableLink, label: Any, data: bytes = STATE) -> dict[str, Any]:
    snapshot_id = f"fork-1-{label}"
    pending, replaces = await link.checkpoints.begin({"label": label, "snapshot_id": snapshot_id})
    await link.on_snapshot(Snapshot(snapshot_id, data=data, last=True))
    return await link.checkpoints.finish(pending, replaces)


async def _restore(link: DurableLink, label: str, channel: _Channel) -> dict[str, Any]:
    params = {"label": label, "restore_id": f"{CHECKPOINT_RESTORE_PREFIX}1"}
    return await link.checkpoints.restore(params, channel)  # type: ignore[arg-type]


async def test_a_checkpoint_is_restored_as_restore_frames_under_the_sandboxs_id(
    tmp_path: Path,
) -> None:
    link = _link(tmp_path)
    made = await _checkpoint(link, "a", STATE + b"one")
    channel = _Channel()
    told = await _restore(link, "a", channel)
    assert made["label"] == "a"
    assert made["replaced"] is None
    assert made["size"] == len(STATE) + 3
    assert told["label"] == "a"
    assert {f.restore_id for f in channel.frames} == {f"{CHECKPOINT_RESTORE_PREFIX}1"}
    assert b"".join(f.data for f in channel.frames) == STATE + b"one"
    assert channel.frames[-1].last
    assert link.store.saved(None, "default") is None  # the session's own state is untouched


async def test_past_eight_labels_the_oldest_is_replaced_and_a_label_replaces_its_own(
    tmp_path: Path,
) -> None:
    link = _link(tmp_path)
    replaced = [(await _checkpoint(link, f"c{i}"))["replaced"] for i in range(MAX_CHECKPOINTS + 3)]
    again = await _checkpoint(link, "c10", STATE + b"newer")
    listed = await link.checkpoints.listing()
    assert replaced == [None] * MAX_CHECKPOINTS + ["c0", "c1", "c2"]
    assert again["replaced"] is None
    assert [c["label"] for c in listed] == [f"c{i}" for i in range(3, 11)]
    assert next(c for c in listed if c["label"] == "c10")["size"] == len(STATE) + 5
    assert len(list(link.store.root.glob("*.state"))) == MAX_CHECKPOINTS


@pytest.mark.parametrize("label", ["../../x", "", "a" * 65, "a/b", "x\0y", 7, None])
async def test_a_bad_label_is_refused_before_anything_is_written(
    tmp_path: Path, label: Any
) -> None:
    link = _link(tmp_path)
    with pytest.raises(CallFailed) as refused:
        await _checkpoint(link, label)
    assert refused.value.code == ErrorCode.INVALID_ARGUMENTS
    assert list(link.store.root.glob("*.state")) == []
    assert list(link.store.root.glob(".*.tmp")) == []


async def test_an_unknown_label_and_a_forged_restore_id_are_refused(tmp_path: Path) -> None:
    link = _link(tmp_path)
    await _checkpoint(link, "a")
    channel = _Channel()
    with pytest.raises(CallFailed) as unknown:
        await _restore(link, "b", channel)
    for forged in ("other-1", "x" * 200, 3):
        with pytest.raises(CallFailed) as bad_id:
            await link.checkpoints.restore({"label": "a", "restore_id": forged}, channel)  # type: ignore[arg-type]
        assert bad_id.value.code == ErrorCode.INVALID_ARGUMENTS
    assert unknown.value.code == ErrorCode.INVALID_ARGUMENTS
    assert "'a'" in unknown.value.message  # the labels it has are named
    assert channel.frames == []


async def test_a_second_restore_while_one_is_sent_is_refused(tmp_path: Path) -> None:
    link = _link(tmp_path)
    await _checkpoint(link, "a")
    channel = _Channel()
    channel.gate = anyio.Event()
    refusals: list[CallFailed] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(_restore, link, "a", channel)
        await anyio.wait_all_tasks_blocked()
        try:
            await _restore(link, "a", _Channel())
        except CallFailed as exc:
            refusals.append(exc)
        channel.gate.set()
    assert [r.code for r in refusals] == [ErrorCode.INVALID_ARGUMENTS]
    assert channel.frames[-1].last
    await _restore(link, "a", _Channel())  # the first one over: the next may go


async def test_a_checkpoint_and_a_fork_take_turns(tmp_path: Path) -> None:
    link = _link(tmp_path)
    await link.checkpoints.begin({"label": "a", "snapshot_id": "fork-1-1"})
    with pytest.raises(CallFailed) as busy:
        await link.checkpoints.begin({"label": "b", "snapshot_id": "fork-1-2"})
    assert busy.value.code == ErrorCode.INVALID_ARGUMENTS
    assert "one fork or checkpoint at a time" in busy.value.message


async def test_a_forged_frame_of_another_snapshot_id_saves_nothing(tmp_path: Path) -> None:
    link = _link(tmp_path)
    pending, replaces = await link.checkpoints.begin({"label": "a", "snapshot_id": "fork-1-1"})
    await link.on_snapshot(Snapshot("fork-1-2", data=STATE, last=True))  # not the one asked
    await link.on_snapshot(Snapshot("fork-1-1", last=True, error="the child failed"))
    with pytest.raises(CallFailed) as failed:
        await link.checkpoints.finish(pending, replaces)
    assert failed.value.code == ErrorCode.TOOL_ERROR
    assert await link.checkpoints.listing() == []


async def test_checkpoints_are_their_own_client_and_sessions_and_a_reset_deletes_them(
    tmp_path: Path,
) -> None:
    link = _link(tmp_path)
    await _checkpoint(link, "a")
    store = link.store
    other_session = DurableLink(store, None, "other")
    other_client = DurableLink(store, "bob", "default")
    assert await other_session.checkpoints.listing() == []
    assert await other_client.checkpoints.listing() == []
    with pytest.raises(CallFailed):
        await _restore(other_client, "a", _Channel())
    for name in ["default", *slot_names("default")]:  # what a reset deletes
        store.delete(None, name)
    assert await link.checkpoints.listing() == []


async def test_a_checkpoint_begun_before_a_reset_is_not_installed_after_it(
    tmp_path: Path,
) -> None:
    link = _link(tmp_path)
    pending, replaces = await link.checkpoints.begin({"label": "a", "snapshot_id": "fork-1-1"})
    for name in slot_names("default"):
        link.store.delete(None, name)
    await link.on_snapshot(Snapshot("fork-1-1", data=STATE, last=True))
    with pytest.raises(CallFailed):
        await link.checkpoints.finish(pending, replaces)
    assert await link.checkpoints.listing() == []
