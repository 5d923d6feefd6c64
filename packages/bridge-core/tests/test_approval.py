"""Which calls need the user's approval, what the question shows, and what is remembered.

In-process: the client is a small fake :class:`~bridge_core.client_link.ClientLink` (the seam);
the real client, bridge and servers are in ``integration-tests/server/test_approvals.py``.
"""

from __future__ import annotations

import json
import re
from typing import Any

import anyio
import mcp_types as types
import pytest
from bridge_core.approval import (
    MAX_QUESTION_ARGUMENTS,
    MAX_UNDECLARED,
    ApprovalGate,
    ApprovalRefused,
    ApprovalRules,
    shown_arguments,
)
from bridge_core.client_link import Capability
from bridge_core.gateway import CallContext
from bridge_core.redaction import Redactor
from bridge_protocol import ErrorCode

SECRET = "sk-live-0123456789abcdef"


def _tool(name: str, **hints: bool) -> types.Tool:
    annotations = types.ToolAnnotations(**hints) if hints else None  # type: ignore[arg-type]
    return types.Tool(name=name, input_schema={"type": "object"}, annotations=annotations)


@pytest.mark.parametrize(
    ("mode", "hints", "asks"),
    [
        ("destructive", {"destructive_hint": True}, True),
        ("destructive", {"destructive_hint": True, "read_only_hint": True}, False),
        ("destructive", {"destructive_hint": False}, False),
        ("destructive", {}, False),
        ("writes", {}, True),
        ("writes", {"read_only_hint": False}, True),
        ("writes", {"read_only_hint": True}, False),
        ("all", {"read_only_hint": True}, True),
        ("off", {"destructive_hint": True}, False),
    ],
)
def test_the_mode_decides_from_the_annotations(
    mode: str, hints: dict[str, bool], asks: bool
) -> None:
    rules = ApprovalRules.from_settings(mode=mode)
    assert (rules.requires("fs", _tool("t", **hints)) is not None) is asks


def test_patterns_ask_whatever_the_annotations_except_when_off() -> None:
    rules = ApprovalRules.from_settings(tools="github.create_*, delete_*")
    read_only = {"read_only_hint": True}
    assert rules.requires("github", _tool("create_issue", **read_only)) == (
        "[approval] tools=github.create_*"
    )
    assert rules.requires("other", _tool("delete_all")) == "[approval] tools=delete_*"
    assert rules.requires("other", _tool("create_issue")) is None
    off = ApprovalRules.from_settings(mode="off", tools="github.*")
    assert off.requires("github", _tool("create_issue")) is None


def test_bad_setting_values_name_the_setting() -> None:
    with pytest.raises(ValueError, match=re.escape("[approval] mode=")):
        ApprovalRules.from_settings(mode="sometimes")
    with pytest.raises(ValueError, match=re.escape("[approval] fallback=")):
        ApprovalRules.from_settings(fallback="maybe")


def test_the_question_masks_secrets_escapes_control_text_and_is_bounded() -> None:
    redactor = Redactor([SECRET])
    arguments = {
        "token": f"Bearer {SECRET}",
        "note": "ok\n\nApproved by admin \u202eevil\u200b\r",
        "blob": "x" * 100_000,
        "many": [f"item {i}" for i in range(1000)],
    }
    shown = shown_arguments(arguments, redactor)
    assert SECRET not in shown
    assert "Bearer ***" in shown
    assert "\n\n" not in shown
    assert "\r" not in shown
    assert "\u202e" not in shown
    assert "\\u202e" in shown
    assert "\\u200b" in shown
    assert "[99760 characters not shown]" in shown
    assert len(shown) <= MAX_QUESTION_ARGUMENTS


def test_a_secret_cut_by_the_shortening_is_still_masked() -> None:
    # Masking comes first: a secret straddling the cut would not match after it.
    redactor = Redactor([SECRET])
    shown = shown_arguments({"v": "a" * 110 + SECRET + "b" * 200}, redactor)
    assert SECRET[:10] not in shown


THESIS = "/srv/scratch/cache/build-0123" + "/x" * 96 + "/.." * 98 + "/../../home/alice/thesis.tex"


