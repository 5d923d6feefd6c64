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
run" (the registry, :mod:`._run_registry`, with its bounds). Bounds here: output kept per run,
questions waiting per run.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

import anyio
import mcp_types as types
from bridge_core.client_link import Capability, ClientLink
from bridge_core.errors import BridgeError

if TYPE_CHECKING:
    from bridge_core.sessions.types import ExecutionListener, ExecutionResult
    from bridge_protocol import Stream

__all__ = [
    "MAX_QUESTIONS",
    "MAX_RUN_OUTPUT",
    "AnswerRefused",
    "Question",
    "Run",
    "RunLink",
    "RunListener",
    "RunState",
    "kept_bytes",
]

logger = logging.getLogger(__name__)

RunState = Literal["working", "input_required", "completed", "failed", "cancelled"]
FINISHED: frozenset[RunState] = frozenset({"completed", "failed", "cancelled"})

MAX_RUN_OUTPUT = 64 * 1024
"""Characters of a run's stdout kept for ``tasks/get`` and ``resume`` (its final result has the
whole output under the bridge's output cap)."""
MAX_QUESTIONS = 8
"""Questions one run may have waiting at once (each nested call asks one at a time)."""


class AnswerRefused(BridgeError):
    """A client's answers name no question the run waits for (answered already, or never)."""


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
