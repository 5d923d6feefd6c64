"""The supervisor each stdio MCP server runs under on Linux: it owns every descendant.

Run by the bridge as ``python -I -S _supervisor.py --parent PID [--cgroup DIR] [--unset NAME]
-- COMMAND [ARGS...]``: stdlib only and no site packages, so it starts in a few milliseconds. It

1. joins ``DIR`` (the server's cgroup, when the bridge could make one) so that everything the
   server starts is in it, whatever the server does;
2. becomes a *child subreaper* (``PR_SET_CHILD_SUBREAPER``): a descendant whose parent exits is
   re-parented to this process instead of init, so a daemon the server starts (fork, ``setsid``,
   fork) stays within reach; and asks for SIGTERM when the bridge dies (``PR_SET_PDEATHSIG``);
3. runs the server as its child with the same stdin, stdout and stderr (the JSON-RPC bytes never
   pass through here), the parent-death signal SIGKILL and the environment it was given: Python
   adds ``LC_CTYPE`` to its own when the locale is C (PEP 538), so the bridge names with
   ``--unset`` what the server must not see;
4. when the server exits, SIGKILLs every remaining descendant (each killed process's children
   are re-parented here, so repeating until none is left reaches all of them) and exits with the
   server's status (a signal death is re-raised, so the bridge sees it as such);
5. on SIGTERM (the bridge stopping the server, or the bridge's death): SIGTERM to the process
   group and to every child, ``GRACE`` seconds for the server to exit, then step 4.

Why a process of its own rather than the bridge as the subreaper: the bridge also parents the
private podman service, whose ``conmon`` daemons would be re-parented to it and must not be
touched; and a subreaper that outlives a SIGKILLed bridge cleans up at once, without waiting for
the next bridge to start (which only has to handle the case where this process was killed too:
the cgroup and the bridge's records cover it, see ``_scope.py``).

Signals are blocked and taken with ``sigtimedwait``: no handler can interrupt the bookkeeping,
and no SIGCHLD is lost between fork and the first wait.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import sys
import time
from typing import NoReturn

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
GRACE = 2.0
"""Seconds between SIGTERM to the server and SIGKILL of every descendant (the SDK's stdio client
gives the same grace between its SIGTERM and SIGKILL)."""
EXEC_FAILED = 127
"""Exit status when the server cannot be executed (the shell's convention)."""
_STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
_WAITED = {signal.SIGCHLD, *_STOP_SIGNALS}


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error))


def _say(text: str) -> None:
    os.write(2, f"mcp-bridge supervisor: {text}\n".encode(errors="replace"))


def _children(parent: int) -> list[int]:
    """Pids whose parent is ``parent`` (zombies included), from ``/proc``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rpartition(b")")[2].split()
        except OSError:
            continue  # exited meanwhile
        if len(fields) > 1 and int(fields[1]) == parent:
            found.append(int(entry))
    return found


def _start_server(argv: list[str], parent: int, unset: list[str]) -> int:
    pid = os.fork()
    if pid:
        return pid
    try:  # the child: from here on, only exec or _exit
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:
            os._exit(EXEC_FAILED)  # the supervisor died before the prctl took effect
        signal.pthread_sigmask(signal.SIG_SETMASK, set())  # the mask survives exec
        for name in unset:
            os.environ.pop(name, None)
        os.execvp(argv[0], argv)
    except OSError as exc:
        _say(f"cannot run {argv[0]!r}: {exc.strerror or exc}")
    os._exit(EXEC_FAILED)


def _reap(server: int, status: int | None) -> int | None:
    """Collect every exited child without blocking; the server's status once it is known."""
    while True:
        try:
            pid, code = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return status
        if pid == 0:
            return status
        if pid == server and status is None:
            status = code


def _sweep(server: int, status: int | None) -> int | None:
    """SIGKILL every descendant, level by level, until this process has no child left."""
    me = os.getpid()
    while kids := _children(me):
        for kid in kids:
            try:
                os.kill(kid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for kid in kids:
            try:
                _, code = os.waitpid(kid, 0)
            except ChildProcessError:
                continue
            if kid == server and status is None:
                status = code
    return _reap(server, status)


def _ask_to_stop(server: int) -> None:
    targets = [os.getpgrp()] if os.getpgrp() == os.getpid() else []
    for group in targets:
        try:
            os.killpg(group, signal.SIGTERM)  # blocked here: only the others act on it
        except ProcessLookupError:
            pass
    for kid in {server, *_children(os.getpid())}:
        try:
            os.kill(kid, signal.SIGTERM)
        except ProcessLookupError:
            pass


def _exit_like(status: int | None) -> NoReturn:
    if status is None:
        os._exit(EXEC_FAILED)
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # re-raising SIGSEGV must not dump us
        try:
            signal.signal(number, signal.SIG_DFL)
        except (OSError, ValueError):
            pass  # SIGKILL and SIGSTOP cannot be changed, and need not be
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {number})
        os.kill(os.getpid(), number)
        os._exit(128 + number)
    os._exit(os.WEXITSTATUS(status))


def _supervise(server: int) -> int | None:
    status: int | None = None
    deadline: float | None = None
    while status is None:
        info: signal.struct_siginfo | None
        if deadline is None:
            info = signal.sigwaitinfo(_WAITED)
        else:
            left = deadline - time.monotonic()
            info = signal.sigtimedwait(_WAITED, left) if left > 0 else None
        if info is None:
            break  # the grace is over: the sweep kills what is left
        if info.si_signo == signal.SIGCHLD:
            status = _reap(server, status)
        elif deadline is None:
            _ask_to_stop(server)
            deadline = time.monotonic() + GRACE
    return _sweep(server, status)


def main(args: list[str]) -> NoReturn:
    parent, cgroup, unset = None, None, []
    while args and args[0] != "--":
        option, value, *args = args
        if option == "--parent":
            parent = int(value)
        elif option == "--cgroup":
            cgroup = value
        elif option == "--unset":
            unset.append(value)
    argv = args[1:]
    if parent is None or not argv:
        _say("usage: --parent PID [--cgroup DIR] [--unset NAME] -- COMMAND [ARGS...]")
        os._exit(2)
    if cgroup is not None:
        try:
            with open(os.path.join(cgroup, "cgroup.procs"), "w") as procs:
                procs.write(str(os.getpid()))
        except OSError as exc:
            _say(f"cannot join cgroup {cgroup}: {exc.strerror or exc}")
    signal.pthread_sigmask(signal.SIG_BLOCK, _WAITED)
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:
        _say("the bridge exited before its server started")
        os._exit(EXEC_FAILED)
    server = _start_server(argv, os.getpid(), unset)
    # Only the server holds the JSON-RPC pipes: their end must mean the server's end.
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    _exit_like(_supervise(server))


if __name__ == "__main__":
    main(sys.argv[1:])
