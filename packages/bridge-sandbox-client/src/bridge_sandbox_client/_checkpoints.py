"""``mcp.runtime`` checkpoint helpers: labelled copies of a durable session's state.

``checkpoint(label)`` saves the namespace and ``/tmp`` as they are at that moment (the fork
machinery's snapshot, kept by the host under the session's checkpoint slots);
``restore(label)`` brings one back into this sandbox, in the running execution: the host sends
its state as ``Restore`` frames before its answer, and the calling thread replaces the namespace
(in place) and ``/tmp`` with it; ``list_checkpoints()`` lists them.

Models write ``checkpoint("a")`` in plain code as often as ``await checkpoint("a")``, and an
un-awaited coroutine would silently do nothing: each helper does its work at once and returns a
value that ``await`` also accepts (as ``discovered_servers`` does).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

from bridge_protocol import ErrorCode

from bridge_sandbox_client._calls import CallRegistry
from bridge_sandbox_client._runtime import AwaitableList
from bridge_sandbox_client.errors import InvalidArguments, ToolError

if TYPE_CHECKING:
    from bridge_sandbox_client._pending import PendingCall

__all__ = ["AwaitableDict", "Checkpoints"]

LABEL = re.compile(r"[A-Za-z0-9_.-]{1,64}")
"""What a label may be (the host checks it again; checked here first so that a bad label
costs no snapshot)."""


class AwaitableDict(dict[str, Any]):
    """A dict that ``await`` also accepts (evaluates to itself)."""

    def __await__(self) -> Generator[Any, None, AwaitableDict]:
        yield from ()  # nothing to wait for: the answer is already here
        return self


class Checkpoints:
    """The checkpoint helpers of ``mcp.runtime`` (their names in :attr:`EXPORTED`).

    The sandbox client gives them its channel's side: ``take(label)`` sends the ``checkpoint``
    request and takes the snapshot that follows it; ``ask(label)`` sends a
    ``restore_checkpoint`` request under a new restore id whose frames it will keep;
    ``received(restore_id)`` hands over (and forgets) the state kept for that id;
    ``apply(state)`` replaces the namespace and ``/tmp`` with it ("" or why not).
    """

    EXPORTED: tuple[str, ...] = ("checkpoint", "restore", "list_checkpoints")

    def __init__(
        self,
        registry: CallRegistry,
        *,
        take: Callable[[str], PendingCall],
        ask: Callable[[str], tuple[str, PendingCall]],
        received: Callable[[str], bytes | None],
        apply: Callable[[bytes], str],
    ) -> None:
        self._registry = registry
        self._take = take
        self._ask = ask
        self._received = received
        self._apply = apply

    def checkpoint(self, label: str) -> AwaitableDict:
        """Save this session's namespace and ``/tmp`` files, as they are now, as checkpoint
        ``label`` (1 to 64 characters of ``A-Z a-z 0-9 _ . -``); a checkpoint of the same label
        is replaced. A session keeps 8: past that, the oldest is replaced (``"replaced"`` in
        the answer names it). Returns ``{"label", "saved_at", "size", "replaced"}``; works with
        or without ``await``. Raises :class:`~mcp.ToolError` when this session is not saved
        (the message says why) or the state could not be saved (a size limit)."""
        value = CallRegistry.wait_sync(self._take(_label(label)))
        return AwaitableDict(value if isinstance(value, dict) else {})

    def restore(self, label: str) -> AwaitableDict:
        """Replace this session's namespace and ``/tmp`` files with checkpoint ``label``, at
        once, in this execution (names made since are gone; ``runtime`` and ``mcp_servers``
        stay). Returns ``{"label", "saved_at", "size"}``; works with or without ``await``.
        Raises :class:`~mcp.InvalidArguments` for a label this session has no checkpoint of."""
        restore_id, pending = self._ask(_label(label))
        try:
            value = CallRegistry.wait_sync(pending)
        finally:
            state = self._received(restore_id)  # its frames came before the answer
        if state is None:
            raise ToolError(f"the state of checkpoint {label!r} did not arrive")
        if error := self._apply(state):
            raise ToolError(f"checkpoint {label!r} could not be restored: {error}")
        return AwaitableDict(value if isinstance(value, dict) else {})

    def list_checkpoints(self) -> AwaitableList:
        """This session's checkpoints, oldest first: ``[{"label", "saved_at", "size"}]``;
        works with or without ``await``."""
        value = CallRegistry.wait_sync(self._registry.request("list_checkpoints", {}))
        return AwaitableList(value if isinstance(value, list) else [])


def _label(label: Any) -> str:
    if not isinstance(label, str):
        raise TypeError(f"label must be a str, not {type(label).__name__}")
    if not LABEL.fullmatch(label):
        shown = ascii(label[:80]) + ("…" if len(label) > 80 else "")
        raise InvalidArguments(
            f"invalid checkpoint label {shown}: 1 to 64 characters of A-Z a-z 0-9 _ . -",
            code=ErrorCode.INVALID_ARGUMENTS,
        )
    return label
