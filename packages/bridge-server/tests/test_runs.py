"""The run registry's rules without a sandbox: ownership, bounds, output and results kept,
questions."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import mcp_types as types
import pytest
from bridge_core.sessions.types import ExecutionResult, Image
from mcp_code_execution_mode import _run_calls, _run_registry
from mcp_code_execution_mode._run_registry import (
    MAX_KEPT_BYTES,
    MAX_KEPT_BYTES_PER_CLIENT,
    MAX_RUNS_PER_CLIENT,
    RunLimitExceeded,
    Runs,
    UnknownRun,
    shown_keys,
)
from mcp_code_execution_mode._runs import MAX_RUN_OUTPUT

pytestmark = pytest.mark.anyio


def _forever() -> Any:
    async def execution(listener: Any) -> ExecutionResult:
        await anyio.sleep_forever()
        raise AssertionError

    return execution


def _printing(*texts: str) -> Any:
    async def execution(listener: Any) -> ExecutionResult:
        for text in texts:
            await listener.on_output("stdout", text)
        return ExecutionResult(status="ok", session="default", stdout="".join(texts))

    return execution


async def test_a_run_belongs_to_its_client_and_another_gets_unknown_run() -> None:
    async with Runs.open() as runs:
        run = runs.start("alice", frozenset(), _forever())
        assert runs.get(run.id, "alice") is run
        for stranger in ("bob", None):
            with pytest.raises(UnknownRun, match="unknown run"):
                runs.get(run.id, stranger)
        with pytest.raises(UnknownRun):
            runs.get(12345, "alice")


async def test_unfinished_runs_per_client_are_bounded_and_the_refusal_says_what_to_do() -> None:
    async with Runs.open() as runs:
        for _ in range(MAX_RUNS_PER_CLIENT):
            runs.start("alice", frozenset(), _forever())
        with pytest.raises(RunLimitExceeded, match=r"limit is 16.*cancel"):
            runs.start("alice", frozenset(), _forever())
        runs.start("bob", frozenset(), _forever())  # another client is not held back


async def test_finished_runs_are_dropped_oldest_first_past_the_bounds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_run_registry, "MAX_RUNS", 40)
    async with Runs.open() as runs:
        started = []
        for i in range(100):
            run = runs.start(f"anonymous-{i}", frozenset(), _printing("x"))
            run.detached = True
            started.append(run)
            await run.ended()
        assert len(runs) <= 40
        runs.get(started[-1].id, "anonymous-99")  # the newest stays
        with pytest.raises(UnknownRun):
            runs.get(started[0].id, "anonymous-0")


async def test_expired_finished_runs_are_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    async with Runs.open() as runs:
        run = runs.start("alice", frozenset(), _printing("x"))
        run.detached = True
        await run.ended()
        monkeypatch.setattr(_run_registry, "KEEP_FINISHED", -1.0)
        runs.start("alice", frozenset(), _printing("y"))
        with pytest.raises(UnknownRun):
            runs.get(run.id, "alice")


async def test_output_kept_per_run_is_bounded_and_says_what_was_dropped() -> None:
    chunk = "y" * 1000
    async with Runs.open() as runs:
        run = runs.start(None, frozenset(), _printing(*[chunk] * 200))
        await run.ended()
        text, lost = run.output_since(0)
        assert len(text) == MAX_RUN_OUTPUT
        assert lost == 200 * 1000 - MAX_RUN_OUTPUT
        assert run.output_since(run.output_chars - 10) == ("y" * 10, 0)


async def test_a_question_waits_in_the_run_until_answered() -> None:
    async with Runs.open() as runs:
        answers: list[types.ElicitResult] = []

        async def asking(listener: Any) -> ExecutionResult:
            params = types.ElicitRequestFormParams(message="ok?", requested_schema={})
            answers.append(await listener.client.elicit(params))
            return ExecutionResult(status="ok", session="default")

        run = runs.start(None, frozenset({"elicitation"}), asking)
        with anyio.fail_after(5):
            while not run.pending():
                await run.changed()
        assert run.state == "input_required"
        (question,) = run.pending()
        assert question.wire()["method"] == "elicitation/create"
        assert run.answer({"nope": {}}) == ["nope"]
        assert run.answer({question.key: {"action": "decline"}}) == []
        await run.ended()
    ended: str = run.state  # changed by the run's task while this one waited
    assert ended == "completed"
    assert answers[0].action == "decline"


async def test_cancel_stops_the_code_and_is_idempotent() -> None:
    async with Runs.open() as runs:
        run = runs.start(None, frozenset(), _forever())
        await anyio.lowlevel.checkpoint()
        run.cancel()
        run.cancel()
        with anyio.fail_after(5):
            await run.ended()
    assert run.state == "cancelled"
    assert run.result is None


def _imaging(size: int) -> Any:
    data = bytes(size)  # one object shared by every result: the test itself holds little

    async def execution(listener: Any) -> ExecutionResult:
        return ExecutionResult(status="ok", session="default", images=(Image("image/png", data),))

    return execution


async def test_finished_results_are_bounded_in_bytes_and_each_clients_newest_stays() -> None:
    image = 30 * 1024 * 1024  # near a result's own image bound (32 MiB)
    async with Runs.open() as runs:
        kept = []
        for _ in range(8):
            run = runs.start("alice", frozenset(), _imaging(image))
            run.as_task = True  # never collected: the bridge holds its result
            await run.ended()
            await anyio.lowlevel.checkpoint()  # the registry's end-of-run bookkeeping
            kept.append(run)
        held = [r for r in kept if _held(runs, r)]
        assert sum(r.kept_bytes for r in held) <= MAX_KEPT_BYTES_PER_CLIENT + kept[-1].kept_bytes
        assert runs.get(kept[-1].id, "alice") is kept[-1]  # the newest is there to collect
        with pytest.raises(UnknownRun):
            runs.get(kept[0].id, "alice")
        # Many clients together: the bridge's own bound.
        others = []
        for i in range(40):
            run = runs.start(f"client-{i}", frozenset(), _imaging(image))
            run.as_task = True
            await run.ended()
            await anyio.lowlevel.checkpoint()
            others.append(run)
        total = sum(r.kept_bytes for r in [*kept, *others] if _held(runs, r))
        assert total <= MAX_KEPT_BYTES
        assert _held(runs, others[-1])


def _held(runs: Runs, run: Any) -> bool:
    try:
        return runs.get(run.id, run.owner) is run
    except UnknownRun:
        return False


class _AskingLink:
    """A request's link whose client never answers (its elicitation hangs)."""

    can_send_request = True

    def __init__(self) -> None:
        self.asked = anyio.Event()

    async def elicit(self, params: Any) -> Any:
        self.asked.set()
        await anyio.sleep_forever()


