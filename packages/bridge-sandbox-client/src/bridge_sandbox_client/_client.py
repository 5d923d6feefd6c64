"""The sandbox client: wires the channel, capture, interpreter and the ``mcp`` module together.

Threads: the main thread runs executions (it must: signals only reach it); a reader thread owns
the socket's receive side, answering ``Ping`` and applying ``Interrupt`` and ``Reply`` while code
runs; two capture threads stream fds 1 and 2. ``Execute`` and ``Shutdown`` are handed to the main
thread through a queue, one at a time, in order.
"""

from __future__ import annotations

import ast
import builtins
import itertools
import os
import sys
import threading
import traceback
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bridge_protocol import (
    CHECKPOINT_RESTORE_PREFIX,
    ErrorInfo,
    Execute,
    Interrupt,
    Message,
    Ping,
    Pong,
    ProtocolError,
    Reply,
    Resave,
    Restore,
    Restored,
    Result,
    Shutdown,
)
from bridge_protocol.hints import HEAD_SIZE

from bridge_sandbox_client._calls import CallRegistry
from bridge_sandbox_client._capture import OutputCapture
from bridge_sandbox_client._channel import (
    Channel,
    defer_signals_outside_user_code,
    signals_allowed,
    signals_deferred,
)
from bridge_sandbox_client._checkpoints import Checkpoints
from bridge_sandbox_client._compile import CompiledCell
from bridge_sandbox_client._display import Displayer, configure_matplotlib, set_active
from bridge_sandbox_client._inbox import Inbox, has_tasks
from bridge_sandbox_client._interpreter import Interpreter
from bridge_sandbox_client._modules import install_mcp_modules
from bridge_sandbox_client._preimport import EarlyImports, import_modules
from bridge_sandbox_client._proxies import Directory, RefusedServer
from bridge_sandbox_client._restoring import restore_state, state_hint
from bridge_sandbox_client._runtime import Runtime, build_runtime_module
from bridge_sandbox_client._snapshot import SnapshotTaker, is_bridge_object
from bridge_sandbox_client._workflows import Workflows
from bridge_sandbox_client.errors import PolicyDenied, ToolError

if TYPE_CHECKING:
    from bridge_sandbox_client._pending import PendingCall

__all__ = ["SandboxClient"]

_STOP = None
MAX_RESTORE_BYTES = 2 * 1024 * 1024 * 1024
"""A saved state larger than this is refused (the host caps what it keeps far below)."""


class _RestoreJob:
    __slots__ = ("data", "restore_id")

    def __init__(self, restore_id: str, data: bytes) -> None:
        self.restore_id = restore_id
        self.data = data


class _Preimport:
    """The modules the state being received needs: imported while the rest of it arrives."""

    __slots__ = ("modules",)

    def __init__(self, modules: list[str]) -> None:
        self.modules = modules


_Job = Execute | Shutdown | Resave | _RestoreJob | _Preimport | None


