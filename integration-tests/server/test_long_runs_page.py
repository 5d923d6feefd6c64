"""The exchanges shown in docs/long-runs.md against the real bridge, so the page cannot drift.

A ``text`` block of the page whose first line is ``→ tools/call run_python ARGUMENTS`` is an
exchange. Its ``→ tools/call run_python`` lines are JSON, and run as they are (a run id the page
cuts is the real one):

* ``code`` without ``yield_after``: a call of a Tasks client, polled with ``tasks/get`` to its end;
* ``code`` with ``yield_after``: a yielded run, resumed as the block's lines do (and on, should a
  slower machine need more looks);
* ``cancel``: the yielded block's code started again, and cancelled after its first yield.

What the block's ``←`` lines show must be what the bridge returned in that exchange: every field
name; every value that is a lowercase word, an integer or a boolean (states, statuses, types),
with its field; every line of a ``text`` (``…`` stands for any text, an id cut to its first
characters for any id, and the seconds of "after N s" for any); every ``statusMessage`` as the
task's output so far, in whole lines. The task handle shows every field the bridge's has. Other
blocks of the page are left to the other tests (the ``input_required`` round:
``test_long_run_questions.py``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from .conftest import REPO
from .long_run_clients import Tasks, bridge_client

pytestmark = pytest.mark.container

PAGE = REPO / "docs" / "long-runs.md"
CALL = "→ tools/call run_python "
ELIDED = "…"
_BLOCK = re.compile(r"```text\n(.*?)```", re.S)
_KEY = re.compile(r'"(\w+)":')
_LITERAL = re.compile(r'"(\w+)": ("[a-z_]+"|true|false|\d+)(?=[,}\]\s])')
_STRING = re.compile(r'"(text|statusMessage)": ("(?:[^"\\]|\\.)*")')
_SECONDS = re.compile(r"after \d+(?:\.\d+)? s\b")
_CUT_ID = re.compile(r"\b[\w-]{4}…")
"""An id the page cuts to its first characters: any id."""


@dataclass(frozen=True)
class Exchange:
    calls: list[dict[str, Any]]
    """The arguments of its ``→ tools/call run_python`` lines, in order."""
    answers: list[str]
    """Its ``←`` answers as the page shows them (continuation lines joined)."""

    @property
    def kind(self) -> str:
        first = self.calls[0]
        if "cancel" in first:
            return "cancel"
        return "yield" if "yield_after" in first else "task"


def _exchanges() -> dict[str, Exchange]:
    found: dict[str, Exchange] = {}
    for block in _BLOCK.findall(PAGE.read_text(encoding="utf-8")):
        lines = block.splitlines()
        if not lines or not lines[0].startswith(CALL):
            continue
        calls = [json.loads(line.removeprefix(CALL)) for line in lines if line.startswith(CALL)]
        answers: list[str] = []
        answering = False
        for line in lines:
            if line.startswith("←"):
                answers.append(line)
            elif line.startswith(" ") and answering:
                answers[-1] += "\n" + line
            answering = line.startswith("←") or (answering and line.startswith(" "))
        exchange = Exchange(calls, answers)
        assert exchange.kind not in found, f"two {exchange.kind} exchanges on the page"
        found[exchange.kind] = exchange
    return found


def _wire(result: types.CallToolResult) -> dict[str, Any]:
    return result.model_dump(by_alias=True, mode="json", exclude_none=True)


@dataclass
class Returned:
    """What the bridge returned in one exchange: field names, plain values, text lines."""

    keys: set[str]
    pairs: set[tuple[str, str]]
    lines: list[str]

    @classmethod
    def of(cls, answers: list[dict[str, Any]]) -> Returned:
        returned = cls(set(), set(), [])
        for answer in answers:
            returned._walk(answer)
        return returned

    def _walk(self, value: Any) -> None:
        if isinstance(value, list):
            for item in value:
                self._walk(item)
        if not isinstance(value, dict):
            return
        for key, item in value.items():
            self.keys.add(key)
            if isinstance(item, str | bool | int):
                self.pairs.add((key, json.dumps(item)))
            if key == "text" and isinstance(item, str):
                self.lines.extend(item.splitlines())
            self._walk(item)


def _matches(shown: str, real: str) -> bool:
    """``real`` is ``shown``, where ``…`` stands for any text, as do a cut id and the seconds of
    "after N s"."""
    shown, real = (
        _SECONDS.sub("after N s", _CUT_ID.sub(ELIDED, shown)),
        _SECONDS.sub("after N s", real),
    )
    pattern = ".*?".join(re.escape(part) for part in shown.split(ELIDED))
    return re.fullmatch(pattern, real, re.S) is not None


def _check(exchange: Exchange, answers: list[dict[str, Any]], output: str = "") -> None:
    """Everything the exchange's answers show is in ``answers``; ``output``: the task's whole
    output, of which a ``statusMessage`` shows the start."""
    returned = Returned.of(answers)
    shown = "\n".join(exchange.answers)
    assert set(_KEY.findall(shown)) <= returned.keys, set(_KEY.findall(shown)) - returned.keys
    for key, literal in _LITERAL.findall(shown):
        assert (key, json.dumps(json.loads(literal))) in returned.pairs, (key, literal)
    so_far = [output[: i + 1] for i, c in enumerate(output) if c == "\n"]
    for key, literal in _STRING.findall(shown):
        text = json.loads(literal)
        if key == "text":
            for line in text.splitlines():
                assert any(_matches(line, real) for real in returned.lines), (line, returned.lines)
        else:
            assert any(_matches(text, start) for start in so_far), (text, output)


async def _yielded(client: Client, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    first = await client.call_tool("run_python", calls[0])
    assert first.structured_content is not None
    run_id = first.structured_content["run_id"]
    answers = [_wire(first)]
    looks = [args | {"resume": run_id} for args in calls[1:]]
    assert all(set(args) == {"resume", "yield_after"} for args in looks), calls
    with anyio.fail_after(120):
        for args in looks:
            answers.append(_wire(await client.call_tool("run_python", args)))
        while answers[-1]["structuredContent"]["state"] == "running":
            answers.append(_wire(await client.call_tool("run_python", looks[-1])))
    return answers


async def test_the_exchanges_of_the_long_runs_page_are_what_the_bridge_returns(
    tmp_path: Path, sandbox_image: str
) -> None:
    exchanges = _exchanges()
    assert sorted(exchanges) == ["cancel", "task", "yield"]
    task, yielded, cancel = exchanges["task"], exchanges["yield"], exchanges["cancel"]
    (cancelled_args,) = cancel.calls
    assert set(cancelled_args) == {"cancel"}
    tasks = Tasks()
    async with bridge_client(tmp_path, extensions=[tasks]) as client:
        (task_args,) = task.calls
        result = await client.call_tool("run_python", task_args)
        yield_answers = await _yielded(client, yielded.calls)
        started = await client.call_tool(
            "run_python", {"code": yielded.calls[0]["code"], "yield_after": 1}
        )
        assert started.structured_content is not None
        run_id = started.structured_content["run_id"]
        stopped = await client.call_tool("run_python", {"cancel": run_id})
    assert result.is_error is False
    (handle,) = tasks.created
    handle.pop("_meta", None)
    _check(task, [handle, *tasks.seen], output=tasks.seen[-1]["statusMessage"])
    # The handle as the page shows it has every field the bridge's has.
    assert set(_KEY.findall(task.answers[0])) == set(handle), set(handle)
    _check(yielded, yield_answers)
    _check(cancel, [_wire(stopped)])
    # What the page is there to show, still shown.
    shown = set(_LITERAL.findall("\n".join(a for e in exchanges.values() for a in e.answers)))
    for pair in ("running", "done", "cancelled"):
        assert ("state", f'"{pair}"') in shown, pair
    for pair in ("working", "completed"):
        assert ("status", f'"{pair}"') in shown, pair
    assert '"run_id":' in "\n".join(yielded.answers + cancel.answers)
