"""The ``mcp-code-execution-mode`` command: ``serve`` (default), ``doctor``, ``demo``, ``setup``,
``token``, ``image``.

Every ``MCP_BRIDGE_*`` variable is a flag of every command (flags win over variables); the old
flags of settings that moved to the settings file are still accepted, hidden from ``--help``, for
this release. A bad value (or settings-file key) prints one line naming it and exits with
status 2, no traceback; except
when an MCP client started the server (stdin is not a terminal): then the server starts anyway
and every ``run_python`` call answers with the problem and its fix, because a server that exits
shows in the client as nothing more than "Connection closed".
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import gc
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, NoReturn

import anyio
from bridge_core.runtime import process_problem

from mcp_code_execution_mode import __version__
from mcp_code_execution_mode._deprecated import MOVED, old_flag, old_name
from mcp_code_execution_mode._logging import configure_logging
from mcp_code_execution_mode.settings import (
    SETTINGS,
    Settings,
    SettingsError,
    load_settings,
)

if TYPE_CHECKING:
    from mcp_code_execution_mode.server import ExecutorFactory

__all__ = ["COMMANDS", "build_parser", "main"]

logger = logging.getLogger(__name__)

COMMANDS = ("serve", "doctor", "demo", "setup", "token", "workflows", "kube-spec", "image")

# Settings holding paths: written into a client's config by `setup`, they must not depend on the
# directory `setup` ran in.
_PATH_SETTINGS = frozenset({"config", "state_dir", "log_file", "http_token_file"})
# `_direct.MODES`, spelled out: importing that module (the SDK's types) would slow every start.
_TOOL_MODES = ("code", "direct", "both")


class UsageError(Exception):
    """The command line does not parse (argparse's message)."""


class _Parser(argparse.ArgumentParser):
    # argparse exits on a bad command line; `main` decides what a bad line means instead.
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


class _ClientKeys:
    """The clients ``setup`` knows, for argparse's ``choices``: looked up only when a command line
    names one or help shows them, so that starting the server does not import ``setup``."""

    def _keys(self) -> list[str]:
        from mcp_code_execution_mode.setup import CLIENTS

        return sorted(CLIENTS)

    def __contains__(self, key: object) -> bool:
        return key in self._keys()

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys())