class _Relay:
    async def on_output(self, stream: Any, text: str) -> None: ...

    async def on_progress(self, progress: float, total: float | None, message: Any) -> None: ...


async def test_a_question_whose_asking_request_went_away_is_asked_by_the_next_request() -> None:
    async with Runs.open() as runs:

        async def asking(listener: Any) -> ExecutionResult:
            params = types.ElicitRequestFormParams(message="ok?", requested_schema={})
            await listener.client.elicit(params)
            return ExecutionResult(status="ok", session="default")

        run = runs.start(None, frozenset({"elicitation"}), asking)
        run.detached = run.yielded = True  # a yielded run, being resumed
        relay: Any = _Relay()
        first: Any = _AskingLink()  # stands for a RequestLink
        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(_run_calls._wait, run, first, relay, None)
                await first.asked.wait()
                tg.cancel_scope.cancel()  # the client's request timeout: the resume is cancelled
        # The next resume asks the question again, at once.
        second: Any = _AskingLink()
        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(_run_calls._wait, run, second, relay, None)
                await second.asked.wait()
                tg.cancel_scope.cancel()
        assert [q.asked for q in run.questions.values()] == [False]
        run.cancel()


def test_input_response_keys_named_in_an_error_are_cut() -> None:
    shown = shown_keys(["k" * 100_000] * 10)
    assert len(shown) < 5 * 50
