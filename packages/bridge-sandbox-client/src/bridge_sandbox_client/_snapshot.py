"""Durable sessions, the sandbox's half: save the namespace and ``/tmp`` after each successful
execution (loading them back into a fresh sandbox of the same session: ``_restoring``).

A small state (the kilobytes most sessions hold) is saved by the main thread itself, right after
the result is sent: pickled with cloudpickle and ``/tmp`` tarred into memory (see ``_tmpfiles``),
capped at :data:`INLINE_LIMIT` (numpy and pandas buffers are counted before they are copied), and
sent in one ``Snapshot`` frame, or, when its bytes equal those of the last state sent (compared,
not hashed: the last one is kept), as an "unchanged" snapshot with no data. That costs a fraction
of a millisecond, far less than a fork. It is only tried while no thread of user code runs (a
thread could change the namespace while it is pickled).

A larger state, or one with user threads running, is saved without holding up the next
execution: the main thread ``os.fork()``\\ s (copy-on-write) and goes back to its inbox; the child
serialises the namespace frozen at that instant, tars ``/tmp`` and writes both into a pipe; a
thread of this process forwards the pipe as ``Snapshot`` frames over the one channel (so frames
never interleave and no shared filesystem is needed, whatever engine runs the sandbox). The child
hashes what it writes (SHA-256) and this process keeps the digest of the last state the host got
whole from a child: a state whose digest equals it (a large DataFrame only read since) is sent as
an "unchanged" snapshot too, its bytes made and hashed but not sent or written again.

A state starts with the top-level modules its pickle needs (see ``_preimport``): a restoring
sandbox imports them while the rest of the state still arrives.

The bytes are opaque to the host; only a sandbox of the same session ever loads them. Names whose
values cannot be pickled (open files, sockets, generators, threads, ...) are left out, named, and
everything else is kept, shared references included (one pickle of all the good names).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import types
from collections.abc import Callable
from typing import Any, BinaryIO

from bridge_protocol import FORK_SNAPSHOT_PREFIX, UNCHANGED_SNAPSHOT_PREFIX, Snapshot, SnapshotCopy

from bridge_sandbox_client._pickling import MAX_UNSAVED, describe_error, pickle_namespace
from bridge_sandbox_client._saving_pipe import _COPY, _DATA, _RECORD, CHUNK, MAX_LAYOUT, HostCopy
from bridge_sandbox_client._tmpfiles import SmallTar, TooLarge

__all__ = ["CHUNK", "HostCopy", "SnapshotTaker", "is_bridge_object", "state_limit"]

# A saved state: MAGIC, u16 length of the hint, the hint (the top-level modules the pickle
# needs, one per line; see bridge_protocol.hints), u64 length of the namespace pickle, the pickle,
# a tar stream of ``/tmp``. MAGIC_1 states (no hint) from earlier versions still load.
INLINE_LIMIT = 256 * 1024
"""Largest state (pickle and ``/tmp`` tar together) saved by the main thread itself; past it, a
forked child saves it (see the module's docstring). Pickling up to this much takes a few ms at
worst, and a state found larger is saved by a child from then on, until one is small again."""
_OWN_THREADS = "bridge-"
"""Name prefix of the sandbox client's own threads (any other live thread is user code's)."""

Send = Callable[[Snapshot | SnapshotCopy], None]

_REPORT_LIMIT = 1024 * 1024
"""Most bytes of the saving child's report read (its unsaved names, cut, JSON-escaped, take at
most a few hundred KiB)."""
_MEMORY_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")
"""Where a container's memory limit is read (cgroup v2, then v1)."""


def state_limit() -> int | None:
    """The largest state this sandbox makes: its memory limit (a state larger than that could
    never be loaded back by a sandbox of the session); None when no limit can be read."""
    for path in _MEMORY_LIMITS:
        try:
            with open(path, encoding="ascii") as file:
                text = file.read().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 1 << 60:  # cgroup v1 says "no limit" with 2**63-ish
            return int(text)
        return None  # "max": unlimited
    return None


