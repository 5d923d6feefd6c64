"""Discovery: the MCP servers the user already configured in their clients, as :class:`ServerSpec`.

:func:`discover` reads every known client configuration file (see ``docs/discovery.md`` for the
list and the precedence), never raises for a bad file or entry, and reports what it skipped and
why. Reading is synchronous file I/O: async callers run it with ``anyio.to_thread.run_sync``.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from bridge_core.discovery import _claude, _codex, _cursor, _gemini, _generic, _vscode, _windsurf
from bridge_core.discovery._entry import SELF_MARKERS, launches_bridge, parse_entry
from bridge_core.discovery._expand import expand, prompted_inputs
from bridge_core.discovery._files import strip_jsonc
from bridge_core.discovery._generic import bridge_servers_file
from bridge_core.discovery._model import (
    CheckedSource,
    Conflict,
    DiscoveryProblem,
    DiscoveryReport,
    RawEntry,
    Severity,
    Source,
    SourceUnreadable,
    Where,
)

__all__ = [
    "CheckedSource",
    "Conflict",
    "DiscoveryProblem",
    "DiscoveryReport",
    "SELF_MARKERS",
    "Severity",
    "Source",
    "SourceUnreadable",
    "Where",
    "bridge_servers_file",
    "client_sources",
    "discover",
    "display_path",
    "expand",
    "launches_bridge",
    "prompted_inputs",
    "same_server",
    "strip_jsonc",
    "where",
]

logger = logging.getLogger(__name__)

_LOG_LEVELS = {"error": logging.WARNING, "warning": logging.WARNING, "info": logging.INFO}


def where(
    *,
    home: Path | None = None,
    cwd: Path | None = None,
    environ: Mapping[str, str] | None = None,
    platform: str | None = None,
) -> Where:
    """The machine to look at; each default is the real one (home, cwd, ``os.environ``, OS)."""
    return Where(
        home=Path.home() if home is None else home,
        cwd=Path.cwd() if cwd is None else cwd,
        environ=os.environ if environ is None else environ,
        platform=sys.platform if platform is None else platform,
    )


def client_sources(where: Where) -> list[Source]:
    """The files MCP clients load themselves, project scope first, in precedence order."""
    project: list[Source] = []
    # Project scope: the most specific configuration wins, as in the clients themselves.
    project += _claude.project_sources(where)
    project += _cursor.project_sources(where)
    project += _vscode.project_sources(where)
    project += _gemini.project_sources(where)
    user: list[Source] = []
    user += _claude.user_sources(where)
    user += _claude.desktop_sources(where)
    user += _cursor.user_sources(where)
    user += _vscode.user_sources(where)
    user += _windsurf.user_sources(where)
    user += _gemini.user_sources(where)
    user += _codex.user_sources(where)
    # In the home directory (cwd == home) the project's `.cursor/mcp.json` or
    # `.gemini/settings.json` is the user-wide file: the client loads it in every project, so it
    # is that, once, and `setup` edits it as such (docs/decisions/0098).
    user_files = {(_resolved(s.path), s.section) for s in user}
    project = [s for s in project if (_resolved(s.path), s.section) not in user_files]
    return project + user


def _sources(explicit: Path | None, where: Where, clients: bool) -> list[Source]:
    """Every source in precedence order: explicit, project scope, then user scope."""
    ordered: list[Source] = []
    if explicit is not None:
        ordered.append(_generic.explicit_source(explicit))
    if not clients:
        return ordered
    per_client = client_sources(where)
    project = [s for s in per_client if s.scope == "project"]
    user = [s for s in per_client if s.scope == "user"]
    # The files only the bridge reads are user-wide and exist for nothing but MCP servers: they
    # come first among user-wide files (the bridge's own file, where `setup` puts servers, first).
    own = [_generic.bridge_file_source(where), *_generic.config_dir_sources(where)]
    return ordered + project + own + user


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # a symlink loop: the file is unreadable anyway
        return path


class _Unexpanded(dict[str, str]):
    """An environment in which every variable is its own reference: ``${X}`` stays ``${X}``."""

    def get(self, key: str, default: object = None) -> str:
        return f"${{{key}}}"


def same_server(name: str, first: object, second: object) -> bool:
    """Whether two entries start the same server once client dialects are mapped (an explicit
    ``"type": "stdio"``, Gemini's ``httpUrl``...), without expanding variables."""
    specs = []
    for value in (first, second):
        spec = parse_entry(
            RawEntry(name, value, name), source="", environ=_Unexpanded(), problems=[]
        )
        specs.append(spec)
    return specs[0] is not None and specs[0] == specs[1]


def display_path(path: Path, home: Path) -> str:
    """A path as shown to users: ``~/...`` inside the home directory."""
    try:
        return "~/" + path.relative_to(home).as_posix()
    except ValueError:
        return str(path)


def discover(
    *,
    explicit: Path | None = None,
    home: Path | None = None,
    cwd: Path | None = None,
    environ: Mapping[str, str] | None = None,
    platform: str | None = None,
    clients: bool = True,
) -> DiscoveryReport:
    """Find the configured MCP servers. Defaults: the real home, cwd, ``os.environ``, platform.

    ``explicit`` is a file in any supported shape; its servers win every name conflict, and a
    missing explicit file is an ``error`` problem (every other missing file is just not found).
    ``clients=False`` reads the explicit file only (no client configuration files).
    """
    machine = where(home=home, cwd=cwd, environ=environ, platform=platform)
    report = DiscoveryReport()
    definitions: dict[str, list[str]] = {}
    seen: set[tuple[Path, str]] = set()
    unreadable: set[Path] = set()
    for source in _sources(explicit, machine, clients):
        identity = (_resolved(source.path), source.section)
        if identity in seen:  # a file named twice (a symlink to another one, say): read once
            continue
        seen.add(identity)
        shown = display_path(source.path, machine.home)
        try:
            found = source.path.is_file()
        except OSError:
            found = False
        if not found:
            report.sources_checked.append(
                CheckedSource(source.client, source.path, False, app=source.app, scope=source.scope)
            )
            if explicit is not None and source.path == explicit:
                report.problems.append(
                    DiscoveryProblem(shown, None, "explicit config file not found")
                )
            continue
        try:
            entries = source.read(source.path)
        except (SourceUnreadable, OSError) as exc:
            message = str(exc) if isinstance(exc, SourceUnreadable) else f"cannot read: {exc}"
            if identity[0] not in unreadable:  # ~/.claude.json is read twice: report it once
                unreadable.add(identity[0])
                report.problems.append(DiscoveryProblem(shown, None, message))
            report.sources_checked.append(
                CheckedSource(
                    source.client,
                    source.path,
                    True,
                    problem=message,
                    app=source.app,
                    scope=source.scope,
                )
            )
            continue
        usable: list[str] = []
        bridges: list[str] = []
        for entry in entries:
            spec = parse_entry(
                entry, source=shown, environ=machine.environ, problems=report.problems
            )
            if spec is None:
                continue
            if launches_bridge(spec):
                bridges.append(spec.name)
                report.problems.append(
                    DiscoveryProblem(
                        shown,
                        spec.name,
                        "the entry of the code-execution bridge itself (a bridge never "
                        "proxies itself)",
                        "info",
                    )
                )
                continue
            usable.append(spec.name)
            definitions.setdefault(spec.name, []).append(spec.source)
            report.servers.setdefault(spec.name, spec)
        report.sources_checked.append(
            CheckedSource(
                source.client,
                source.path,
                True,
                len(entries),
                app=source.app,
                scope=source.scope,
                usable=tuple(usable),
                bridge_entries=tuple(bridges),
            )
        )
    for name, places in definitions.items():
        if len(places) > 1:
            report.conflicts.append(Conflict(name, places[0], tuple(places[1:])))
    for problem in report.problems:
        logger.log(_LOG_LEVELS[problem.severity], "MCP server discovery: %s", problem)
    for conflict in report.conflicts:
        logger.info(
            "MCP server %r defined in several places; using %s, ignoring %s",
            conflict.name,
            conflict.winner,
            ", ".join(conflict.losers),
        )
    return report
