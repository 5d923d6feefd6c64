"""The user's approval of nested tool calls, asked through the MCP client (elicitation).

Which calls need it (:class:`ApprovalRules`, from four settings):

- ``[approval] mode``: ``destructive`` (default: tools annotated ``destructiveHint: true``
  and not ``readOnlyHint: true``), ``writes`` (every tool not annotated ``readOnlyHint: true``,
  the MCP spec's own reading of a tool without annotations), ``all``, or ``off``;
- ``[approval] tools``: ``server.tool`` patterns (as in the policy lists) that always
  need it, whatever their annotations (annotations are the upstream server's hints);
- ``[approval] timeout``: how long the user has to answer; no answer declines;
- ``[approval] fallback``: ``refuse`` (default) or ``allow``, for a client that cannot
  ask (no elicitation capability).

The decision is made and kept on the host only: the sandbox sends a plain ``call`` frame and gets
a result or an ``APPROVAL_DECLINED`` fault; there is no frame by which it could claim an approval.
Questions of one execution are asked one at a time (a ``gather`` of twenty deletions is twenty
questions in a row, not twenty dialogs at once), a decline is remembered for the rest of that
execution (a loop cannot pester the user), and "allow for this session" is remembered per client
and session, in bounded memory.
"""

from __future__ import annotations

import logging
import re
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import anyio
import mcp_types as types
from bridge_protocol import ErrorCode

from bridge_core._shown import clipped, clipped_json, resolved_path, visible, walk_strings
from bridge_core.gateway import CallContext, CallFailed
from bridge_core.policy import _patterns, _tool_matches
from bridge_core.redaction import Redactor

__all__ = [
    "APPROVAL",
    "APPROVAL_FALLBACK",
    "APPROVAL_TIMEOUT",
    "APPROVE_TOOLS",
    "ApprovalGate",
    "ApprovalMode",
    "ApprovalRefused",
    "ApprovalRules",
]

logger = logging.getLogger("bridge_core.approval")

# Rules and refusals name the settings by their keys in bridge.toml (MCP_BRIDGE_APPROVAL* are
# deprecated).
APPROVAL = "[approval] mode"
APPROVE_TOOLS = "[approval] tools"
APPROVAL_TIMEOUT = "[approval] timeout"
APPROVAL_FALLBACK = "[approval] fallback"

ApprovalMode = Literal["off", "destructive", "writes", "all"]

MAX_QUESTION_ARGUMENTS = 6000
"""Characters the arguments may take in the question. A call whose arguments cannot be shown
within it is not asked about: it is refused (reason ``unshowable``), never shown cut."""
SHOWN_VALUE = 240
"""Characters of one declared argument shown whole; a longer value shows its head and tail with
the number of characters between them (the end of a path, what a tool acts on, always shows)."""
SHOWN_UNDECLARED = 80
"""The same for an argument the tool does not declare: it has its own, smaller room, so it
cannot take a declared argument's."""
MAX_UNDECLARED = 8
"""Undeclared arguments a call that needs approval may carry; more are refused (``unshowable``)."""
MAX_RESOLVED = 16
"""Path-like values whose resolved form (``..`` segments, percent-encoding) is shown beside
them; a call with more is refused (``unshowable``)."""
SHOWN_KEY = 64
MAX_SHOWN_NAME = 128
MAX_REMEMBERED_SESSIONS = 256
"""Sessions whose "allow for this session" answers are kept (least recently used dropped)."""
MAX_GRANTS_PER_SESSION = 256
MAX_REMEMBERED_EXECUTIONS = 256
"""Executions whose declines are kept (they end; the oldest are forgotten first)."""

_Key = tuple[str, str]
"""(server, tool): what an answer is remembered for."""

SESSION_FIELD = "allow_for_session"
SESSION_TITLE = "Allow for this session"
"""The approval form's one field; a relayed upstream form may not reuse its name or title."""
_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        SESSION_FIELD: {
            "type": "boolean",
            "title": SESSION_TITLE,
            "description": "Also allow further calls to this tool from this session without asking",
            "default": False,
        }
    },
}