def _settings_parent() -> _Parser:
    parent = _Parser(add_help=False)
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
    for variable in MOVED:  # deprecated: accepted for this release, not shown
        parent.add_argument(old_flag(variable), dest=old_name(variable), default=None,
                            help=argparse.SUPPRESS)  # fmt: skip
    return parent


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for the docs test and ``--help``)."""
    parent = _settings_parent()
    parser = _Parser(
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
    serve.add_argument(
        "--tools",
        choices=_TOOL_MODES,
        default=None,
        help="which tools to list: code (run_python), direct (each proxied tool as "
        "server__tool) or both; overrides [tools] mode of the settings file",
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
        help="where scripts/prepare-servers installed the demo servers "
        "(default: .cache/servers of this directory or of the clone the package runs from)",
    )
    setup = commands.add_parser(
        "setup",
        parents=[parent],
        help="add the bridge to an MCP client and move its other servers behind the bridge",
        description="Add the bridge to CLIENT's user-wide config file (this Python, by absolute "
        "path; the settings given as flags go into its env) and move CLIENT's other servers into "
        "the bridge's servers file (--config, default ~/.config/mcp-code-execution-mode/"
        "servers.json), so the client loads one tool instead of every server's schemas. "
        "The change is shown first; a backup of each file is kept beside it.",
    )
    setup.add_argument("client", choices=_ClientKeys(), metavar="CLIENT",
                       help="one of %(choices)s")  # fmt: skip
    setup.add_argument("--dry-run", action="store_true", help="show the change, write nothing")
    setup.add_argument("--undo", action="store_true", help="undo the last setup of CLIENT")
    setup.add_argument(
        "--force", action="store_true", help="with --undo: undo even what changed since"
    )
    setup.add_argument(
        "--keep",
        nargs="+",
        action="extend",
        default=[],
        metavar="NAME",
        help="servers to leave in the client's file (loaded by it directly)",
    )
    setup.add_argument(
        "--tools",
        choices=_TOOL_MODES,
        default=None,
        help="the entry starts the bridge with serve --tools MODE: code (run_python), direct "
        "(each proxied tool as server__tool) or both; default: an existing entry's mode, else "
        "none (the settings file's [tools] mode, code unless set)",
    )
    token = commands.add_parser(
        "token",
        parents=[parent],
        help="make a bearer token for serve --http: its hash goes to MCP_BRIDGE_HTTP_TOKEN_FILE, "
        "the token to stdout",
    )
    token.add_argument("name", metavar="NAME", help="who the token is for (the principal)")
    workflows = commands.add_parser(
        "workflows",
        parents=[parent],
        help="export a principal's saved workflows as .py files to review and commit, or "
        "import such files",
    )
    workflows.add_argument("action", choices=("export", "import"), help="export or import")
    workflows.add_argument("directory", metavar="DIR", help="where the .py files are")
    workflows.add_argument(
        "--principal",
        metavar="NAME",
        default=None,
        help="an HTTP token's principal, by its name in the token file (default: the stdio "
        "client's workflows)",
    )
    kube = commands.add_parser(
        "kube-spec",
        parents=[parent],
        help="print the Kubernetes Pod and NetworkPolicy (YAML) a sandbox would be submitted as",
    )
    kube.add_argument("--pod-name", default="mcp-bridge-sandbox", help="the Pod's name")
    kube.add_argument(
        "--seccomp-dir",
        metavar="DIR",
        default=None,
        help="also write the sandbox seccomp profile into DIR (the kubelet's seccomp root, "
        "/var/lib/kubelet/seccomp on a node)",
    )
    kube.add_argument(
        "pod_command",
        nargs="*",
        metavar="-- COMMAND",
        help="replace the image's command (default: the sandbox client)",
    )
    # Parsed by bridge-image itself (see main): listed here for --help.
    commands.add_parser(
        "image",
        add_help=False,
        help="build, pull, verify or inspect the sandbox image "
        "(image build|pull|base|verify|status|tag|release --help)",
    )
    return parser


def _normalise(argv: list[str]) -> list[str]:
    # `python -m mcp_code_execution_mode` and a bare `mcp-code-execution-mode [--flags]` are what
    # MCP client configs run: both mean `serve`.
    if not argv or (argv[0] not in COMMANDS and argv[0] not in ("-h", "--help", "--version")):
        return ["serve", *argv]
    return argv


def _started_by_a_client(argv: list[str]) -> bool:
    """``serve`` over stdio with a pipe for stdin: an MCP client, not a person, is reading."""
    return argv[0] == "serve" and "--http" not in argv and not sys.stdin.isatty()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit status."""
    given = list(sys.argv[1:] if argv is None else argv)
    if given and not given[0].startswith("-") and given[0] not in COMMANDS:
        print(
            f"mcp-code-execution-mode: unknown command {given[0]!r}; the commands are "
            f"{', '.join(COMMANDS)} (mcp-code-execution-mode --help)",
            file=sys.stderr,
        )
        return 2
    if given and given[0] == "image":
        # The image builder's own command line, from the recipe installed with this version.
        from bridge_image.cli import main as image_main

        return image_main(given[1:], prog="mcp-code-execution-mode image")
    normalised = _normalise(given)
    if normalised[0] in COMMANDS and (problem := process_problem()):  # `image` returned above
        # Windows: the bridge needs POSIX process groups, signals, file owners and ssh's
        # control master; it runs in WSL2. Said here, before anything that would fail with a
        # traceback instead.
        print(f"mcp-code-execution-mode: {problem}", file=sys.stderr)
        return 2
    parser = build_parser()
    try:
        args = parser.parse_args(normalised)
        settings = load_settings(_given_flags(args))
        if getattr(args, "tools", None) is not None:  # --tools over the file's [tools] mode
            settings = dataclasses.replace(settings, tools=args.tools)
        if args.command == "serve":
            _check_trace_export()  # read again by the lifespan, which exports
    except UsageError as exc:
        if _started_by_a_client(normalised):
            return _serve_misconfigured(
                f"the server's command-line arguments are wrong: {exc}",
                "correct the \"args\" of this server's entry in your MCP client's configuration "
                "(mcp-code-execution-mode serve --help lists them), then restart the server",
            )
        parser.print_usage(sys.stderr)
        print(f"mcp-code-execution-mode: {exc}", file=sys.stderr)
        return 2
    except SettingsError as exc:
        if _started_by_a_client(normalised):
            return _serve_misconfigured(str(exc), exc.fix)
        print(f"mcp-code-execution-mode: {exc}", file=sys.stderr)
        print(f"  fix: {exc.fix}", file=sys.stderr)
        return 2
    # setup writes only the files it shows, and nothing at all with --dry-run: not the log file
    # (nor the state dir holding it) either; it reports on stdout.
    log_file = None if args.command == "setup" else settings.resolved_log_file
    configure_logging(settings.log_level, log_file)
    for deprecation in settings.deprecations:  # once per start; doctor prints them too
        logger.warning("%s; %s", deprecation.line, deprecation.fix)
    if args.command == "doctor":
        from mcp_code_execution_mode.doctor import run_doctor

        status: int = anyio.run(run_doctor, settings)
        return status
    if args.command == "demo":
        from mcp_code_execution_mode.demo import run_demo

        # The demo's bridge subprocess gets the same settings, as environment variables.
        forward = {
            "MCP_BRIDGE_" + name.upper(): raw for name, raw in _given_flags(args).items() if raw
        }
        status = anyio.run(run_demo, settings, args.servers_dir, forward)
        return status
    if args.command == "setup":
        return _setup(args, settings)
    if args.command == "token":
        return _token(settings, args.name)
    if args.command == "workflows":
        from mcp_code_execution_mode._workflow_files import run_workflows

        return run_workflows(settings, args.action, args.directory, args.principal)
    if args.command == "kube-spec":
        from mcp_code_execution_mode._kube_spec import run_kube_spec

        return run_kube_spec(
            settings,
            pod_name=args.pod_name,
            seccomp_dir=args.seccomp_dir,
            command=args.pod_command,
        )
    return _serve(settings, args.http)


