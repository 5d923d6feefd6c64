"""The persistent interpreter: one namespace and one event loop for the life of the sandbox.

Runs on the main thread, because only the main thread receives signals: an interrupt of plain
code is a SIGINT sent to it (``signal.pthread_kill``), which also breaks blocking calls such as
``time.sleep``. Code with top-level ``await`` runs as a task on the persistent loop and is
interrupted by cancelling that task; if the task does not yield within
:data:`ESCALATE_AFTER` (``while True: pass`` inside async code), SIGINT follows. One SIGINT
can be lost — Python ignores an exception raised inside a finalizer (an ``open(...).write(...)``
whose file is closed as the interrupt lands: about 1 in 100 interrupts of such a loop), and
``except:`` swallows one — so it is sent again every :data:`RESIGNAL_EVERY` seconds until the
execution ends (the host kills the sandbox once its grace is over).

Plain code runs outside the loop, so ``asyncio.run(...)`` in user code works as in a script.

The loop is made, and made current, before the first cell that has top-level ``await``, names
``asyncio`` in its source, or runs after anything imported :mod:`asyncio`; from then on it behaves
as if it had been made at start (``get_event_loop()`` in plain code finds it, a cell with
``await`` makes it current again). A sandbox whose code never touches asyncio does not import it:
about 2.5 MiB of memory and 20 ms of start-up that every idle session and warm sandbox would
otherwise hold (``bench/density.py``). Making it is part of the cell: if it fails (no file
descriptor left, say), that cell reports the error and the sandbox goes on.
"""

from __future__ import annotations

import inspect
import re
import signal
import sys
import threading
import warnings
from collections import deque
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING, Any, TextIO

from bridge_protocol import ErrorInfo, ExecutionStatus

from bridge_sandbox_client._channel import signals_allowed
from bridge_sandbox_client._compile import CompiledCell, compile_cell, is_async
from bridge_sandbox_client._traceback import error_info, interrupted_info, wire_text

if TYPE_CHECKING:
    import asyncio

__all__ = ["ESCALATE_AFTER", "RESIGNAL_EVERY", "Interpreter", "Outcome"]

ESCALATE_AFTER = 0.25
"""Seconds a cancelled task gets to yield before SIGINT is sent: a cancellation is delivered only
when the task next awaits, and CPU-bound async code may never do so."""
RESIGNAL_EVERY = 0.2
"""Seconds between the SIGINTs sent while an interrupted execution still runs."""
_EARLY_INTERRUPTS_KEPT = 64
"""Interrupts of executions not running (not started yet, or over) that are remembered."""


@dataclass(slots=True)
class _Running:
    execution_id: str
    task: asyncio.Task[Any] | None = None
    interrupted: bool = False


@dataclass(frozen=True, slots=True)
class Outcome:
    """How an execution ended."""

    status: ExecutionStatus
    value: str | None = None
    error: ErrorInfo | None = None


def render_value(value: Any, limit: int) -> str | None:
    """The repr of a trailing expression's value, capped at ``limit`` characters."""
    if value is None:
        return None
    try:
        text = repr(value)
    except Exception as exc:  # user __repr__ may raise anything
        text = f"<{type(value).__name__} object; repr() failed: {type(exc).__name__}: {exc}>"
    if inspect.iscoroutine(value):
        text += f"  (never awaited: {_unawaited_hint(value.__qualname__)})"
    if len(text) > limit:
        marker = f"... [{len(text) - limit} more characters]"
        text = text[: max(0, limit - len(marker))] + marker
    return wire_text(text)


def _unawaited_hint(qualname: str) -> str:
    """What to write instead of a call whose coroutine was never awaited: a ``runtime`` helper's
    blocking twin is ``runtime.<name>_sync``, a tool's is ``.sync(...)``."""
    owner, _, name = qualname.rpartition(".")
    if owner == "Runtime":
        return f"write `await` before the call, or call runtime.{name}_sync(...)"
    return "write `await` before the call, or use `.sync(...)`"


_NEVER_AWAITED = re.compile(r"coroutine '([\w.]+)' was never awaited")


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """``warnings.showwarning`` for the sandbox: a forgotten ``await`` is explained without the
    sandbox client's own file path (where the coroutine happened to be collected)."""
    if issubclass(category, RuntimeWarning) and "was never awaited" in str(message):
        stream = sys.stderr if file is None else file
        try:
            named = _NEVER_AWAITED.search(str(message))
            hint = _unawaited_hint(named.group(1) if named else "")
            stream.write(f"RuntimeWarning: {message}: {hint}\n")
        except (OSError, ValueError, AttributeError):
            pass  # like warnings' own writer: no stderr, no warning
        return
    _default_show_warning(message, category, filename, lineno, file, line)


_default_show_warning = warnings.showwarning


