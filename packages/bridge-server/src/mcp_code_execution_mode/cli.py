"""The ``mcp-code-execution-mode`` command: ``serve`` (default), ``doctor``, ``demo``.

Every setting is a flag of every command (flags win over ``MCP_BRIDGE_*`` variables). A bad
value prints one line naming the variable or flag and exits with status 2, no traceback.
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Sequence

import anyio

from mcp_code_execution_mode import __version__
from mcp_code_execution_mode._logging import configure_logging
from mcp_code_execution_mode.settings import SETTINGS, Settings, SettingsError, load_settings

__all__ = ["build_parser", "main"]

_COMMANDS = ("serve", "doctor", "demo")


def _settings_parent() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("settings (each also an environment variable)")
    for setting in SETTINGS:
        default = f"default {setting.default}" if setting.default is not None else "unset"
        group.add_argument(
            setting.flag,
            dest=setting.name,
            default=None,
            metavar="VALUE",
            help=f"{setting.help} [{setting.env}; {default}]",
        )
    return parent


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for the docs test and ``--help``)."""
    parent = _settings_parent()
    parser = argparse.ArgumentParser(
        prog="mcp-code-execution-mode",
        description="MCP server with one run_python tool: Python in a hardened container that "
        "reaches your other MCP servers.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    serve = commands.add_parser(
        "serve", parents=[parent], help="run the MCP server (default; stdio unless --http)"
    )
    serve.add_argument(
        "--http",
        metavar="HOST:PORT",
        default=None,
        help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio",
    )
    commands.add_parser(
        "doctor", parents=[parent], help="check the runtime, limits, image and configured servers"
    )
    demo = commands.add_parser(
        "demo", parents=[parent], help="run the bridge against real MCP servers and show each step"
    )
    demo.add_argument(
        "--servers-dir",
        metavar="DIR",
        default=None,
        help="where scripts/prepare-servers installed the demo servers (default .cache/servers)",
    )
    return parser


def _normalise(argv: list[str]) -> list[str]:
    # `python -m mcp_code_execution_mode` and a bare `mcp-code-execution-mode [--flags]` are what
    # MCP client configs run: both mean `serve`.
    if not argv or (argv[0] not in _COMMANDS and argv[0] not in ("-h", "--help", "--version")):
        return ["serve", *argv]
    return argv


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit status."""
    parser = build_parser()
    args = parser.parse_args(_normalise(list(sys.argv[1:] if argv is None else argv)))
    try:
        settings = load_settings({s.name: getattr(args, s.name, None) for s in SETTINGS})
    except SettingsError as exc:
        print(f"mcp-code-execution-mode: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level, settings.log_file)
    if args.command == "doctor":
        from mcp_code_execution_mode.doctor import run_doctor

        status: int = anyio.run(run_doctor, settings)
        return status
    if args.command == "demo":
        from mcp_code_execution_mode.demo import run_demo

        # The demo's bridge subprocess gets the same settings, as environment variables.
        forward = {s.env: raw for s in SETTINGS if (raw := getattr(args, s.name, None)) is not None}
        status = anyio.run(run_demo, settings, args.servers_dir, forward)
        return status
    return _serve(settings, args.http)


def _serve(settings: Settings, http: str | None) -> int:
    from mcp_code_execution_mode._compose import executor_factory
    from mcp_code_execution_mode.serve import parse_http_address, serve_http, serve_stdio

    factory = executor_factory(settings)
    if http is None:
        anyio.run(serve_stdio, settings, factory)
        _skip_final_collection()
        return 0
    try:
        host, port = parse_http_address(http)
    except ValueError as exc:
        print(f"mcp-code-execution-mode: --http={http!r}: {exc}", file=sys.stderr)
        return 2
    anyio.run(serve_http, settings, factory, host, port)
    _skip_final_collection()
    return 0


def _skip_final_collection() -> None:
    """Leave out the interpreter's last garbage collection once the server has stopped.

    Everything the bridge owns is closed by now; collecting the objects of every imported module
    (the SDK, pydantic) took 0.6-1.5 s on a loaded 2-core VM, more than killing 128 sandboxes, and
    MCP clients SIGTERM a server 2 s after closing its stdin. Frozen objects are never collected.
    """
    gc.disable()
    gc.freeze()