@dataclass(frozen=True, slots=True)
class ApprovalRules:
    """Which calls need the user's approval, how long the user has, and what a client that
    cannot ask gets."""

    mode: ApprovalMode = "destructive"
    tools: tuple[str, ...] = ()
    """``[approval] tools`` patterns: always ask (unless ``mode`` is ``off``)."""
    timeout: float = 120.0
    fallback: Literal["refuse", "allow"] = "refuse"

    @classmethod
    def from_settings(
        cls,
        *,
        mode: str = "destructive",
        tools: str | Iterable[str] | None = None,
        timeout: float = 120.0,
        fallback: str = "refuse",
    ) -> ApprovalRules:
        if mode not in ("off", "destructive", "writes", "all"):
            raise ValueError(f"{APPROVAL}={mode!r}: use off, destructive, writes or all")
        if fallback not in ("refuse", "allow"):
            raise ValueError(f"{APPROVAL_FALLBACK}={fallback!r}: use refuse or allow")
        return cls(mode, _patterns(tools), timeout, fallback)  # type: ignore[arg-type]

    def requires(self, server: str, tool: types.Tool) -> str | None:
        """Why a call to ``server.tool`` needs approval (the rule, quoted to the user and in
        errors), or ``None`` when it does not."""
        if self.mode == "off":
            return None
        for pattern in self.tools:
            if _tool_matches(pattern, server, tool.name):
                return f"{APPROVE_TOOLS}={pattern}"
        hints = tool.annotations
        read_only = hints is not None and hints.read_only_hint is True
        if self.mode == "all":
            return f"{APPROVAL}=all"
        if self.mode == "writes" and not read_only:
            return f"{APPROVAL}=writes (the tool is not annotated readOnlyHint)"
        if (
            self.mode == "destructive"
            and not read_only
            and hints is not None
            and hints.destructive_hint is True
        ):
            return f"{APPROVAL}=destructive (the tool is annotated destructiveHint)"
        return None


class ApprovalRefused(CallFailed):
    """A call that needed the user's approval and did not get it (``APPROVAL_DECLINED``).

    ``reason``: ``declined``, ``cancelled``, ``timeout``, ``unsupported`` (the client cannot
    ask), ``failed`` (asking failed), ``declined_earlier`` (declined before in this run) or
    ``unshowable`` (the question could not show the arguments honestly; nothing was asked).
    """

    def __init__(self, server: str, tool: str, rule: str, reason: str, message: str) -> None:
        data = {"server": server, "tool": tool, "rule": rule, "reason": reason}
        super().__init__(ErrorCode.APPROVAL_DECLINED, message, data)
        self.reason = reason


def _shown_name(name: str) -> str:
    # Names reach the user's approval dialog: anything but plain printable ASCII is quoted
    # (escaped), so a name cannot fake lines or reorder text (bidi) in the question.
    name = name[:MAX_SHOWN_NAME]
    return name if re.fullmatch(r"[\x21-\x7e]+", name) else visible(name, quoted=True)


def _shown_call(server: str, tool: str) -> str:
    """``server.tool`` for the user; quoted apart when either holds a dot, so that p / x.echo
    and p.x / echo do not read the same."""
    if "." in server or "." in tool:
        shown = (visible(part[:MAX_SHOWN_NAME], quoted=True) for part in (server, tool))
        return ".".join(shown)
    return f"{_shown_name(server)}.{_shown_name(tool)}"


class Unshowable(Exception):
    """The arguments cannot be shown honestly in one question; the message says why."""


def shown_arguments(
    arguments: Mapping[str, Any], redactor: Redactor, declared: Iterable[str] = ()
) -> str:
    """The arguments as the user sees them, one per line: secrets masked first (a cut secret
    would no longer match), each value quoted with every non-ASCII or control character escaped
    (sandbox-chosen text cannot forge the rest of the question), a long value as head and tail
    with the number of characters not shown, a path-like value also as it resolves.

    The arguments the tool ``declared`` (its input schema's properties) come first, in the
    tool's order, each with :data:`SHOWN_VALUE` characters of room; any others follow under a
    heading of their own with a smaller room each. Sandbox code chooses the keys and their
    order: padding the tool ignores must not shrink or bury the argument it acts on. When that
    cannot hold (too many undeclared arguments, too long a question), :class:`Unshowable`."""
    masked = redactor.value(dict(arguments)) if redactor else dict(arguments)
    first = [key for key in dict.fromkeys(declared) if key in masked]
    if not first and not list(declared):
        first = list(masked)  # the tool declares nothing: no argument crowds out another
    others = [key for key in masked if key not in first]
    if len(others) > MAX_UNDECLARED:
        raise Unshowable(
            f"it carries {len(others)} arguments the tool does not declare, and a question "
            f"shows at most {MAX_UNDECLARED} beside the declared ones"
        )
    resolved: list[str] = []
    lines = [_argument(key, masked[key], SHOWN_VALUE, resolved) for key in first]
    if others:
        lines.append(f"Arguments the tool does not declare ({len(others)}):")
        lines += [_argument(key, masked[key], SHOWN_UNDECLARED, resolved) for key in others]
    text = "\n".join(lines) if lines else "  (none)"
    if len(text) > MAX_QUESTION_ARGUMENTS:
        raise Unshowable(
            f"its arguments take {len(text)} characters in the question, more than the "
            f"{MAX_QUESTION_ARGUMENTS} one question shows"
        )
    return text