def _read_report(fd: int) -> tuple[tuple[str, ...], HostCopy, bool] | str | None:
    """What the saving child wrote last: the names it left out, the state it made (its digest
    and layout; no snapshot id) and whether that equals the one it was given; or why it made
    none (a str); None when unreadable."""
    try:
        with os.fdopen(fd, "rb", closefd=False) as pipe:
            report = json.loads(pipe.read(_REPORT_LIMIT))
        if "error" in report:
            return str(report["error"])[:1000]
        unsaved = tuple(str(item) for item in report["unsaved"][: MAX_UNSAVED + 1])
        layout = {
            (bytes.fromhex(digest), int(length)): int(offset)
            for digest, offset, length in report["layout"][:MAX_LAYOUT]
        }
        made = HostCopy(bytes.fromhex(report["digest"]), "", layout)
        return unsaved, made, bool(report["same"])
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def _user_threads_run() -> bool:
    return any(
        not thread.name.startswith(_OWN_THREADS) and thread is not threading.main_thread()
        for thread in threading.enumerate()
    )


def inline_state(
    namespace: dict[str, Any], skip: Callable[[str, Any], bool], tmp: SmallTar
) -> tuple[tuple[bytes, bytes, bytes], list[str]]:
    """The saved state built in this process, in its three parts (the pickle's header, the
    pickle, the tar of ``/tmp``): raises :class:`TooLarge` past :data:`INLINE_LIMIT` in all."""
    tar = tmp.tar(INLINE_LIMIT)  # first: walking /tmp is cheaper than pickling
    pickled = pickle_namespace(namespace, skip, INLINE_LIMIT - len(tar))
    head = pickled.header()
    if len(head) + len(pickled.data) + len(tar) > INLINE_LIMIT:
        raise TooLarge
    return (head, pickled.data, tar), pickled.unsaved


