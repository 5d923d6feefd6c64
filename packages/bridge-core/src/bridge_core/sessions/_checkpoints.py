"""A durable session's checkpoints: labelled copies of its live state, brought back on demand.

``runtime.checkpoint(label)`` in sandbox code is a ``checkpoint`` request followed by a snapshot
of the namespace and ``/tmp`` as they are at that moment, exactly as a fork's (the same
``fork-`` snapshot id, the same one place in :class:`~._fork.Forks`); the host writes it into one
of the session's :data:`MAX_CHECKPOINTS` slots in the store. A slot is a saved state whose name
the host derives from the session's name and the slot's number (:func:`slot_name`: never a path,
never the label), so it belongs to the same client as the session, is counted against the same
disk limits, and survives restarts like any saved state. The label is kept in the slot's
metadata; a checkpoint of a label that exists replaces it, and when every slot is taken the
oldest checkpoint is replaced (the answer names it).

``runtime.restore(label)`` is a ``restore_checkpoint`` request: the host streams the slot's state
to the sandbox as ``Restore`` frames under the id the request names (it starts with
:data:`~bridge_protocol.CHECKPOINT_RESTORE_PREFIX`, so the sandbox keeps them apart from its own
session's restore and drops those it did not ask for), then answers; the sandbox replaces its
namespace and ``/tmp`` with it in the running execution. What the session saves after that
execution (as after any) is the restored state, so its durable state stays its own.

Everything the sandbox sends is untrusted: labels are checked against :data:`LABEL`, one
checkpoint or restore runs at a time per sandbox, and the host holds one frame of a state at once.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from typing import Any

import anyio
from bridge_protocol import CHECKPOINT_RESTORE_PREFIX, ErrorCode

from bridge_core.channel import Channel, ChannelClosed
from bridge_core.gateway import CallFailed
from bridge_core.sessions._fork import Forks, PendingFork
from bridge_core.sessions._restore_stream import stream_state
from bridge_core.sessions._state_files import SavedState
from bridge_core.sessions._store import SessionStore

__all__ = [
    "CHECKPOINT_METHOD",
    "LIST_METHOD",
    "MAX_CHECKPOINTS",
    "METHODS",
    "RESTORE_METHOD",
    "Checkpoints",
    "slot_name",
    "slot_names",
]

CHECKPOINT_METHOD = "checkpoint"
RESTORE_METHOD = "restore_checkpoint"
LIST_METHOD = "list_checkpoints"
METHODS = frozenset({CHECKPOINT_METHOD, RESTORE_METHOD, LIST_METHOD})
"""The requests of sandbox code's ``runtime.checkpoint``, ``restore`` and ``list_checkpoints``."""
MAX_CHECKPOINTS = 8
"""Checkpoints one session keeps: past it, a new label replaces the oldest."""
LABEL = re.compile(r"[A-Za-z0-9_.-]{1,64}")
"""What a checkpoint's label may be (a session name's rule)."""
MAX_RESTORE_ID = 128
"""Characters of the id a sandbox names its checkpoint restore by (its own are about 30)."""
SHOWN_LABEL = 80
"""Characters of a refused label quoted back (escaped)."""


def slot_name(session: str, slot: int) -> str:
    """The store's name for checkpoint ``slot`` of ``session``: a NUL cannot be in a session
    name, so no session is ever called this."""
    return f"{session}\0checkpoint\0{slot}"


def slot_names(session: str) -> list[str]:
    return [slot_name(session, slot) for slot in range(MAX_CHECKPOINTS)]


def _label(params: Mapping[str, Any]) -> str:
    untrusted = params.get("label")
    if not isinstance(untrusted, str):
        raise CallFailed(ErrorCode.INVALID_ARGUMENTS, "a checkpoint's label must be a str")
    if not LABEL.fullmatch(untrusted):
        shown = ascii(untrusted[:SHOWN_LABEL]) + ("…" if len(untrusted) > SHOWN_LABEL else "")
        raise CallFailed(
            ErrorCode.INVALID_ARGUMENTS,
            f"invalid checkpoint label {shown}: 1 to 64 characters of A-Z a-z 0-9 _ . -",
        )
    return untrusted


def _when(state: SavedState) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(state.saved_at))