class Interpreter:
    """Runs cells in the persistent namespace; :meth:`interrupt` may be called from any thread."""

    def __init__(self, namespace: dict[str, Any]) -> None:
        self.namespace = namespace
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        self._running: _Running | None = None
        self._interruptible = False
        self._cells = 0
        self._early: deque[str] = deque(maxlen=_EARLY_INTERRUPTS_KEPT)
        self._stopping = False
        self._main_thread = threading.main_thread().ident
        warnings.showwarning = _show_warning

    def install_signal_handler(self) -> None:
        """Own SIGINT (main thread only): it raises KeyboardInterrupt only inside user code."""
        signal.signal(signal.SIGINT, self._on_sigint)

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        # A SIGINT that lands after user code returned (the race with a late interrupt) is
        # dropped here instead of blowing up the client between executions.
        if self._interruptible:
            raise KeyboardInterrupt

    # --- the event loop ------------------------------------------------------------------------

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The persistent loop, None until a cell needed it (then no task can be pending)."""
        return self._loop

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        """The persistent loop: made (again, if user code closed it) and made current."""
        import asyncio

        if self._loop is None or self._loop.is_closed():
            self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self._loop)
        return self._loop

    # --- running ---------------------------------------------------------------------------

    def compile(self, code: str) -> CompiledCell:
        """Compile ``code`` as the next cell (raises SyntaxError and friends)."""
        self._cells += 1
        return compile_cell(code, f"<cell {self._cells}>")

    def execute(
        self,
        cell: CompiledCell | BaseException,
        execution_id: str,
        limit: int,
    ) -> Outcome:
        """Run a compiled cell (or report its compile error) and say how it ended."""
        if isinstance(cell, BaseException):
            return Outcome("error", error=error_info(cell))
        running = _Running(execution_id)
        if signal.getsignal(signal.SIGINT) != self._on_sigint:
            # Earlier user code replaced (or ignored) SIGINT: interrupts must work again.
            signal.signal(signal.SIGINT, self._on_sigint)
        with self._lock:
            # The host may interrupt an execution before this thread got to start it.
            running.interrupted = self._stopping or execution_id in self._early
            self._running = running
        try:
            if self._loop is None and (
                cell.is_async or cell.names_asyncio or "asyncio" in sys.modules
            ):
                self._event_loop()
            run = self._run_async if cell.is_async else self._run_sync
            # Signals that arrived since the last execution are delivered here, in user code.
            with signals_allowed():
                value = run(cell, running)
            return Outcome("ok", value=render_value(value, limit))
        except KeyboardInterrupt as exc:
            return Outcome("interrupted", error=interrupted_info(exc))
        except SystemExit as exc:
            if exc.code in (None, 0):
                return Outcome("ok")
            return Outcome("error", error=error_info(exc))
        except BaseException as exc:
            if running.interrupted:
                return Outcome("interrupted", error=interrupted_info(exc))
            return Outcome("error", error=error_info(exc))
        finally:
            with self._lock:
                self._running = None

    def _enter_user_code(self, running: _Running) -> None:
        self._interruptible = True
        if running.interrupted:  # the interrupt came before user code started
            raise KeyboardInterrupt

    def _run_sync(self, cell: CompiledCell, running: _Running) -> Any:
        value = None
        try:
            self._enter_user_code(running)
            if cell.body is not None:
                exec(cell.body, self.namespace)
            if cell.trailing is not None:
                value = eval(cell.trailing, self.namespace)
        finally:
            self._interruptible = False
        return value

    def _run_async(self, cell: CompiledCell, running: _Running) -> Any:
        async def run_cell() -> Any:
            if cell.body is not None:
                result = eval(cell.body, self.namespace)
                if is_async(cell.body):
                    await result
            value = None
            if cell.trailing is not None:
                value = eval(cell.trailing, self.namespace)
                if is_async(cell.trailing):
                    value = await value
            return value

        import asyncio

        loop = self._event_loop()
        # A plain cell's asyncio.run() resets the current loop: make ours current again.
        asyncio.set_event_loop(loop)
        task = loop.create_task(run_cell())
        with self._lock:
            running.task = task
        try:
            self._enter_user_code(running)
            return loop.run_until_complete(task)
        except KeyboardInterrupt:
            if not task.done():  # SIGINT hit the loop itself while the task was suspended
                task.cancel()
            raise
        finally:
            self._interruptible = False

    # --- interrupting ------------------------------------------------------------------------

    def interrupt(self, execution_id: str) -> bool:
        """Stop execution ``execution_id`` if it is the one running; False if it is not."""
        with self._lock:
            running = self._running
            if running is None or running.execution_id != execution_id:
                self._early.append(execution_id)
                return False
            running.interrupted = True
            task = running.task
        if task is None:
            self._signal_main()
            self._escalate_after(RESIGNAL_EVERY, running)
        else:
            task.get_loop().call_soon_threadsafe(task.cancel)
            self._escalate_after(ESCALATE_AFTER, running)
        return True

    def stop(self) -> None:
        """Interrupt the running execution and every later one (the host has gone away)."""
        with self._lock:
            self._stopping = True
            running = self._running
        if running is not None:
            self.interrupt(running.execution_id)

    def _escalate_after(self, delay: float, running: _Running) -> None:
        timer = threading.Timer(delay, self._escalate, (running,))
        timer.daemon = True
        timer.start()

    def _escalate(self, running: _Running) -> None:
        with self._lock:
            still_running = self._running is running
        if still_running:
            self._signal_main()
            self._escalate_after(RESIGNAL_EVERY, running)

    def _signal_main(self) -> None:
        if self._main_thread is not None:
            signal.pthread_kill(self._main_thread, signal.SIGINT)