class SnapshotTaker:
    """Forks a saving child after each successful execution and forwards what it writes."""

    def __init__(self, send: Send, log: Callable[[str], None], *, copies: bool = False) -> None:
        self._send = send
        self._copies = copies
        """Whether the host copies unchanged buffers from the state it holds (version 2)."""
        self._log = log
        self._sequence = 0
        self._inline = True
        """Whether the next state is tried inline (the last one forked was small, or none was)."""
        self._sent: tuple[bytes, bytes, bytes] | None = None
        """The parts of the last state sent inline (None: the host's copy is not known to
        match); at most :data:`INLINE_LIMIT` bytes kept."""
        self._tmp = SmallTar()
        self._forwarder: threading.Thread | None = None
        self._taking = threading.RLock()
        """Held by :meth:`take`: a fork's take may come from a thread of user code
        (``runtime.fork_session_sync``) while the main thread takes the session's own; each must
        join the forwarder before it and set its own, or one goes unjoined and frames interleave."""
        self._pipes: set[int] = set()
        """The saving pipes' fds this process holds: a child that user code forks (a thread's
        ``os.fork``, multiprocessing) closes its copies, or a write end it kept would hold the
        forwarder (and every later take) until that child exits."""
        self._saver: int | None = None
        """The thread forking the saving child right now (that child keeps its pipes)."""
        self._fds = threading.RLock()
        """Held while the pipes are made, registered, closed and forgotten, and by every fork
        (its ``before`` hook): a fork in between would keep an unregistered write end, or
        close in its child a number reused meanwhile."""
        os.register_at_fork(
            before=self._fds.acquire,
            after_in_parent=self._fds.release,
            after_in_child=self._after_fork_in_child,
        )
        self._resend = False
        """Set by :meth:`resend`, applied by the next :meth:`take` (after the forwarder, which
        records a digest at its end, is done)."""
        self._limit = state_limit()
        """The largest state the saving child makes (see :func:`state_limit`)."""
        self._saving_pid: int | None = None
        """The saving child still running (not yet reaped), for :meth:`resend` to stop."""
        self._stopping = threading.Lock()
        """Held while :attr:`_saving_pid` is read or changed: a child is never signalled once its
        forwarder has reaped it (its pid could be another process's by then)."""
        self._held: HostCopy | None = None
        """The last state a child sent and the host got to its end (None: the host's copy is
        not known to match one); only this process's own threads change it, one at a time (a
        take waits for the forwarder before it forks)."""

    def _after_fork_in_child(self) -> None:
        self._fds.release()
        if self._saver == threading.get_ident():
            return  # the saving child: _child closes what it does not use
        for fd in tuple(self._pipes):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._pipes = set()

    def resend(self) -> None:
        """The host lost the last state sent (its save failed there): the next is sent whole.

        Also the host's answer to a state it refuses while it is still being sent (past the
        largest it keeps): the saving child still writing it is stopped, so that the rest of it
        is neither made nor sent (the forwarder then ends the snapshot as failed)."""
        self._resend = True
        with self._stopping:
            if self._saving_pid is not None:
                with contextlib.suppress(OSError):
                    os.kill(self._saving_pid, signal.SIGKILL)

    def fork_id(self) -> str:
        """A new id for a fork's snapshot (the host writes it into the fork, not the session)."""
        with self._taking:
            self._sequence += 1
            return f"{FORK_SNAPSHOT_PREFIX}{os.getpid()}-{self._sequence}"

    def take(
        self,
        namespace: dict[str, Any],
        skip: Callable[[str, Any], bool],
        snapshot_id: str | None = None,
    ) -> None:
        """Save ``namespace`` and ``/tmp`` as they are now: at once when small, else in a child.

        A snapshot still being forwarded is finished first: the frames of two never interleave
        (the host would take the tail of one for a whole state). Any thread may call it.
        """
        with self._taking:
            self._take(namespace, skip, snapshot_id)

    def _take(
        self,
        namespace: dict[str, Any],
        skip: Callable[[str, Any], bool],
        snapshot_id: str | None,
    ) -> None:
        if self._forwarder is not None:
            self._forwarder.join()
            self._forwarder = None
        if self._resend:
            self._sent = self._held = None
            self._resend = False
        if snapshot_id is None:
            self._sequence += 1
            snapshot_id = f"s-{os.getpid()}-{self._sequence}"
            if (
                self._inline
                and not _user_threads_run()
                and self._take_inline(namespace, skip, snapshot_id)
            ):
                return
        self._sent = None
        own = not snapshot_id.startswith(FORK_SNAPSHOT_PREFIX)
        last = self._held if own else None  # a fork's state is always sent whole
        with self._fds:
            try:
                # Before the fork, and with it all the child runs: see _saving_child.
                from bridge_sandbox_client._saving_child import child
            except Exception as exc:  # no file descriptor left, or a user's module of that name
                self._fail(snapshot_id, f"the saving process could not be prepared: {exc}")
                return
            try:
                read_fd, write_fd = os.pipe()
                self._pipes.update((read_fd, write_fd))
            except OSError as exc:
                self._fail(snapshot_id, f"no pipe for the saving process: {exc}")
                return
            try:
                report_read, report_write = os.pipe()
                self._pipes.update((report_read, report_write))
            except OSError as exc:  # the first pipe took the last fds user code left free
                self._close(read_fd, write_fd)
                self._fail(snapshot_id, f"no pipe for the saving process: {exc}")
                return
            self._saver = threading.get_ident()
            try:
                pid = os.fork()
            except OSError as exc:
                self._saver = None
                self._close(read_fd, write_fd, report_read, report_write)
                self._fail(snapshot_id, f"the saving process could not start: {exc}")
                return
            if pid == 0:  # pragma: no cover (the child; measured by the integration tests)
                os.close(read_fd)
                os.close(report_read)
                limit = self._limit
                child(write_fd, report_write, namespace, skip, last, self._copies and own, limit)
            self._saver = None
            with self._stopping:
                self._saving_pid = pid
            self._close(write_fd, report_write)
        if own:
            self._held = None  # until this one is known to have reached the host whole
        self._forwarder = threading.Thread(
            target=self._forward,
            args=(snapshot_id, read_fd, report_read, pid, own, last),
            name="bridge-snapshot",
            daemon=True,
        )
        self._forwarder.start()

    def _take_inline(
        self, namespace: dict[str, Any], skip: Callable[[str, Any], bool], snapshot_id: str
    ) -> bool:
        """Save a small state from this process; False when it is too large for that."""
        try:
            parts, unsaved = inline_state(namespace, skip, self._tmp)
        except TooLarge:
            self._inline = False
            return False
        except BaseException as exc:  # user code's __reduce__ may raise anything
            self._sent = self._held = None
            self._fail(snapshot_id, f"the state could not be saved: {describe_error(exc)}")
            return True
        if parts == self._sent:  # byte for byte: equal lengths first, then one memcmp each
            message = Snapshot(
                f"{UNCHANGED_SNAPSHOT_PREFIX}{snapshot_id}", last=True, unsaved=tuple(unsaved)
            )
        else:
            message = Snapshot(snapshot_id, data=b"".join(parts), last=True, unsaved=tuple(unsaved))
        self._sent = None
        self._held = None  # the host's copy is this inline state from now on
        try:
            self._send(message)
        except (OSError, ValueError) as exc:
            self._log(f"could not send snapshot {snapshot_id}: {exc}")
            return True
        self._sent = parts
        return True

    def _close(self, *fds: int) -> None:
        with self._fds:  # no fork sees one closed but still registered, or the reverse
            for fd in fds:
                self._pipes.discard(fd)
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _fail(self, snapshot_id: str, error: str) -> None:
        self._held = None  # the host takes no state as saved after a failed one
        try:
            self._send(Snapshot(snapshot_id, last=True, error=error))
        except (OSError, ValueError) as exc:
            self._log(f"could not report a failed snapshot: {exc}")

    def _forward(
        self,
        snapshot_id: str,
        read_fd: int,
        report_fd: int,
        pid: int,
        own: bool,
        last: HostCopy | None,
    ) -> None:
        error, size = "", 0
        unsaved: tuple[str, ...] = ()
        base = "" if last is None else last.snapshot_id
        try:
            with os.fdopen(read_fd, "rb", closefd=False) as pipe:
                size = self._forward_records(pipe, snapshot_id, base)
        except (OSError, ValueError) as exc:
            error = f"the state could not be sent: {exc}"
        finally:
            self._close(read_fd)
        try:
            report = _read_report(report_fd)
        finally:
            self._close(report_fd)
        with self._stopping:
            self._saving_pid = None  # from now on it may be reaped: never signalled again
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:  # user code reaped it (os.wait()): its status is unknown
            status = 0 if not error else 1
        if isinstance(report, str):  # it stopped itself (too large): its reason comes first
            error = report
        if status and not error:
            if os.WIFSIGNALED(status):
                error = f"the saving process was killed by signal {os.WTERMSIG(status)}"
            else:
                error = "the saving process failed (see the container log)"
        if not error and report is None:
            error = "the saving process did not say what it saved"
        if not error and report is not None and not isinstance(report, str):
            unsaved, held, same = report
            if same != (size == 0):
                error = "the saving process's report does not match what it sent"
            elif own:
                if same:
                    self._held = last
                    unchanged = f"{UNCHANGED_SNAPSHOT_PREFIX}{snapshot_id}"
                    self._end(Snapshot(unchanged, last=True, unsaved=unsaved))
                    return
                self._held = HostCopy(held.digest, snapshot_id, held.layout)
                self._inline = size <= INLINE_LIMIT  # small again: the next one is tried inline
        self._end(Snapshot(snapshot_id, last=True, unsaved=unsaved, error=error))

    def _forward_records(self, pipe: BinaryIO, snapshot_id: str, base: str) -> int:
        """Send what the saving child writes (see :class:`_Records`) as ``snapshot`` and
        ``snapshot_copy`` frames; return the bytes of the state they make."""
        size = 0
        while head := pipe.read(_RECORD.size):
            if len(head) != _RECORD.size:
                raise ValueError("the saving process's output was cut short")
            kind, first, second = _RECORD.unpack(head)
            if kind == _COPY and base:
                self._send(SnapshotCopy(snapshot_id, base, first, second))
                size += second
                continue
            if kind != _DATA:
                raise ValueError("the saving process wrote something unknown")
            while first:
                chunk = pipe.read(min(first, CHUNK))
                if not chunk:
                    raise ValueError("the saving process's output was cut short")
                first -= len(chunk)
                size += len(chunk)
                self._send(Snapshot(snapshot_id, data=chunk))
        return size

    def _end(self, message: Snapshot) -> None:
        try:
            self._send(message)
        except (OSError, ValueError) as exc:
            self._held = None
            self._log(f"could not end snapshot {message.snapshot_id}: {exc}")


def is_bridge_object(value: Any) -> bool:
    """Objects the sandbox client injects (the ``mcp`` proxies): rebuilt, never saved."""
    if isinstance(value, types.ModuleType):
        return value.__name__ == "mcp" or value.__name__.startswith(("mcp.", "mcp_"))
    return type(value).__module__.startswith("bridge_sandbox_client")