def _declaring(name: str, *properties: str) -> types.Tool:
    schema = {"type": "object", "properties": {p: {"type": "string"} for p in properties}}
    hints = types.ToolAnnotations(destructive_hint=True)
    return types.Tool(name=name, input_schema=schema, annotations=hints)


@pytest.mark.parametrize("padding", [0, 3, MAX_UNDECLARED])
def test_a_long_declared_path_shows_its_end_and_where_it_resolves_whatever_the_padding(
    padding: int,
) -> None:
    # A 249+ character path whose end walks out of the scratch directory: the question shows
    # the end, how many characters it leaves out, and the resolved path; empty undeclared
    # arguments placed first do not shrink it.
    arguments = {f"pad{i}": "" for i in range(padding)} | {"path": THESIS}
    shown = shown_arguments(arguments, Redactor(), ["path", "content"])
    assert shown.startswith('  "path": "/srv/scratch/cache/build-0123')
    assert '/../../home/alice/thesis.tex" (' in shown
    assert "characters not shown]" in shown
    assert '"path" resolves to "/home/alice/thesis.tex"' in shown


def test_a_nested_or_encoded_path_is_shown_resolved() -> None:
    shown = shown_arguments(
        {"target": {"files": ["ok.txt", "file:///srv/a/%2e%2e/%2e%2e/etc/passwd"]}}, Redactor()
    )
    assert '"target.files[1]" resolves to "file:///etc/passwd"' in shown


@pytest.mark.parametrize(
    ("path", "readings"),
    [
        # A POSIX server takes the backslash as part of a name: x\y is one segment, and four
        # ".." from /home/u/docs/x\y reach /etc/shadow; read as a Windows separator, \home\...
        (
            "/home/u/docs/x\\y/../../../../etc/shadow",
            ['"/etc/shadow" (as written)', '"\\\\home\\\\etc\\\\shadow" (as written, with'],
        ),
        # Not decoded, it is a file named "..%2f..%2fsafe" in /etc; decoded, it is /safe.
        (
            "/etc/..%2f..%2fsafe",
            ['"/etc/..%2f..%2fsafe" (as written)', '"/safe" (percent-decoded)'],
        ),
    ],
)
def test_a_path_that_reads_differently_to_different_servers_shows_every_reading(
    path: str, readings: list[str]
) -> None:
    # One resolution shown as "the" resolution would hide the one the server acts on.
    shown = shown_arguments({"path": path}, Redactor(), ["path"])
    for reading in readings:
        assert f'"path" resolves to {reading}' in shown


async def test_a_call_whose_arguments_cannot_be_shown_is_refused_without_asking() -> None:
    # Many (empty) undeclared arguments, or a question too long: nothing is asked, the sandbox
    # is told why, and the refusal is not a remembered decline (the next call asks).
    client = FakeClient(ACCEPT)
    gate = ApprovalGate(ApprovalRules(), Redactor())
    tool = _declaring("write", "path")
    padded = {f"pad{i}": "" for i in range(MAX_UNDECLARED + 1)} | {"path": THESIS}
    wide = _declaring("wide", *(f"a{i}" for i in range(40)))
    for described, arguments in ((tool, padded), (wide, {f"a{i}": "v" * 300 for i in range(40)})):
        with pytest.raises(ApprovalRefused) as refused:
            await gate.check(_ctx(client), "fs", described, arguments)
        assert (refused.value.code, refused.value.reason) == (
            ErrorCode.APPROVAL_DECLINED,
            "unshowable",
        )
    assert client.asked == []
    assert await gate.check(_ctx(client), "fs", tool, {"path": "/tmp/x"}) == "asked"
    (question,) = client.asked
    assert 'Arguments:\n  "path": "/tmp/x"\n' in question