def _given_flags(args: argparse.Namespace) -> dict[str, str | None]:
    """The settings given as flags, current and deprecated, by name."""
    names = [s.name for s in SETTINGS] + [old_name(variable) for variable in MOVED]
    return {name: getattr(args, name, None) for name in names}


def _check_trace_export() -> None:
    """Raise SettingsError if the ``OTEL_*`` variables ask for a trace export the bridge does
    not do, before anything starts."""
    from mcp_code_execution_mode._telemetry import trace_export_from_env

    trace_export_from_env()


def _token(settings: Settings, name: str) -> int:
    from mcp_code_execution_mode._tokens import TokenFileError, add_token

    if settings.http_token_file is None:
        print(
            "mcp-code-execution-mode: set MCP_BRIDGE_HTTP_TOKEN_FILE (or --http-token-file) to "
            "the token file serve --http reads",
            file=sys.stderr,
        )
        return 2
    try:
        token = add_token(settings.http_token_file, name)
    except TokenFileError as exc:
        print(f"mcp-code-execution-mode: {exc}", file=sys.stderr)
        return 2
    print(
        f"token for {name} added to {settings.http_token_file} (only its SHA-256 is stored; "
        "a running bridge picks it up within a second):",
        file=sys.stderr,
    )
    print(token)
    return 0


def _setup(args: argparse.Namespace, settings: Settings) -> int:
    from bridge_core.discovery import where

    from mcp_code_execution_mode.setup import run_setup

    old = [d for d in settings.deprecations if d.old.startswith("--")]
    if old:
        # setup writes what it is given into a client's config: not names on their way out.
        for deprecation in old:
            print(f"mcp-code-execution-mode: {deprecation.line}", file=sys.stderr)
            print(f"  fix: {deprecation.fix}", file=sys.stderr)
        return 2
    flags = {}
    for s in SETTINGS:
        raw = getattr(args, s.name, None)
        if raw is not None and raw.strip():
            path_like = s.name in _PATH_SETTINGS and raw.strip().lower() != "off"
            flags[s.env] = os.path.abspath(os.path.expanduser(raw)) if path_like else raw
    return run_setup(
        args.client,
        where=where(),
        state_dir=settings.resolved_state_dir,
        flags=flags,
        servers_file=settings.config if args.config else None,
        keep=args.keep,
        dry_run=args.dry_run,
        undo_last=args.undo,
        force=args.force,
        tools=args.tools,
    )


def _serve_misconfigured(problem: str, fix: str) -> int:
    from mcp_code_execution_mode._misconfigured import misconfigured_factory
    from mcp_code_execution_mode.serve import serve_stdio

    defaults = Settings()
    configure_logging(defaults.log_level, defaults.resolved_log_file)
    anyio.run(serve_stdio, defaults, misconfigured_factory(problem, fix))
    return 0


def _load_executor_factory(settings: Settings, *, single_client: bool = False) -> ExecutorFactory:
    # Imports most of bridge-core (runtime backends, sessions, proxy, search): see _background.
    from mcp_code_execution_mode._compose import executor_factory

    return executor_factory(settings, single_client=single_client)


def _serve(settings: Settings, http: str | None) -> int:
    from mcp_code_execution_mode.serve import (
        check_http_exposure,
        open_listener,
        parse_http_address,
        serve_http,
        serve_stdio,
    )

    if http is None:
        from mcp_code_execution_mode._background import background_factory

        # One client, which waits for `initialize` before anything else: answer it first.
        load = functools.partial(_load_executor_factory, settings, single_client=True)
        anyio.run(serve_stdio, settings, background_factory(load))
        _skip_final_collection()
        return 0
    factory = _load_executor_factory(settings)
    try:
        host, port = parse_http_address(http)
    except ValueError as exc:
        print(f"mcp-code-execution-mode: --http={http!r}: {exc}", file=sys.stderr)
        return 2
    try:
        check_http_exposure(settings, host)
        listener = open_listener(host, port)
    except ValueError as exc:  # TokenFileError included
        print(f"mcp-code-execution-mode: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"mcp-code-execution-mode: --http={http!r}: cannot listen: {exc}", file=sys.stderr)
        return 2
    anyio.run(serve_http, settings, factory, host, listener)
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