class SandboxClient:
    """Serves executions over a connected, handshaken :class:`Channel` until shutdown or EOF.

    ``host_gone`` is called on the reader thread once the channel has ended (EOF, a broken
    socket, a bad frame): the process entry point passes an immediate exit, so a sandbox never
    outlives its host, whatever the code running at that moment does with the interrupt.
    """

    def __init__(
        self,
        channel: Channel,
        *,
        host_gone: Callable[[], object] | None = None,
        early: EarlyImports | None = None,
    ) -> None:
        self._channel = channel
        self._early = early
        """Imports started at the process's start: waited for before the first job."""
        self._host_gone = host_gone
        channel.on_broken = self._channel_broken
        self._inbox: Inbox[_Job] = Inbox()
        self._restoring: tuple[str, list[bytes]] | None = None
        """The state being received: its id and its chunks (joined once, at its last)."""
        self._restoring_bytes = 0
        self._hinted = False
        """Whether the state being received has had its hint read (or has none)."""
        self._checkpoint_lock = threading.Lock()
        self._restore_ids = itertools.count(1)
        self._checkpoints: dict[str, list[bytes]] = {}
        """Checkpoint states asked for (``runtime.restore``), by restore id: their chunks as
        they come, until the code that asked takes them. Frames of any other id are dropped."""
        self._durable = False
        """Set by the host's first ``Restore``: this sandbox serves a durable session, so its
        state is saved after each successful execution (pool and one-shot sandboxes never are)."""
        # Version 2: unchanged numpy/pandas buffers of a large state are copied by the host.
        self.snapshots = SnapshotTaker(channel.send, self.log, copies=channel.version >= 2)
        self._execution_id = ""
        self.capture = OutputCapture(channel.send)
        self.registry = CallRegistry(channel.send)
        self.directory = Directory(self.registry)
        self.displayer = Displayer(channel.send, self._current_execution)
        self.runtime = Runtime(
            self.directory, self.displayer, channel.send, self._current_execution, self._fork
        )
        self.workflows = Workflows(self.registry, lambda: self.interpreter.namespace)
        self.checkpoints = Checkpoints(
            self.registry,
            take=self._checkpoint,
            ask=self._ask_restore,
            received=self._restored_checkpoint,
            apply=self._apply_checkpoint,
        )
        self.runtime_module = build_runtime_module(self.runtime, self.workflows, self.checkpoints)
        self.modules = install_mcp_modules(self.directory, self.runtime_module)
        self.interpreter = Interpreter(self._user_namespace())

    def _current_execution(self) -> str:
        # Progress and images from a thread left running go under the last execution's id (the
        # host drops them once that execution is over).
        return self._execution_id

    def _user_namespace(self) -> dict[str, Any]:
        # The namespace is the __dict__ of a real __main__ module, so pickle, dataclasses and
        # multiprocessing find user-defined classes where they look for them.
        main = types.ModuleType("__main__")
        main.__dict__.update(
            {
                "__builtins__": builtins,
                "runtime": self.runtime_module,
                "mcp_servers": self.modules.servers_mapping,
            }
        )
        sys.modules["__main__"] = main
        return main.__dict__

    # --- lifecycle -------------------------------------------------------------------------

    def serve(self) -> int:
        """Run until ``Shutdown`` or EOF; return the process exit status."""
        configure_matplotlib()
        set_active(self.displayer)
        self._isolate_process_state()
        with signals_deferred():  # our threads never take the signals meant for user code
            self.capture.install()
            reader = threading.Thread(target=self._read, name="bridge-reader", daemon=True)
            reader.start()
        self.interpreter.install_signal_handler()
        defer_signals_outside_user_code()
        while True:
            message = self._next_job()
            if self._early is not None:
                for error in self._early.join():
                    self.log(error)
                self._early = None
            if isinstance(message, _RestoreJob):
                self._restore(message)
                continue
            if isinstance(message, _Preimport):
                import_modules(message.modules, self.log)
                continue
            if isinstance(message, Resave):
                self.snapshots.resend()
                continue
            if not isinstance(message, Execute):
                break
            self._run(message)
        self.capture.end()
        return 0

    def _next_job(self) -> _Job:
        loop = self.interpreter.loop
        if not has_tasks(loop):
            return self._inbox.get(loop)
        # Tasks user code left on the loop keep running while we wait, with signals as in user
        # code (they are held back only in the client's own work).
        while True:
            try:
                with signals_allowed():
                    return self._inbox.get(loop)
            except (Exception, KeyboardInterrupt):
                # A handler user code left behind raised as the signals were unblocked: like an
                # error of a task left running, it is that code's output; we keep serving.
                traceback.print_exc(file=sys.stderr)

    @staticmethod
    def _isolate_process_state() -> None:
        # User code sees a clean interpreter: no client arguments, and stdin that reads as empty
        # (input() raises EOFError instead of hanging the execution until its timeout).
        sys.argv = [""]
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115

    def log(self, text: str) -> None:
        """Write a diagnostic to the container log (the original stderr), never to the host."""
        fd = self.capture.original_stderr_fd
        data = f"bridge-sandbox: {text}\n".encode("utf-8", "replace")
        try:
            os.write(fd if fd >= 0 else 2, data)
        except OSError:
            pass

    # --- reader thread --------------------------------------------------------------------

    def _read(self) -> None:
        reason = "the host closed the channel"
        try:
            for message in self._channel.take_early():
                self._dispatch(message)
            while (messages := self._channel.read_messages()) is not None:
                for message in messages:
                    self._dispatch(message)
        except ProtocolError as exc:
            reason = f"protocol error from the host: {exc}"
            self.log(reason)
        except OSError as exc:
            reason = f"the channel failed: {exc}"
            self.log(reason)
        except Exception:  # top-level handler of the reader thread: log, then shut down cleanly
            reason = "internal error in the sandbox client"
            self.log(f"{reason}:\n{traceback.format_exc()}")
        finally:
            self.registry.close(reason)
            self.interpreter.stop()
            self._inbox.put(_STOP)
            # Not when this process closed the channel itself: it is exiting with its own status.
            if self._host_gone is not None and not self._channel.closed:
                self._host_gone()

    def _channel_broken(self, exc: OSError) -> None:
        """A send failed (any thread): the host cannot be told anything more, so this sandbox
        ends now, as when the host is gone; the host reports its execution as crashed."""
        if self._channel.closed:
            return  # this process is closing the channel itself, on its way out
        self.log(f"the channel to the host failed on a send, exiting: {exc}")
        if self._host_gone is not None:
            self._host_gone()

    def _dispatch(self, message: Message) -> None:
        if isinstance(message, Reply):
            self.registry.resolve(message)
        elif isinstance(message, Ping):
            self._channel.send(Pong(nonce=message.nonce))
        elif isinstance(message, Interrupt):
            self._interrupt(message.execution_id)
        elif isinstance(message, (Execute, Shutdown, Resave)):
            self._inbox.put(message)  # in order: a resave applies to the next execution's state
        elif isinstance(message, Restore):
            if message.restore_id.startswith(CHECKPOINT_RESTORE_PREFIX):
                self._receive_checkpoint(message)
            else:
                self._receive_restore(message)
        elif not isinstance(message, Pong):
            self.log(f"ignored unexpected {type(message).KIND!r} message")

    def _receive_restore(self, message: Restore) -> None:
        if self._restoring is None or self._restoring[0] != message.restore_id:
            self._restoring = (message.restore_id, [])
            self._restoring_bytes = 0
            self._hinted = False
        chunks = self._restoring[1]
        if self._restoring_bytes + len(message.data) > MAX_RESTORE_BYTES:
            raise ProtocolError(f"a saved state of more than {MAX_RESTORE_BYTES} bytes")
        if message.data:
            chunks.append(message.data)  # kept as decoded: one copy at the end, not one per frame
            self._restoring_bytes += len(message.data)
        if not self._hinted:
            head = chunks[0] if chunks and len(chunks[0]) >= HEAD_SIZE else b"".join(chunks)
            if (modules := state_hint(head)) is not None:
                # The main thread is idle until the state is whole: it imports what the state
                # needs meanwhile, while this thread goes on receiving.
                self._hinted = True
                if modules and not message.last:
                    self._inbox.put(_Preimport(modules))
        if message.last:
            self._restoring = None
            self._inbox.put(_RestoreJob(message.restore_id, b"".join(chunks)))

    def _receive_checkpoint(self, message: Restore) -> None:
        """A chunk of a checkpoint's state, for the code waiting in ``runtime.restore``: held
        apart from the session's own restore (the main thread may be that code)."""
        with self._checkpoint_lock:
            chunks = self._checkpoints.get(message.restore_id)
            if chunks is None or not message.data:
                return  # not asked for (or no longer): dropped
            if sum(map(len, chunks)) + len(message.data) > MAX_RESTORE_BYTES:
                raise ProtocolError(f"a saved state of more than {MAX_RESTORE_BYTES} bytes")
            chunks.append(message.data)

    def _interrupt(self, execution_id: str) -> None:
        self.interpreter.interrupt(execution_id)
        self.registry.abandon(execution_id)

    # --- main thread ----------------------------------------------------------------------

    def _restore(self, job: _RestoreJob) -> None:
        self._durable = True
        error = restore_state(job.data, self.interpreter.namespace)
        try:
            self._channel.send(Restored(job.restore_id, error=error))
        except OSError as exc:
            self.log(f"could not confirm restore {job.restore_id}: {exc}")

    def _fork(self, name: str) -> PendingCall:
        """Ask the host for a fork into ``name``, then save the namespace as it is now into it.

        The request goes first: the host reserves the name before the snapshot's frames come.
        """
        snapshot_id = self.snapshots.fork_id()
        pending = self.registry.request("fork_session", {"name": name, "snapshot_id": snapshot_id})
        if self._durable:  # otherwise the host refuses, and says why
            self.snapshots.take(self.interpreter.namespace, self._skip_saving, snapshot_id)
        return pending

    def _checkpoint(self, label: str) -> PendingCall:
        """Ask the host for checkpoint ``label``, then save the namespace as it is now into it
        (a fork's snapshot: the host reserves its slot before the frames come)."""
        snapshot_id = self.snapshots.fork_id()
        pending = self.registry.request("checkpoint", {"label": label, "snapshot_id": snapshot_id})
        if self._durable:  # otherwise the host refuses, and says why
            self.snapshots.take(self.interpreter.namespace, self._skip_saving, snapshot_id)
        return pending

    def _ask_restore(self, label: str) -> tuple[str, PendingCall]:
        """Ask the host for checkpoint ``label``'s state, sent under a restore id of ours."""
        restore_id = f"{CHECKPOINT_RESTORE_PREFIX}{os.getpid()}-{next(self._restore_ids)}"
        with self._checkpoint_lock:
            self._checkpoints[restore_id] = []
        try:
            params = {"label": label, "restore_id": restore_id}
            return restore_id, self.registry.request("restore_checkpoint", params)
        except BaseException:
            self._restored_checkpoint(restore_id)
            raise

    def _restored_checkpoint(self, restore_id: str) -> bytes | None:
        """The state received for ``restore_id`` (None: none came); forgotten from now on."""
        with self._checkpoint_lock:
            chunks = self._checkpoints.pop(restore_id, None)
        return b"".join(chunks) if chunks else None

    def _apply_checkpoint(self, state: bytes) -> str:
        """Replace the namespace and ``/tmp`` with a checkpoint's state; "" or why not."""
        return restore_state(state, self.interpreter.namespace, keep=self._skip_saving)

    def _skip_saving(self, name: str, value: Any) -> bool:
        # What the client injects is rebuilt in every sandbox, never saved.
        return name in ("runtime", "mcp_servers") or is_bridge_object(value)

    def _run(self, execute: Execute) -> None:
        self._execution_id = execute.execution_id
        self.registry.begin(execute.execution_id)
        self.capture.begin(execute.execution_id)
        cell: CompiledCell | BaseException
        try:
            cell = self.interpreter.compile(execute.code)
        except (SyntaxError, ValueError, OverflowError, RecursionError, MemoryError) as exc:
            cell = exc
        else:
            code = execute.code
            # The walk finds nothing unless the source spells "mcp_" (or a non-ASCII spelling
            # that NFKC makes one, as identifiers are normalised): skipped, it costs nothing.
            if "mcp_" in code or not code.isascii():
                self._bind_aliases(cell.tree)
        outcome = self.interpreter.execute(cell, execute.execution_id, execute.repr_limit)
        try:
            self.displayer.send_open_figures()
        except Exception as exc:  # a figure that cannot render must not lose the result
            print(f"could not send a figure: {type(exc).__name__}: {exc}", file=sys.stderr)
        try:
            self.runtime.flush_progress()
        except (OSError, ValueError):
            pass  # the channel is gone: the result cannot be sent either
        self.capture.end()
        result = Result(
            execution_id=execute.execution_id,
            status=outcome.status,
            value=outcome.value,
            error=outcome.error,
        )
        try:
            self._send_result(result)
        finally:
            self.registry.end(execute.execution_id)
        if self._durable and outcome.status == "ok":
            # After the result: the host has its answer while the child saves in the background.
            self.snapshots.take(self.interpreter.namespace, self._skip_saving)

    def _send_result(self, result: Result) -> None:
        execution_id = result.execution_id
        try:
            self._channel.send(result)
        except OSError as exc:  # the host went away mid-execution; the reader stops us
            self.log(f"could not send the result of {execution_id}: {exc}")
        except (ValueError, TypeError) as exc:
            # Too large for a frame, or not encodable: still end the execution for the host.
            self._channel.send(
                Result(
                    execution_id=execution_id,
                    status="error",
                    error=ErrorInfo(
                        type="ResultTooLarge",
                        message=f"the result could not be sent: {str(exc)[:500]}",
                    ),
                )
            )

    def _bind_aliases(self, tree: ast.Module) -> None:
        """Bind ``mcp_<server>`` names the cell uses without importing them."""
        namespace = self.interpreter.namespace
        wanted = {
            node.id
            for node in ast.walk(tree)
            if isinstance(node, ast.Name)
            and isinstance(node.ctx, ast.Load)
            and node.id.startswith("mcp_")
            and node.id not in namespace
            and node.id != "mcp_servers"
        }
        for name in wanted:
            value: object
            try:
                value = getattr(self.modules.root, name)
            except PolicyDenied as refusal:
                value = RefusedServer(name, refusal)  # using it raises the refusal, not NameError
            except (AttributeError, ToolError):
                continue  # not a server alias: plain NameError semantics apply
            namespace[name] = value
