"""A sandbox loading a saved state: it imports the modules the state's hint names as soon as the
first ``Restore`` frame arrives, while the rest still comes; a hint naming a module that does not
exist changes nothing; a state of the first format (no hint) loads as before."""

from __future__ import annotations

import io
import pickle
import struct
import tarfile

from bridge_protocol import Restore, Restored

from .conftest import FakeHost  # type: ignore[import-not-found]  # pytest (importlib mode) resolves it


def _empty_tar() -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w|"):
        pass
    return out.getvalue()


def _state(values: dict[str, object], hint: list[str]) -> bytes:
    data = pickle.dumps(values, protocol=5)
    names = "\n".join(hint).encode()
    return (
        b"MCPSNAP2"
        + struct.pack(">H", len(names))
        + names
        + struct.pack(">Q", len(data))
        + data
        + _empty_tar()
    )


def _restored(host: FakeHost, restore_id: str) -> Restored:
    message = host.wait_for(Restored)
    assert isinstance(message, Restored)
    assert message.restore_id == restore_id
    return message


def test_the_hinted_modules_are_imported_before_the_state_is_whole(host: FakeHost) -> None:
    assert host.execute("import sys\n'colorsys' in sys.modules").result.value == "False"
    state = _state({"x": 41}, ["no_such_module_anywhere", "colorsys"])
    head, rest = state[:60], state[60:]  # the header and hint whole, not the pickle
    host.send(Restore("r1", data=head))
    # Queued behind the imports the first frame started, ahead of the state's end: it sees them.
    during = host.execute("'colorsys' in sys.modules, 'no_such_module_anywhere' in sys.modules")
    assert during.result.value == "(True, False)"
    host.send(Restore("r1", data=rest, last=True))
    assert _restored(host, "r1").error == ""
    assert host.execute("x + 1").result.value == "42"


def test_a_state_of_the_first_format_loads_through_the_client(host: FakeHost) -> None:
    data = pickle.dumps({"y": [1, 2]}, protocol=5)
    state = b"MCPSNAP1" + struct.pack(">Q", len(data)) + data + _empty_tar()
    host.send(Restore("r1", data=state[:10]))
    host.send(Restore("r1", data=state[10:], last=True))
    assert _restored(host, "r1").error == ""
    assert host.execute("y").result.value == "[1, 2]"


def test_a_state_needing_a_module_that_is_gone_reports_what_failed(host: FakeHost) -> None:
    # A pickle referring to a module the sandbox lacks: the hint's import fails quietly, and
    # unpickling says which module, as it did without a hint.
    forged = b"\x80\x05\x8c\x08gone_mod\x94\x8c\x01f\x94\x93\x94."  # gone_mod.f
    names = b"gone_mod"
    state = (
        b"MCPSNAP2"
        + struct.pack(">H", len(names))
        + names
        + struct.pack(">Q", len(forged))
        + forged
        + _empty_tar()
    )
    host.send(Restore("r1", data=state[:30]))
    host.send(Restore("r1", data=state[30:], last=True))
    error = _restored(host, "r1").error
    assert "gone_mod" in error
    assert "ModuleNotFoundError" in error
    assert host.execute("1 + 1").result.value == "2"
