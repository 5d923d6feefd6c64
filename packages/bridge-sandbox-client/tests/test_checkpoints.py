"""``runtime`` checkpoint helpers in-process: a checkpoint state replaces the namespace in place
(the client's own names and dunders stay, the session's functions see the restored globals) and
``/tmp``; a state that cannot load changes nothing; each helper works with and without
``await``; a bad label costs no request."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from bridge_sandbox_client._checkpoints import Checkpoints
from bridge_sandbox_client._pending import PendingCall
from bridge_sandbox_client._restoring import restore_state
from bridge_sandbox_client._snapshot import inline_state
from bridge_sandbox_client._tmpfiles import SmallTar
from bridge_sandbox_client.errors import InvalidArguments, ToolError


def _skip(name: str, value: Any) -> bool:
    return name == "runtime"


def _state(namespace: dict[str, Any]) -> bytes:
    parts, _ = inline_state(namespace, _skip, SmallTar())
    return b"".join(parts)


def _namespace() -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "__main__", "runtime": "the runtime"}
    exec("x = 1\ndef f():\n    return x * 10\n", namespace)
    return namespace


def test_a_checkpoint_state_replaces_the_namespace_in_place_and_tmp(tmp: Path) -> None:
    namespace = _namespace()
    (tmp / "note.txt").write_text("before")
    state = _state(namespace)
    exec("x = 2\ny = 'made after'\n", namespace)
    (tmp / "note.txt").write_text("after")
    (tmp / "dir").mkdir()
    (tmp / "dir" / "new.txt").write_text("new")
    assert restore_state(state, namespace, keep=_skip) == ""
    assert namespace["x"] == 1
    assert "y" not in namespace
    assert namespace["f"]() == 10
    assert namespace["f"].__globals__ is namespace
    assert namespace["runtime"] == "the runtime"
    assert namespace["__name__"] == "__main__"
    assert sorted(p.name for p in tmp.iterdir()) == ["note.txt"]
    assert (tmp / "note.txt").read_text() == "before"


def test_a_state_that_cannot_load_leaves_the_namespace_as_it_was(tmp: Path) -> None:
    namespace = _namespace()
    state = _state(namespace)
    exec("x = 2\n", namespace)
    before = dict(namespace)
    assert restore_state(state[:40], namespace, keep=_skip) == "it is truncated"
    assert restore_state(b"", namespace, keep=_skip) == "it is empty"
    assert namespace == before


class _Host:
    """The client's side of the helpers, answering at once."""

    def __init__(self, state: bytes | None = b"state") -> None:
        self.asked: list[str] = []
        self.applied: list[bytes] = []
        self.state = state

    @staticmethod
    def _answer(value: Any) -> PendingCall:
        pending = PendingCall(None, None)
        pending.set_result(value)
        return pending

    def take(self, label: str) -> PendingCall:
        self.asked.append(label)
        return self._answer({"label": label, "size": 3, "replaced": None})

    def ask(self, label: str) -> tuple[str, PendingCall]:
        self.asked.append(label)
        return "checkpoint-1", self._answer({"label": label})

    def received(self, restore_id: str) -> bytes | None:
        return self.state

    def apply(self, state: bytes) -> str:
        self.applied.append(state)
        return ""


def _helpers(host: _Host) -> Checkpoints:
    registry: Any = type("R", (), {"request": lambda self, m, p: host._answer([{"label": "a"}])})()
    return Checkpoints(
        registry, take=host.take, ask=host.ask, received=host.received, apply=host.apply
    )


def test_each_helper_works_with_and_without_await() -> None:
    host = _Host()
    helpers = _helpers(host)
    plain = helpers.checkpoint("a"), helpers.restore("a"), helpers.list_checkpoints()

    async def awaited() -> tuple[Any, ...]:
        return (
            await helpers.checkpoint("a"),
            await helpers.restore("a"),
            await helpers.list_checkpoints(),
        )

    assert asyncio.run(awaited()) == plain
    assert plain[0]["label"] == "a"
    assert plain[2] == [{"label": "a"}]
    assert host.applied == [b"state", b"state"]  # done at the call, not at the await


@pytest.mark.parametrize("label", ["../../x", "", "a" * 65, "tab\there"])
def test_a_bad_label_is_refused_before_anything_is_sent(label: str) -> None:
    host = _Host()
    helpers = _helpers(host)
    with pytest.raises(InvalidArguments):
        helpers.checkpoint(label)
    with pytest.raises(InvalidArguments):
        helpers.restore(label)
    with pytest.raises(TypeError):
        helpers.checkpoint(7)  # type: ignore[arg-type]
    assert host.asked == []


def test_a_restore_whose_state_did_not_arrive_is_an_error_and_applies_nothing() -> None:
    host = _Host(state=None)
    with pytest.raises(ToolError, match="did not arrive"):
        _helpers(host).restore("a")
    assert host.applied == []
