"""Runs: one ``run_python`` execution that may outlive the request that started it.

Every ``run_python`` call is a :class:`Run` in the bridge's :class:`Runs`, executing in the
registry's task group (entered once, in the server's lifespan). The request that started it
waits for it and, most of the time, returns its result: nothing else changes. A run outlives its
request in three ways, each a view of the same object (see docs/long-runs.md):

* it became a **task** (the 2026-07-28 Tasks extension): the client polls ``tasks/get``, answers
  with ``tasks/update``, stops it with ``tasks/cancel``;
* it **yielded** (``run_python(yield_after=S)``): the model resumes or cancels it by its id;
* it asked a question on a connection without a back channel (2026-07-28): the call returned
  ``input_required`` with the run id sealed in ``requestState``, and the client's retry resumes it.

Questions (approvals of nested calls, elicitations and sampling relayed from upstream servers)
go through :class:`RunLink`: a waiting request with a back channel asks them at once, as before;
otherwise they wait in the run until a client answers (``input_required``), bounded by the
asker's own timeout.

A run belongs to the client that started it (its principal over HTTP): any other gets "unknown
run". Bounds: unfinished runs per client, finished runs kept per client (oldest dropped first,
each for :data:`KEEP_FINISHED` seconds) and the bytes their results hold (images above all, per
client and for the bridge), output kept per run.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

import anyio
import mcp_types as types
from anyio.abc import TaskGroup
from bridge_core.client_link import Capability, ClientLink
from bridge_core.errors import BridgeError

if TYPE_CHECKING:
    from bridge_core.sessions.types import ExecutionListener, ExecutionResult
    from bridge_protocol import Stream

__all__ = [
    "KEEP_FINISHED",
    "MAX_RUNS_PER_CLIENT",
    "Question",
    "Run",
    "AnswerRefused",
    "RunLimitExceeded",
    "RunState",
    "Runs",
    "UnknownRun",
    "kept_bytes",
    "shown_keys",
]

logger = logging.getLogger(__name__)

RunState = Literal["working", "input_required", "completed", "failed", "cancelled"]
FINISHED: frozenset[RunState] = frozenset({"completed", "failed", "cancelled"})

MAX_RUNS_PER_CLIENT = 16
"""Unfinished runs one client may have; past it a new call is refused (a model that starts long
runs and never collects them cannot make the bridge hold ever more sandboxes' work)."""
MAX_FINISHED_PER_CLIENT = 32
"""Finished runs kept per client for collection; past it the oldest one is dropped."""
MAX_RUNS = 1024
"""Runs the bridge holds for all its clients (HTTP clients without a token are one client per
MCP session: many of them must not add up without bound); past it the oldest finished ones are
dropped, and with none finished a new call is refused."""
KEEP_FINISHED = 600.0
"""Seconds a finished run's result stays available (the task's ``ttlMs``)."""
MAX_RUN_OUTPUT = 64 * 1024
"""Characters of a run's stdout kept for ``tasks/get`` and ``resume`` (its final result has the
whole output under the bridge's output cap)."""
MAX_QUESTIONS = 8
"""Questions one run may have waiting at once (each nested call asks one at a time)."""
MAX_KEPT_BYTES_PER_CLIENT = 64 * 1024 * 1024
"""Bytes of finished results one client's runs hold for collection (a result may carry 32 MiB
of images, held again base64-encoded once sent: 32 kept runs must not hold 2 GiB); past it the
client's oldest finished runs are dropped, its newest one always stays."""
MAX_KEPT_BYTES = 512 * 1024 * 1024
"""Bytes of finished results the bridge holds for all its clients; past it the oldest finished
runs are dropped, whoever they belong to."""


class UnknownRun(BridgeError):
    """No run of this client has that id (it never existed, ended long ago, or is another's)."""


class AnswerRefused(BridgeError):
    """A client's answers name no question the run waits for (answered already, or never)."""


class RunLimitExceeded(BridgeError):
    """The client has :data:`MAX_RUNS_PER_CLIENT` unfinished runs."""


QuestionRequest = types.ElicitRequest | types.CreateMessageRequest | types.ListRootsRequest


@dataclass(eq=False)
class Question:
    """A request the run's code needs answered by the client (an approval, a relayed question)."""

    key: str
    request: QuestionRequest
    answered: anyio.Event = field(default_factory=anyio.Event)
    answer: Any = None
    error: str | None = None
    """Why no answer came (the client failed or went away)."""
    asked: bool = False
    """A waiting request took it to its client over the back channel."""

    def wire(self) -> dict[str, Any]:
        """The ``inputRequests`` entry: the request as the client would have received it."""
        return self.request.model_dump(by_alias=True, mode="json", exclude_none=True)

    def settle(self, raw: Any) -> bool:
        """Answer with ``raw`` (a client's ``inputResponses`` entry); False if it does not fit."""
        kind: Any
        if isinstance(self.request, types.ElicitRequest):
            kind = types.ElicitResult
        elif isinstance(self.request, types.ListRootsRequest):
            kind = types.ListRootsResult
        elif self.request.params.tools:
            kind = types.CreateMessageResultWithTools
        else:
            kind = types.CreateMessageResult
        try:
            self.answer = raw if isinstance(raw, kind) else kind.model_validate(raw)
        except ValueError:
            return False
        self.answered.set()
        return True


def kept_bytes(result: ExecutionResult | types.CallToolResult | None) -> int:
    """What a finished run's result holds in memory, counted once for the result and once for
    its rendered wire form (images base64-encoded), which a task or a resume keeps too."""
    if result is None:
        return 0
    if isinstance(result, types.CallToolResult):  # held once: it is its own wire form
        return len(result.model_dump_json(by_alias=True, exclude_none=True))
    text = len(result.stdout) + len(result.stderr) + len(result.value or "")
    images = sum(len(image.data) for image in result.images)
    return 2 * text + images + images * 4 // 3


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Run:
    """One execution, its output so far, its questions and, once it ends, its result."""

    def __init__(self, run_id: str, owner: str | None, capabilities: frozenset[Capability]) -> None:
        self.id = run_id
        self.owner = owner
        self.capabilities = capabilities
        self.detached = False
        """The run outlives its request: a task, a yielded run, or paused on a question."""
        self.as_task = False
        self.yielded = False
        """The model has its id (a yield): it may resume or cancel it."""
        self.state: RunState = "working"
        self.created_at = _now()
        self.updated_at = self.created_at
        self.finished_at: float | None = None
        self.kept_bytes = 0
        """What its result holds in memory once it ended (see :func:`kept_bytes`)."""
        self.result: ExecutionResult | types.CallToolResult | None = None
        """The execution's result, or a direct tool call's."""
        self.wire_result: dict[str, Any] | None = None
        """The final result as sent (filled by whoever renders it)."""
        self.failure: str | None = None
        """Why the bridge could not run the code (no result)."""
        self.failure_kind = "BridgeError"
        """The failure's kind as the model reads it."""
        self.internal_failure = False
        """The bridge itself failed (a task's ``failed`` state); other failures (a session
        limit, a bad argument) are tool errors the model reads."""
        self.questions: OrderedDict[str, Question] = OrderedDict()
        self._output: deque[str] = deque()
        self._output_chars = 0
        self._dropped = 0
        """Characters of stdout dropped from the front (past :data:`MAX_RUN_OUTPUT`)."""
        self.shown = 0
        """Characters of stdout (counted from the start) already returned to the model."""
        self.listener: ExecutionListener | None = None
        """The waiting request's progress relay, while one waits."""
        self.log_link: ClientLink | None = None
        self._changed = anyio.Event()
        self._ended = anyio.Event()
        self._scope: anyio.CancelScope | None = None
        self._cancel_requested = False

    # -- output -----------------------------------------------------------------------------

    def record(self, text: str) -> None:
        self._output.append(text)
        self._output_chars += len(text)
        while self._output_chars - self._dropped > MAX_RUN_OUTPUT and self._output:
            head = self._output[0]
            excess = self._output_chars - self._dropped - MAX_RUN_OUTPUT
            if len(head) <= excess:
                self._output.popleft()
                self._dropped += len(head)
            else:
                self._output[0] = head[excess:]
                self._dropped += excess
        self._touch()

    @property
    def output_chars(self) -> int:
        """Characters of stdout written so far (including dropped ones)."""
        return self._output_chars

    def output_since(self, start: int) -> tuple[str, int]:
        """Stdout from character ``start`` on, and how many characters before it are gone."""
        kept = "".join(self._output)
        if start >= self._dropped:
            return kept[start - self._dropped :], 0
        return kept, self._dropped - start

    def output_tail(self, limit: int) -> str:
        kept = "".join(self._output)
        return kept[-limit:]

    # -- state ------------------------------------------------------------------------------

    def _touch(self) -> None:
        self.updated_at = _now()
        self._changed.set()
        self._changed = anyio.Event()

    @property
    def finished(self) -> bool:
        return self.state in FINISHED

    def pending(self) -> list[Question]:
        """Questions waiting for an answer that no request is asking right now."""
        return [q for q in self.questions.values() if not q.answered.is_set() and not q.asked]

    async def changed(self) -> None:
        """Return at the next change: output, a question, the end."""
        await self._changed.wait()

    async def ended(self) -> None:
        await self._ended.wait()

    def cancel(self) -> None:
        """Stop the code (the session manager interrupts it, then kills after its grace)."""
        if self.finished:
            return
        self._cancel_requested = True
        self.state = "cancelled"
        if self._scope is not None:
            self._scope.cancel()
        for question in self.questions.values():
            question.answered.set()  # its asker is being cancelled too
        self._touch()

    def return_question(self, question: Question) -> None:
        """The request asking ``question`` over its back channel went away unanswered (its
        client cancelled it, or timed out): the question waits again, for the next request."""
        question.asked = False
        if not question.answered.is_set():
            self._touch()

    def answer(self, responses: dict[str, Any]) -> list[str]:
        """Deliver a client's ``inputResponses``; return the keys that were not pending here."""
        unknown = []
        for key, raw in responses.items():
            question = self.questions.get(key)
            if question is None or question.answered.is_set() or not question.settle(raw):
                unknown.append(key)
        self._update_state()
        return unknown

    def _update_state(self) -> None:
        if self.finished:
            return
        waiting = any(not q.answered.is_set() for q in self.questions.values())
        self.state = "input_required" if waiting else "working"
        self._touch()

    async def ask(self, request: QuestionRequest) -> Any:
        """Put a question to the client and wait for its answer (the caller bounds the wait)."""
        if len(self.questions) >= MAX_QUESTIONS:
            raise RuntimeError("this run has too many questions waiting for the client")
        question = Question(secrets.token_urlsafe(9), request)
        self.questions[question.key] = question
        self._update_state()
        try:
            await question.answered.wait()
        finally:
            self.questions.pop(question.key, None)
            self._update_state()
        if question.answer is None:
            raise RuntimeError(question.error or "the run was cancelled before the client answered")
        return question.answer

    # -- running ----------------------------------------------------------------------------

    async def _execute(
        self, execution: Callable[[], Awaitable[ExecutionResult | types.CallToolResult]]
    ) -> None:
        with anyio.CancelScope() as scope:
            self._scope = scope
            if self._cancel_requested:
                scope.cancel()
            try:
                self.result = await execution()
            except anyio.get_cancelled_exc_class():
                raise
            except Exception as exc:  # the failure is the run's: its waiters report it
                if isinstance(exc, BridgeError):  # e.g. SessionLimitExceeded: names the setting
                    self.failure, self.failure_kind = str(exc), type(exc).__name__
                elif isinstance(exc, ValueError):  # the session manager's argument checks
                    self.failure, self.failure_kind = str(exc), "InvalidArguments"
                else:
                    logger.exception("run_python failed inside the bridge")
                    self.failure = f"{type(exc).__name__}: {exc}"
                    self.internal_failure = True
        if self.state != "cancelled":
            self.state = "failed" if self.internal_failure else "completed"
        self.kept_bytes = kept_bytes(self.result)
        self.finished_at = time.monotonic()
        self._touch()
        self._ended.set()


class RunLink:
    """The :class:`~bridge_core.client_link.ClientLink` of a run: questions go into the run."""

    def __init__(self, run: Run) -> None:
        self._run = run

    @property
    def identity(self) -> str | None:
        return self._run.owner

    def supports(self, capability: Capability) -> bool:
        return capability in self._run.capabilities

    async def elicit(self, params: types.ElicitRequestParams) -> types.ElicitResult:
        answer: types.ElicitResult = await self._run.ask(types.ElicitRequest(params=params))
        return answer

    async def create_message(
        self, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.CreateMessageResultWithTools:
        answer: types.CreateMessageResult = await self._run.ask(
            types.CreateMessageRequest(params=params)
        )
        return answer

    async def list_roots(self) -> types.ListRootsResult:
        answer: types.ListRootsResult = await self._run.ask(types.ListRootsRequest())
        return answer

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        link = self._run.log_link
        if link is not None:
            await link.log(params)


class RunListener:
    """The execution's listener: stdout kept in the run, live events to whoever waits."""

    def __init__(self, run: Run) -> None:
        self._run = run
        self.client = RunLink(run)

    async def on_output(self, stream: Stream, text: str) -> None:
        if stream == "stdout":
            self._run.record(text)
        listener = self._run.listener
        if listener is not None:
            await listener.on_output(stream, text)

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        listener = self._run.listener
        if listener is not None:
            await listener.on_progress(progress, total, message)


class Runs:
    """Every run of this bridge, by id; see the module docstring."""

    def __init__(self, task_group: TaskGroup) -> None:
        self._tg = task_group
        self._runs: dict[str, Run] = {}

    @classmethod
    @asynccontextmanager
    async def open(cls) -> AsyncIterator[Runs]:
        async with anyio.create_task_group() as tg:
            yield cls(tg)
            tg.cancel_scope.cancel()

    def __len__(self) -> int:
        return len(self._runs)

    def _prune(self, *, starting: bool = True) -> None:
        """Drop finished runs past their time, then the oldest ones past the bounds (a run a
        request is still answering from stays); ``starting``: room for one more run is made."""
        now = time.monotonic()
        finished = [r for r in self._runs.values() if r.finished_at is not None and not r.listener]
        finished.sort(key=lambda r: r.finished_at or 0.0)
        per_owner: dict[str | None, int] = {}
        owner_bytes: dict[str | None, int] = {}
        newest: dict[str | None, Run] = {}
        total_bytes = 0
        for run in finished:
            per_owner[run.owner] = per_owner.get(run.owner, 0) + 1
            owner_bytes[run.owner] = owner_bytes.get(run.owner, 0) + run.kept_bytes
            total_bytes += run.kept_bytes
            newest[run.owner] = run
        excess = len(self._runs) - MAX_RUNS + (1 if starting else 0)
        for run in finished:
            expired = now - (run.finished_at or now) > KEEP_FINISHED
            heavy = (
                owner_bytes[run.owner] > MAX_KEPT_BYTES_PER_CLIENT and newest[run.owner] is not run
            )
            if (
                expired
                or excess > 0
                or per_owner[run.owner] > MAX_FINISHED_PER_CLIENT
                or heavy
                or total_bytes > MAX_KEPT_BYTES
            ):
                self._runs.pop(run.id, None)
                per_owner[run.owner] -= 1
                owner_bytes[run.owner] -= run.kept_bytes
                total_bytes -= run.kept_bytes
                excess -= 1

    def start(
        self,
        owner: str | None,
        capabilities: frozenset[Capability],
        execution: Callable[[ExecutionListener], Awaitable[ExecutionResult | types.CallToolResult]],
    ) -> Run:
        """Start ``execution`` as a new run of ``owner``; raises :class:`RunLimitExceeded`."""
        self._prune()
        if len(self._runs) >= MAX_RUNS:
            raise RunLimitExceeded(
                f"the bridge holds {len(self._runs)} unfinished runs of its clients (the limit "
                f"is {MAX_RUNS}); try again when some have ended"
            )
        live = sum(1 for r in self._runs.values() if r.owner == owner and not r.finished)
        if live >= MAX_RUNS_PER_CLIENT:
            raise RunLimitExceeded(
                f"this client already has {live} runs that have not finished (the limit is "
                f"{MAX_RUNS_PER_CLIENT}); wait for them, or stop one with "
                "run_python(cancel=RUN_ID) or tasks/cancel"
            )
        run = Run(secrets.token_urlsafe(18), owner, capabilities)
        self._runs[run.id] = run
        listener = RunListener(run)
        self._tg.start_soon(self._execute, run, lambda: execution(listener))
        return run

    async def _execute(
        self, run: Run, execution: Callable[[], Awaitable[ExecutionResult | types.CallToolResult]]
    ) -> None:
        await run._execute(execution)
        # Its result is held from now on: the bounds on what finished runs hold apply at once,
        # not at the next start (a client's 16 runs may all end while it starts none).
        self._prune(starting=False)

    def get(self, run_id: object, owner: str | None) -> Run:
        """The run ``run_id`` of ``owner``; raises :class:`UnknownRun` otherwise."""
        run = self._runs.get(run_id) if isinstance(run_id, str) else None
        if run is None or run.owner != owner:
            raise UnknownRun(
                f"unknown run {_shown_id(run_id)}: no run of this client has that id (a "
                f"finished run is kept {KEEP_FINISHED:g} s)"
            )
        return run

    def forget(self, run: Run) -> None:
        """Drop a run whose result its waiter returned, if nobody else can ask for it (a task's
        client and a model that yielded can)."""
        if not (run.as_task or run.yielded):
            self._runs.pop(run.id, None)


def shown_keys(keys: list[str]) -> str:
    """Some of the ``inputResponses`` keys a client sent, for an error (each cut: a key is the
    client's own text, of any length)."""
    return ", ".join(_shown_id(key) for key in keys[:5])


def _shown_id(run_id: object) -> str:
    text = run_id if isinstance(run_id, str) else type(run_id).__name__
    return repr(text[:40] + ("…" if len(text) > 40 else ""))