def describe(state: SavedState) -> dict[str, Any]:
    """What sandbox code is told of a checkpoint."""
    return {"label": state.checkpoint, "saved_at": _when(state), "size": state.size}


class Checkpoints:
    """The checkpoints of one durable sandbox's session (owned by its ``DurableLink``)."""

    def __init__(self, store: SessionStore, client: str | None, name: str, forks: Forks) -> None:
        self.store = store
        self.client = client
        self.name = name
        self._forks = forks
        self._restoring = False

    def _slots(self) -> list[SavedState | None]:
        """What each slot holds (blocking: in a thread); a state without a label is none."""
        states = [self.store.saved(self.client, slot) for slot in slot_names(self.name)]
        return [s if s is not None and s.checkpoint else None for s in states]

    async def listing(self) -> list[dict[str, Any]]:
        """The session's checkpoints, oldest first."""
        states = await anyio.to_thread.run_sync(self._slots)
        kept = sorted((s for s in states if s is not None), key=lambda s: s.saved_at)
        return [describe(state) for state in kept]

    async def begin(self, params: Mapping[str, Any]) -> tuple[PendingFork, str]:
        """Take the one place for the checkpoint's snapshot and choose its slot: the label's
        own, else a free one, else the oldest's. Returns it and the label it replaces ("").

        Called on the reader, before the snapshot's frames that follow; raises
        :class:`CallFailed` for a bad label or a fork or checkpoint already under way."""
        label = _label(params)
        states = await anyio.to_thread.run_sync(self._slots)
        slot = next((i for i, s in enumerate(states) if s and s.checkpoint == label), None)
        if slot is None:
            slot = next((i for i, s in enumerate(states) if s is None), None)
        replaces = ""
        if slot is None:
            slot = min(range(len(states)), key=lambda i: states[i].saved_at)  # type: ignore[union-attr]
            replaces = states[slot].checkpoint  # type: ignore[union-attr]
        pending = self._forks.begin_checkpoint(
            params.get("snapshot_id"), slot_name(self.name, slot), label
        )
        return pending, replaces

    async def finish(self, pending: PendingFork, replaces: str) -> dict[str, Any]:
        """Wait until the checkpoint is saved; what sandbox code is told of it."""
        await self._forks.finish(pending)
        return {
            "label": pending.checkpoint,
            "saved_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "size": pending.size,
            "replaced": replaces or None,
        }

    async def restore(self, params: Mapping[str, Any], channel: Channel) -> dict[str, Any]:
        """Stream checkpoint ``label``'s state to the sandbox; what its code is told."""
        label = _label(params)
        if self._restoring:
            raise CallFailed(
                ErrorCode.INVALID_ARGUMENTS,
                f"session {self.name!r} is already restoring a checkpoint: one at a time",
            )
        self._restoring = True
        try:
            states = await anyio.to_thread.run_sync(self._slots)
            state = next((s for s in states if s is not None and s.checkpoint == label), None)
            if state is None:
                known = ", ".join(sorted(repr(s.checkpoint) for s in states if s)) or "none"
                raise CallFailed(
                    ErrorCode.INVALID_ARGUMENTS,
                    f"session {self.name!r} has no checkpoint {label!r} (its checkpoints: {known})",
                )
            if state.size > self.store.settings.max_bytes:
                raise CallFailed(
                    ErrorCode.TOOL_ERROR,
                    f"checkpoint {label!r} is larger than [sessions] state_max in bridge.toml",
                )
            restore_id = params.get("restore_id")
            if (
                not isinstance(restore_id, str)
                or not restore_id.startswith(CHECKPOINT_RESTORE_PREFIX)
                or len(restore_id) > MAX_RESTORE_ID
            ):
                raise CallFailed(ErrorCode.INVALID_ARGUMENTS, "a restore needs its restore id")
            try:
                await stream_state(channel, restore_id, state)
            except OSError as exc:
                raise CallFailed(
                    ErrorCode.TOOL_ERROR,
                    f"checkpoint {label!r} could not be read: {exc.strerror or exc}",
                ) from None
            except ChannelClosed as exc:  # the sandbox is gone: the answer goes nowhere
                raise CallFailed(
                    ErrorCode.TOOL_ERROR, f"the sandbox's channel failed: {exc}"
                ) from None
            await anyio.to_thread.run_sync(self.store.touch, state)
            return describe(state)
        finally:
            self._restoring = False
