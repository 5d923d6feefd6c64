"""A tool's result checked against its output schema without running the server's regular
expressions.

The SDK's client session revalidates every ``tools/call`` result against the output schema the
server listed (:meth:`mcp.ClientSession.validate_tool_result`), synchronously on the event loop,
with Python's backtracking ``re``. A hostile server's ``pattern`` of nested quantifiers
(``^(a+)+$``) and a 30-character result held the whole bridge (every client, every session) for
a minute; 40 characters would hold it for days. ``re`` keeps the GIL while it matches, so a worker
thread would not help. A valid result of 2 million integers held the loop 17 s (the check costs
about 8 us a value; an upstream may send 32 MiB). :class:`UpstreamSession` checks a result the
same way, but

- with the keywords that run the server's regular expressions not evaluated: ``pattern`` and
  ``patternProperties`` pass, and so do ``additionalProperties`` beside ``patternProperties``
  (which keys the patterns cover cannot be told without running them) and
  ``unevaluatedProperties`` (which runs the ``patternProperties`` below it); nor is
  ``uniqueItems``, which compares items pairwise when they are objects or lists (3,000 small
  objects: 10 s of a thread that no cancel stops, since it is one keyword). The check is laxer
  than the SDK's, never stricter;
- in a worker thread, one at a time per server (pure Python: the event loop gets the GIL back
  every few milliseconds), stopping at the first error instead of ranking them all, and at its
  next keyword once the call is given up (its timeout, a cancel): no check outlives its call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import mcp_types as types
from mcp import ClientSession

if TYPE_CHECKING:
    # Imported where a result is first checked (in a worker thread), as the SDK does: jsonschema
    # costs a bridge's start about 0.1 s, and most servers declare no output schema.
    from jsonschema.protocols import Validator

__all__ = ["UpstreamSession"]

OutputSchemas = Callable[[str], "dict[str, Any] | None"]
"""A tool's output schema by its name, from the server's last listing (None: none declared)."""

_WITHOUT_REGEXES: dict[type[Validator], type[Validator]] = {}
"""Each draft's validator class, and the same with the regular-expression keywords passing."""


Keyword = Callable[[Any, Any, Any, Any], Any]
"""A validator class's check of one keyword: ``(validator, value, instance, schema)``."""

_thread = threading.local()
"""The worker thread's ``stop`` event: set once the call it checks for is given up."""


class _GivenUp(Exception):
    """The check's call was given up: the thread stops checking."""


def _passes(validator: Any, value: Any, instance: Any, schema: Any) -> None:
    return None


def _stoppable(keyword: Keyword) -> Keyword:
    def check(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        stop: threading.Event | None = getattr(_thread, "stop", None)
        if stop is not None and stop.is_set():
            raise _GivenUp
        return keyword(validator, value, instance, schema)

    return check


def _without_regexes(cls: type[Validator]) -> type[Validator]:
    from jsonschema.validators import extend

    made = _WITHOUT_REGEXES.get(cls)
    if made is None:
        additional = cls.VALIDATORS.get("additionalProperties")

        def additional_properties(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
            if additional is None or "patternProperties" in schema:
                return None
            return additional(validator, value, instance, schema)

        keywords: dict[str, Keyword] = {
            **cls.VALIDATORS,
            "pattern": _passes,
            "patternProperties": _passes,
            "unevaluatedProperties": _passes,
            "uniqueItems": _passes,
            "additionalProperties": additional_properties,
        }
        stoppable = {name: _stoppable(keyword) for name, keyword in keywords.items()}
        made = _WITHOUT_REGEXES[cls] = extend(cls, stoppable)
    return made


class UpstreamSession(ClientSession):
    """The SDK's client session for an upstream server, whose results are checked against their
    output schemas without the server's regular expressions (see the module docstring)."""

    def __init__(self, *args: Any, output_schemas: OutputSchemas, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._output_schemas = output_schemas
        self._checkers: dict[str, tuple[dict[str, Any], Validator]] = {}
        self._threads = anyio.CapacityLimiter(1)
        """One check at a time of this server's results: a server sending large results
        holds one worker thread, never the ones other servers and the bridge use."""

    def _checker(self, name: str, schema: dict[str, Any]) -> Validator:
        from jsonschema import SchemaError
        from jsonschema.validators import validator_for
        from referencing import Registry

        cached = self._checkers.get(name)
        if cached is not None and cached[0] is schema:
            return cached[1]
        cls = validator_for(schema)
        try:
            cls.check_schema(schema)
        except SchemaError as exc:
            raise RuntimeError(f"Invalid schema for tool {name}: {exc}") from exc
        # An empty registry, as the SDK's: a $ref resolves within the schema document only.
        checker = _without_regexes(cls)(schema, registry=Registry())
        self._checkers[name] = (schema, checker)
        return checker

    async def validate_tool_result(self, name: str, result: types.CallToolResult) -> None:
        """The SDK's check of ``result`` (the same errors), regular expressions not run."""
        schema = self._output_schemas(name)
        if schema is None:
            return
        content = result.structured_content
        if content is None and "structured_content" not in result.model_fields_set:
            raise RuntimeError(
                f"Tool {name} has an output schema but did not return structured content"
            )
        stop = threading.Event()
        try:
            error = await anyio.to_thread.run_sync(
                self._first_error, name, schema, content, stop,
                abandon_on_cancel=True, limiter=self._threads,
            )  # fmt: skip
        finally:
            stop.set()  # given up: the thread stops at its next keyword
        if error is not None:
            raise RuntimeError(
                f"Invalid structured content returned by tool {name}: {error}"
            ) from error

    def _first_error(
        self, name: str, schema: dict[str, Any], content: Any, stop: threading.Event
    ) -> Any:
        """In a worker thread: the first way ``content`` fails ``schema``, or None."""
        from referencing.exceptions import Unresolvable

        checker = self._checker(name, schema)
        _thread.stop = stop
        try:
            return next(iter(checker.iter_errors(content)), None)
        except Unresolvable as exc:
            raise RuntimeError(f"Invalid schema for tool {name}: {exc}") from exc
        except _GivenUp:
            return None  # nobody waits for the answer
        finally:
            _thread.stop = None
