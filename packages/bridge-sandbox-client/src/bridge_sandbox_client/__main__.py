"""``python -m bridge_sandbox_client [--socket PATH | --stdio]``: the sandbox container's command.

``--stdio`` carries the channel on the process's own stdin and stdout (an engine with no shared
filesystem attaches to them, see :mod:`._stdio`); otherwise it is the unix socket at ``--socket``.

Exit status: 0 after ``Shutdown`` or when the host closes the channel; 1 when the channel cannot
be opened or breaks during the handshake; 2 for bad command-line arguments; 3 when the host
refuses this client (no common protocol version).

When the host's end of the channel is gone (the bridge exited, was killed, or closed the channel)
the process exits at once from the thread reading the channel, even while user code runs and
whatever it does with interrupts: nothing a sandbox holds can reach anyone any more, and the
container (started with auto-removal) then disappears without the bridge's help.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, NamedTuple, NoReturn

from bridge_protocol import ProtocolError
from bridge_protocol.paths import PREIMPORT_FILE_NAME, SANDBOX_CHANNEL_SOCKET

from bridge_sandbox_client import __version__
from bridge_sandbox_client._channel import Channel, Refused, signals_deferred
from bridge_sandbox_client._client import SandboxClient
from bridge_sandbox_client._display import configure_matplotlib
from bridge_sandbox_client._preimport import EarlyImports
from bridge_sandbox_client._stdio import StdioPipes

if TYPE_CHECKING:
    import argparse

__all__ = ["EXIT_CHANNEL_FAILED", "EXIT_REFUSED", "main"]

EXIT_CHANNEL_FAILED = 1
EXIT_REFUSED = 3
_hard_exit = os._exit
"""Bound before any user code runs, so code that replaces ``os._exit`` cannot keep the process
alive after its host is gone."""
CONNECT_TIMEOUT = 30.0
"""Seconds to connect and to get the host's answer to ``Hello``: the host is already listening
when the container starts, so only a broken host takes this long."""


class _Arguments(NamedTuple):
    socket: str
    stdio: bool


def _arguments(argv: Sequence[str] | None) -> _Arguments:
    """The command line, read by :mod:`argparse` unless it is one of the forms the runtimes pass.

    Those (no argument, ``--stdio``, ``--socket PATH``) mean what argparse would make of them;
    anything else (``--help``, ``--version``, a mistake) goes to argparse. So a sandbox never
    imports it (~0.4 MiB of every idle sandbox's memory, see ``bench/density.py``).
    """
    args = sys.argv[1:] if argv is None else list(argv)
    if not args:
        return _Arguments(SANDBOX_CHANNEL_SOCKET, stdio=False)
    if args == ["--stdio"]:
        return _Arguments(SANDBOX_CHANNEL_SOCKET, stdio=True)
    if len(args) == 2 and args[0] == "--socket" and args[1] and not args[1].startswith("-"):
        return _Arguments(args[1], stdio=False)
    parsed = _parser().parse_args(args)
    return _Arguments(parsed.socket, stdio=parsed.stdio)


def _parser() -> argparse.ArgumentParser:
    import argparse  # only for a command line the runtimes never pass: see _arguments

    parser = argparse.ArgumentParser(
        prog="bridge-sandbox",
        description="Run user code for the MCP code-execution bridge, over a unix socket "
        "or this process's stdin/stdout.",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--socket",
        default=SANDBOX_CHANNEL_SOCKET,
        help=f"the host's channel socket (default: {SANDBOX_CHANNEL_SOCKET})",
    )
    where.add_argument(
        "--stdio",
        action="store_true",
        help="the channel is this process's stdin and stdout (the engine attaches to them)",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return parser


def _fail(message: str, status: int) -> NoReturn:
    print(f"bridge-sandbox: {message}", file=sys.stderr, flush=True)
    raise SystemExit(status)


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Connect, handshake, serve executions until shutdown, then exit the process.

    Never returns: the process ends with ``os._exit`` so threads left running by user code cannot
    keep the sandbox alive after the host said goodbye.
    """
    args = _arguments(argv)
    # Modules the host named for the state this sandbox will restore: imported while it connects
    # and the state arrives (a thread; the client waits for it before it runs anything).
    # Signals stay with the main thread; matplotlib must find its backend set when it loads.
    # The file is beside the channel's socket (none over stdio: no shared directory).
    early = EarlyImports(
        None if args.stdio else os.path.join(os.path.dirname(args.socket), PREIMPORT_FILE_NAME)
    )
    if early.modules:
        configure_matplotlib()
        with signals_deferred():
            early.start()
    if args.stdio:
        channel = Channel(StdioPipes.take_stdio())
    else:
        try:
            channel = Channel.connect(args.socket, timeout=CONNECT_TIMEOUT)
        except OSError as exc:
            _fail(f"cannot connect to the host at {args.socket}: {exc}", EXIT_CHANNEL_FAILED)
    try:
        channel.handshake(__version__, timeout=CONNECT_TIMEOUT)
    except Refused as exc:
        channel.close()
        _fail(str(exc), EXIT_REFUSED)
    except (OSError, ProtocolError) as exc:
        channel.close()
        _fail(f"handshake with the host failed: {exc}", EXIT_CHANNEL_FAILED)
    client = SandboxClient(channel, host_gone=partial(_hard_exit, 0), early=early)
    try:
        status = client.serve()
    except BaseException:
        # stderr is captured for user code by now: report to the container log instead.
        client.log("internal error, exiting:\n" + traceback.format_exc())
        status = EXIT_CHANNEL_FAILED
    channel.close()
    os._exit(status)


if __name__ == "__main__":
    main()