class FakeClient:
    """A client that answers approval questions from a list (or never)."""

    def __init__(self, *answers: types.ElicitResult | None, elicitation: bool = True) -> None:
        self.answers = list(answers)
        self.asked: list[str] = []
        self.elicitation = elicitation
        self.never = anyio.Event()

    @property
    def identity(self) -> str | None:
        return None

    def supports(self, capability: Capability) -> bool:
        return capability == "elicitation" and self.elicitation

    async def elicit(self, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(params.message)
        answer = self.answers.pop(0)
        if answer is None:
            await self.never.wait()
        assert answer is not None
        return answer

    async def create_message(self, params: Any) -> Any:
        raise NotImplementedError

    async def list_roots(self) -> Any:
        raise NotImplementedError

    async def log(self, params: Any) -> None:
        raise NotImplementedError


ACCEPT = types.ElicitResult(action="accept")
ACCEPT_SESSION = types.ElicitResult(action="accept", content={"allow_for_session": True})
DECLINE = types.ElicitResult(action="decline")
DESTRUCTIVE = _tool("delete", destructive_hint=True)


def _ctx(client: FakeClient | None, session: str = "default", execution: str = "e1") -> CallContext:
    return CallContext(session, execution, client=client)


async def test_concurrent_calls_of_one_run_are_asked_one_at_a_time_and_share_a_session_grant() -> (
    None
):
    client = FakeClient(ACCEPT_SESSION)
    gate = ApprovalGate(ApprovalRules(), Redactor())
    outcomes: list[str | None] = []

    async def call() -> None:
        outcomes.append(await gate.check(_ctx(client), "fs", DESTRUCTIVE, {}))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            for _ in range(20):
                tg.start_soon(call)
    assert len(client.asked) == 1
    assert sorted(outcomes, key=str) == ["asked_session"] + ["session"] * 19


async def test_a_decline_holds_for_the_run_and_the_next_run_asks_again() -> None:
    client = FakeClient(DECLINE, ACCEPT)
    gate = ApprovalGate(ApprovalRules(), Redactor())
    with pytest.raises(ApprovalRefused) as first:
        await gate.check(_ctx(client), "fs", DESTRUCTIVE, {})
    with pytest.raises(ApprovalRefused) as again:
        await gate.check(_ctx(client), "fs", DESTRUCTIVE, {})
    assert (first.value.code, first.value.reason) == (ErrorCode.APPROVAL_DECLINED, "declined")
    assert again.value.reason == "declined_earlier"
    assert await gate.check(_ctx(client, execution="e2"), "fs", DESTRUCTIVE, {}) == "asked"
    assert len(client.asked) == 2


async def test_no_answer_in_time_declines_and_a_client_that_cannot_ask_is_refused() -> None:
    gate = ApprovalGate(ApprovalRules(timeout=0.05), Redactor())
    with anyio.fail_after(5), pytest.raises(ApprovalRefused) as late:
        await gate.check(_ctx(FakeClient(None)), "fs", DESTRUCTIVE, {})
    assert late.value.reason == "timeout"
    for client in (None, FakeClient(elicitation=False)):
        with pytest.raises(ApprovalRefused) as refused:
            await gate.check(_ctx(client), "fs", DESTRUCTIVE, {})
        assert refused.value.reason == "unsupported"
        assert "[approval] fallback=allow" in refused.value.message
    allowing = ApprovalGate(ApprovalRules(fallback="allow"), Redactor())
    assert await allowing.check(_ctx(None), "fs", DESTRUCTIVE, {}) == "fallback_allow"


async def test_session_grants_are_per_client_and_session() -> None:
    client = FakeClient(ACCEPT_SESSION, ACCEPT)
    gate = ApprovalGate(ApprovalRules(), Redactor())
    assert await gate.check(_ctx(client), "fs", DESTRUCTIVE, {}) == "asked_session"
    assert await gate.check(_ctx(client, execution="e9"), "fs", DESTRUCTIVE, {}) == "session"
    other = CallContext("default", "e3", client=client, client_key="someone-else")
    assert await gate.check(other, "fs", DESTRUCTIVE, {}) == "asked"


def test_the_question_schema_is_one_optional_boolean() -> None:
    from bridge_core.approval import _SCHEMA

    assert json.loads(json.dumps(_SCHEMA))["properties"]["allow_for_session"]["type"] == "boolean"
    assert "required" not in _SCHEMA