def _argument(key: str, value: Any, room: int, resolved: list[str]) -> str:
    name = clipped(str(key), SHOWN_KEY)
    if isinstance(value, str):
        line = f"  {name}: {clipped(value, room)}"
        if len(value) > room:
            line += f" ({len(value)} characters)"
    else:
        line = f"  {name}: {clipped_json(value, room)}"
    for where, text in walk_strings(value):
        readings = resolved_path(text)
        if not readings:
            continue
        resolved.append(text)
        if len(resolved) > MAX_RESOLVED:
            raise Unshowable(
                f"it carries more than {MAX_RESOLVED} path-like values whose resolved form "
                "the question would have to show"
            )
        at = clipped(f"{key}{where}", SHOWN_KEY) if where else name
        for path, how in readings:
            # Readings that differ are each shown with how they were read: one cannot hide
            # behind another (a POSIX server takes a backslash as part of a name).
            said = f" ({how})" if len(readings) > 1 else ""
            line += f"\n    {at} resolves to {clipped(path, SHOWN_VALUE)}{said}"
    return line


class ApprovalGate:
    """Asks, remembers and refuses; one per bridge (the gateway's)."""

    def __init__(self, rules: ApprovalRules, redactor: Redactor) -> None:
        self.rules = rules
        self._redactor = redactor
        self._granted: OrderedDict[tuple[str | None, str, str], set[_Key]] = OrderedDict()
        self._declined: OrderedDict[str, set[_Key]] = OrderedDict()
        self._turns: dict[str, tuple[anyio.Lock, int]] = {}

    async def check(
        self, ctx: CallContext, server: str, tool: types.Tool, arguments: Mapping[str, Any]
    ) -> str | None:
        """Return how the call was approved (for the audit log: ``asked``, ``asked_session``,
        ``session`` when an earlier "allow for this session" covers it, ``fallback_allow``), or
        ``None`` when no approval is needed; raise :class:`ApprovalRefused` otherwise."""
        rule = self.rules.requires(server, tool)
        if rule is None:
            return None
        # A pair, not "server.tool": server and tool names may hold dots, and a grant of
        # p / x.echo must not cover p.x / echo.
        key: _Key = (server, tool.name)
        if self._is_granted(ctx, key):
            return "session"
        link = ctx.client
        if link is None or not link.supports("elicitation"):
            if self.rules.fallback == "allow":
                return "fallback_allow"
            raise ApprovalRefused(
                server,
                tool.name,
                rule,
                "unsupported",
                f"call to {_shown_call(server, tool.name)} needs the user's "
                f"approval ({rule}), but this MCP client cannot ask the user (it does not "
                f"support elicitation); the call was not made. To run such calls without "
                f"asking, set {APPROVAL_FALLBACK}=allow (or {APPROVAL}=off)",
            )
        async with self._turn(ctx.execution_id):
            # Another call of this execution may have been answered while this one waited.
            if self._is_granted(ctx, key):
                return "session"
            if key in self._declined.get(ctx.execution_id, ()):
                raise ApprovalRefused(
                    server,
                    tool.name,
                    rule,
                    "declined_earlier",
                    f"call to {_shown_call(server, tool.name)} was not made: the "
                    "user declined it earlier in this run_python call",
                )
            return await self._ask(ctx, server, tool, rule, key, arguments)

    async def _ask(
        self,
        ctx: CallContext,
        server: str,
        described: types.Tool,
        rule: str,
        key: _Key,
        arguments: Mapping[str, Any],
    ) -> str:
        assert ctx.client is not None
        tool = described.name
        what = _shown_call(server, tool)
        properties = described.input_schema.get("properties")
        declared = [str(name) for name in properties] if isinstance(properties, Mapping) else []
        try:
            shown = shown_arguments(arguments, self._redactor, declared)
        except Unshowable as exc:
            # Not the user's decline (nothing was asked): not remembered for the run.
            raise ApprovalRefused(
                server,
                tool,
                rule,
                "unshowable",
                f"call to {what} was not made: it needs the user's approval ({rule}) and the "
                f"user must see what they approve, but {exc}; make the call with fewer or "
                "shorter arguments",
            ) from None
        message = (
            f"Code running in session {_shown_name(ctx.session)} wants to call {what}.\n"
            f"Arguments:\n{shown}\n"
            f"Asked because of {rule}. Accept to run it, decline to refuse it."
        )
        params = types.ElicitRequestFormParams(message=message, requested_schema=_SCHEMA)
        limit = self.rules.timeout
        try:
            with anyio.fail_after(limit):
                answer = await ctx.client.elicit(params)
        except TimeoutError:
            self._decline(ctx, key)
            raise ApprovalRefused(
                server,
                tool,
                rule,
                "timeout",
                f"call to {what} was not made: the user did not answer the approval question "
                f"within {limit:g} s ({APPROVAL_TIMEOUT})",
            ) from None
        except Exception as exc:  # the client went away or answered with an error: no approval
            logger.info("asking approval of %s failed: %r", key, exc)
            raise ApprovalRefused(
                server,
                tool,
                rule,
                "failed",
                f"call to {what} was not made: asking the user for approval failed "
                f"({type(exc).__name__}: {self._redactor.text(str(exc))[:300]})",
            ) from None
        if answer.action != "accept":
            self._decline(ctx, key)
            verb = "declined" if answer.action == "decline" else "dismissed"
            raise ApprovalRefused(
                server,
                tool,
                rule,
                "declined" if answer.action == "decline" else "cancelled",
                f"call to {what} was not made: the user {verb} it",
            )
        if (answer.content or {}).get(SESSION_FIELD) is True:
            self._grant(ctx, key)
            return "asked_session"
        return "asked"

    # --- bounded memory ------------------------------------------------------------------------

    def _is_granted(self, ctx: CallContext, key: _Key) -> bool:
        granted = self._granted.get((ctx.client_key, ctx.session, ctx.grant_scope))
        return granted is not None and key in granted

    def _grant(self, ctx: CallContext, key: _Key) -> None:
        where = (ctx.client_key, ctx.session, ctx.grant_scope)
        granted = self._granted.setdefault(where, set())
        self._granted.move_to_end(where)
        if len(granted) < MAX_GRANTS_PER_SESSION:
            granted.add(key)
        while len(self._granted) > MAX_REMEMBERED_SESSIONS:
            self._granted.popitem(last=False)

    def _decline(self, ctx: CallContext, key: _Key) -> None:
        declined = self._declined.setdefault(ctx.execution_id, set())
        if len(declined) < MAX_GRANTS_PER_SESSION:
            declined.add(key)
        while len(self._declined) > MAX_REMEMBERED_EXECUTIONS:
            self._declined.popitem(last=False)

    def _turn(self, execution_id: str) -> _Turn:
        return _Turn(self._turns, execution_id)


class _Turn:
    """One question at a time per execution; the lock is dropped when nobody holds or waits."""

    def __init__(self, turns: dict[str, tuple[anyio.Lock, int]], key: str) -> None:
        self._turns = turns
        self._key = key

    async def __aenter__(self) -> None:
        lock, users = self._turns.get(self._key) or (anyio.Lock(), 0)
        self._turns[self._key] = (lock, users + 1)
        try:
            await lock.acquire()
        except BaseException:
            self._leave(lock)
            raise

    async def __aexit__(self, *exc_info: object) -> None:
        lock, _ = self._turns[self._key]
        lock.release()
        self._leave(lock)

    def _leave(self, lock: anyio.Lock) -> None:
        _, users = self._turns[self._key]
        if users <= 1:
            del self._turns[self._key]
        else:
            self._turns[self._key] = (lock, users - 1)
